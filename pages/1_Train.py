"""Train: presets and hyperparameters, Start/Pause/Resume/Stop, and a live view of the run's background thread."""
import streamlit as st

from app import advice, choices, corpora, navigation, runs, train_form
from app.text import format_duration, md
from minigpt import (ConfigError, CorpusError, NotOwnerError, RunLimitError, loss_figure, overfitting,
                     uniform_loss)

navigation.setup_page(__file__)

st.title("Train")
st.markdown(
    "Train your own MiniGPT on the chosen corpus. Training runs in a background thread on the server, "
    "so it goes on while you visit other pages; the chart shows the training loss (blue), the validation "
    "loss on held-out text at each evaluation (red) and the learning rate (grey, right axis). At each "
    "evaluation the run also writes a sample and keeps the attention maps for the Attention page's time-lapse."
)

corpus = corpora.current_corpus()
entry, owner = runs.session_run()
train_form.ensure_filled(runs.run_settings(entry) if entry is not None else None)
keep = {"persist_state": "session"}

st.markdown("**Presets** fill in every setting below:")
for col, (name, (label, blurb)) in zip(st.columns(len(train_form.PRESET_LABELS)), train_form.PRESET_LABELS.items()):
    col.button(label, key=f"preset:{name}", on_click=train_form.apply_preset, args=(name,), help=blurb,
               use_container_width=True)

with st.expander("Hyperparameters", expanded=entry is None):
    model_col, train_col = st.columns(2)
    h = train_form.help_for
    with model_col:
        st.markdown("**Model**")
        st.select_slider("d_model (width)", [16, 32, 64, 128, 256], key="d_model", help=h("d_model"), **keep)
        st.select_slider("num_heads", [1, 2, 4, 8], key="num_heads", help=h("num_heads"), **keep)
        st.slider("num_layers", 1, 6, key="num_layers", help=h("num_layers"), **keep)
        st.select_slider("d_ff (feed-forward width)", [32, 64, 128, 256, 512, 1024], key="d_ff", help=h("d_ff"),
                         **keep)
        st.select_slider("max_len (positions)", [16, 32, 64, 128, 256], key="max_len", help=h("max_len"), **keep)
        st.slider("dropout", 0.0, 0.5, step=0.05, key="dropout", help=h("dropout"), **keep)
        st.checkbox("Divide attention scores by √d_k", key="scale_attention", help=h("scale_attention"), **keep)
    with train_col:
        st.markdown("**Training**")
        st.number_input("Steps", 10, 20_000, step=100, key="max_steps", help=h("max_steps"), **keep)
        st.slider("Batch size", 1, 64, key="batch_size", help=h("batch_size"), **keep)
        st.slider("block_size (characters per window)", 4, 256, key="block_size", help=h("block_size"), **keep)
        st.select_slider("Learning rate", [1e-4, 3e-4, 1e-3, 2e-3, 3e-3, 1e-2, 3e-2], format_func=lambda v: f"{v:g}",
                         key="lr", help=h("lr"), **keep)
        st.number_input("Warmup steps", 0, 5_000, key="warmup_steps", help=h("warmup_steps"), **keep)
        st.number_input("Evaluate every … steps", 1, 5_000, key="eval_interval", help=h("eval_interval"), **keep)
        st.number_input("Seed", 0, 2**31 - 1, key="train_seed", help=h("train_seed"), **keep)
        st.checkbox("Stop early when the validation loss stops improving", key=train_form.EARLY_STOP,
                    help=train_form.EARLY_STOP_HELP, **keep)

model_cfg, train_cfg = train_form.configs()
try:
    _, sized, _ = runs.run_configs(corpus, model_cfg, train_cfg)
except (ConfigError, CorpusError) as err:
    settings_ok = False
    st.error(str(err))
else:
    settings_ok = True
registry = runs.registry()
busy = registry.active_count()
own_active = owner and entry is not None and entry.is_active()
slots_full = busy >= registry.max_runs and not own_active
st.caption(
    f"Corpus **{md(corpus.label)}** ({len(corpus.text):,} characters) · device **{choices.current_device()}**"
    + (f" · a new run with these settings: **{sized.num_params():,}** parameters" if settings_ok else "")
    + f" · {busy} of {registry.max_runs} training slots in use on this server"
)

state = entry.run.state if entry is not None else None
buttons = st.columns([1.4, 1, 1, 1, 4])
start = buttons[0].button(
    "Start" if entry is None or not owner else "Start a new run", key="start", type="primary",
    disabled=not settings_ok or slots_full,
    help=(f"All {registry.max_runs} training slots on this server are busy: wait until a run finishes."
          if slots_full else "Train a new model; it replaces your previous run, never anyone else's."))
