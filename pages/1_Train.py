"""Train: hyperparameters, Start/Pause/Resume/Stop, and a live view of the run's background thread."""
import streamlit as st

from app import choices, corpora, navigation, runs
from app.text import format_duration, md
from minigpt import ConfigError, CorpusError, GPTConfig, NotOwnerError, RunLimitError, TrainConfig, loss_figure

navigation.setup_page(__file__)

st.title("Train")
st.markdown(
    "Train your own MiniGPT on the chosen corpus. Training runs in a background thread on the server, "
    "so it goes on while you visit other pages; the chart shows the training loss (blue), the validation "
    "loss at each evaluation (red) and the learning rate (grey, right axis). At each evaluation the run "
    "also writes a sample and keeps the attention maps for the Attention page's time-lapse."
)

corpus = corpora.current_corpus()
entry, owner = runs.session_run()
keep = {"persist_state": "session"}

with st.expander("Hyperparameters", expanded=entry is None):
    model_col, train_col = st.columns(2)
    with model_col:
        st.markdown("**Model**")
        d_model = st.select_slider("d_model (width)", [16, 32, 64, 128, 256], value=GPTConfig.d_model,
                                   key="d_model", **keep)
        num_heads = st.select_slider("num_heads", [1, 2, 4, 8], value=GPTConfig.num_heads, key="num_heads", **keep)
        num_layers = st.slider("num_layers", 1, 6, value=GPTConfig.num_layers, key="num_layers", **keep)
        d_ff = st.select_slider("d_ff (feed-forward width)", [32, 64, 128, 256, 512, 1024], value=GPTConfig.d_ff,
                                key="d_ff", **keep)
        max_len = st.select_slider("max_len (positions)", [16, 32, 64, 128, 256], value=GPTConfig.max_len,
                                   key="max_len", **keep)
        dropout = st.slider("dropout", 0.0, 0.5, value=GPTConfig.dropout, step=0.05, key="dropout", **keep)
        scale = st.checkbox("Divide attention scores by √d_k", value=GPTConfig.scale_attention,
                            key="scale_attention", help="Untick to train without it (see the √d_k page).", **keep)
    with train_col:
        st.markdown("**Training**")
        max_steps = st.number_input("Steps", 10, 20_000, value=TrainConfig.max_steps, step=100,
                                    key="max_steps", **keep)
        batch_size = st.slider("Batch size", 1, 64, value=TrainConfig.batch_size, key="batch_size", **keep)
        block_size = st.slider("block_size (characters per window)", 4, 256, value=TrainConfig.block_size,
                               key="block_size", help="At most max_len.", **keep)
        lr = st.select_slider("Learning rate", [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2], value=TrainConfig.lr,
                              format_func=lambda v: f"{v:g}", key="lr",
                              help="Peak rate after warmup; cosine decay to a tenth of it.", **keep)
        warmup_steps = st.number_input("Warmup steps", 0, 5_000, value=TrainConfig.warmup_steps,
                                       key="warmup_steps", **keep)
        eval_interval = st.number_input("Evaluate every … steps", 1, 5_000, value=TrainConfig.eval_interval,
                                        key="eval_interval", **keep)
        seed = st.number_input("Seed", 0, 2**31 - 1, value=TrainConfig.seed, key="train_seed", **keep)

model_cfg = GPTConfig(d_model=d_model, num_heads=num_heads, num_layers=num_layers, d_ff=d_ff, max_len=max_len,
                      dropout=dropout, scale_attention=scale)
train_cfg = TrainConfig(max_steps=int(max_steps), batch_size=batch_size, block_size=block_size, lr=lr,
                        min_lr=lr * TrainConfig.min_lr / TrainConfig.lr, warmup_steps=int(warmup_steps),
                        eval_interval=int(eval_interval), seed=int(seed))
try:
    _, sized, _ = runs.run_configs(corpus, model_cfg, train_cfg)
except (ConfigError, CorpusError) as err:
    settings_ok = False
    st.error(str(err))
else:
    settings_ok = True
st.caption(
    f"Corpus **{md(corpus.label)}** ({len(corpus.text):,} characters) · device **{choices.current_device()}**"
    + (f" · **{sized.num_params():,}** parameters" if settings_ok else "")
    + f" · {runs.registry().active_count()} of {runs.registry().max_runs} training slots in use on this server"
)

state = entry.run.state if entry is not None else None
buttons = st.columns([1.4, 1, 1, 1, 4])
start = buttons[0].button("Start" if entry is None or not owner else "Start a new run", key="start",
                          type="primary", disabled=not settings_ok,
                          help="Train a new model; it replaces your previous run, never anyone else's.")
pause = buttons[1].button("Pause", key="pause", disabled=not (owner and state == "running"))
resume = buttons[2].button("Resume", key="resume", disabled=not (owner and state == "paused"))
stop = buttons[3].button("Stop", key="stop", disabled=not (owner and state in ("running", "paused")),
                         help="End the run; its model stays loaded for Generate, Attention and the download.")

if start:
    try:
        runs.start_run(corpus, model_cfg, train_cfg)
    except (ConfigError, CorpusError, RunLimitError) as err:
        st.error(str(err))
    else:
        st.rerun()
for action, clicked in (("pause", pause), ("resume", resume), ("stop", stop)):
    if clicked:
        try:
            runs.control_run(action)
        except (NotOwnerError, KeyError) as err:
            st.error(str(err))
        else:
            st.rerun()

if entry is None:
    st.info("No run yet: set the hyperparameters and press **Start**. A tiny model (d_model 32, 1 layer, "
            "500 steps) finishes in under a minute.")
    st.stop()
if not owner:
    st.info(f"You are watching run `{entry.run_id}`, read-only: only the browser session that started it can "
            f"pause or stop it. Press Start to train a run of your own.")


@st.fragment(run_every=1.0 if state == "running" else None)
def live_panel() -> None:
    current, _ = runs.session_run()  # the owner's poll keeps the run from being released as idle
    if current is None:
        st.rerun()
    snap = current.run.snapshot()
    cols = st.columns(5)
    cols[0].metric("State", snap.state)
    cols[1].metric("Step", f"{snap.step:,} / {snap.max_steps:,}")
    cols[2].metric("Tokens/s", f"{snap.tokens_per_sec:,.0f}")
    cols[3].metric("ETA", format_duration(snap.eta_seconds) if snap.state == "running" else "–")
    cols[4].metric("Val loss", f"{snap.evals[-1].val_loss:.3f}" if snap.evals else "–")
    st.progress(min(snap.progress, 1.0), text=f"{snap.progress:.0%} of {snap.max_steps:,} steps")
    if snap.error:
        st.error(f"Training stopped: {snap.error}")
    st.plotly_chart(loss_figure(snap.history), key="loss_chart")
    if snap.evals:
        st.markdown(f"**Sample at step {snap.evals[-1].step:,}** (temperature 0.8)")
        st.code(snap.evals[-1].sample, language=None, wrap_lines=True)
    else:
        st.caption(f"A sample of generated text appears here at the first evaluation "
                   f"(step {current.run.trainer.cfg.eval_interval:,}).")
    if snap.state != state:
        st.rerun()  # a full rerun re-evaluates run_every: polling stops once the run is not running


live_panel()

st.download_button("Download checkpoint (.zip)", data=lambda: runs.run_checkpoint_zip(entry),
                   file_name=f"minigpt-{entry.run_id}.zip", mime="application/zip", on_click="ignore",
                   key="download", help="The current weights; upload the zip on Home to use them again.")
st.caption(f"Share a read-only view of this run: this page's address with only `?run={entry.run_id}`. "
           + ("The `key` in your address bar is what lets you control it: keep it to yourself." if owner else ""))