pause = buttons[1].button("Pause", key="pause", disabled=not (owner and state == "running"))
resume = buttons[2].button("Resume", key="resume", disabled=not (owner and state == "paused"))
stop = buttons[3].button("Stop", key="stop", disabled=not (owner and state in ("running", "paused")),
                         help="End the run; its model stays loaded for Generate, Attention and the download.")
if slots_full:
    st.info(f"All {registry.max_runs} training slots on this server are in use. Start comes back when one "
            f"finishes; meanwhile Generate and Attention work with the loaded model.")

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
    st.info("No run yet: pick a preset (or set the hyperparameters) and press **Start**. The default, *Small*, "
            "learns the course text's style in about half a minute.")
    st.stop()
if not owner:
    st.info(f"You are watching run `{entry.run_id}`, read-only: only the browser session that started it can "
            f"pause or stop it. Press Start to train a run of your own.")
run_model, run_train = runs.run_settings(entry)
st.markdown(f"**Run `{entry.run_id}`** on {md(entry.corpus)}: {train_form.describe(run_model, run_train)} · "
            f"**{entry.run.trainer.model_params:,}** parameters")


@st.fragment(run_every=1.0 if state == "running" else None)
def live_panel() -> None:
    current, _ = runs.session_run()  # the owner's poll keeps the run from being released as idle
    if current is None:
        st.rerun()
    snap = current.run.snapshot()
    trainer = current.run.trainer
    vocab = trainer.tokenizer.vocab_size
    uniform = uniform_loss(vocab)
    cols = st.columns(5)
    cols[0].metric("State", snap.state, help=advice.METRIC_HELP["state"])
    cols[1].metric(f"Step (of {snap.max_steps:,})", f"{snap.step:,}", help=advice.METRIC_HELP["step"])
    cols[2].metric("Tokens/s", f"{snap.tokens_per_sec:,.0f}", help=advice.METRIC_HELP["tokens"])
    cols[3].metric("ETA", format_duration(snap.eta_seconds) if snap.state == "running" else "–",
                   help=advice.METRIC_HELP["eta"])
    last_val = snap.evals[-1].val_loss if snap.evals else None
    cols[4].metric("Val loss (nats)", f"{last_val:.3f}" if last_val is not None else "–",
                   delta=f"{last_val - uniform:+.2f} vs guessing" if last_val is not None else None,
                   delta_color="inverse", help=advice.METRIC_HELP["val"])
    st.progress(min(snap.progress, 1.0), text=f"{snap.progress:.0%} of {snap.max_steps:,} steps")
    if snap.error:
        st.error(f"Training stopped: {snap.error}")
    if snap.stopped_early:
        best_step, best = trainer.best_val
        st.success(f"Stopped early at step {snap.step:,}: the validation loss has not improved on {best:.3f} "
                   f"(step {best_step:,}) for {trainer.cfg.early_stop_patience} evaluations, so the model went back "
                   f"to its weights of step {best_step:,}.")
    over = overfitting([(r.step, r.train_loss, r.val_loss) for r in snap.evals])
    st.plotly_chart(loss_figure(snap.history, uniform=uniform, overfit=over), key="loss_chart",
                    config={"displaylogo": False})
    if over is not None:
        st.warning(advice.overfitting_warning(over, trainer.corpus_chars, trainer.cfg.early_stop_patience > 0))
    if last_val is not None and last_val > uniform and snap.step > 0:
        st.warning(advice.worse_than_guessing(last_val, uniform, vocab))
    if trainer.unseen.chars:
        st.info(advice.unseen_note(trainer.unseen))
    if snap.evals:
        st.markdown(f"**Sample at step {snap.evals[-1].step:,}** (temperature 0.8)")
        st.code(snap.evals[-1].sample, language=None, wrap_lines=True)
    if snap.state != state:
        st.rerun()  # a full rerun re-evaluates run_every: polling stops once the run is not running


live_panel()

st.download_button("Download checkpoint (.zip)", data=lambda: runs.run_checkpoint_zip(entry),
                   file_name=f"minigpt-{entry.run_id}.zip", mime="application/zip", on_click="ignore",
                   key="download", help="The current weights; upload the zip on Home to use them again.")
st.markdown("**Share a read-only view** of this run (copy it with the icon on the right):")
st.code(runs.readonly_link(entry), language=None)
if owner:
    st.caption("The `key` in your address bar is what lets you control the run: keep that address to yourself.")
