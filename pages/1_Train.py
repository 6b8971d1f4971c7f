"""Train: presets and hyperparameters, Start/Pause/Resume/Stop, and a live view of the run's background thread."""
import streamlit as st

from app import advice, charts, choices, compare, corpora, fields, lesson_links, navigation, runs, train_form
from app.i18n import _, error_text, language, number
from app.text import format_duration, md
from minigpt import (ConfigError, CorpusError, NotOwnerError, RunLimitError, loss_figure, overfitting, task_figure,
                     history_table, uniform_loss)

navigation.setup_page(__file__)
STEP_SIZES = (1, 10, 100)  # the Step button's choices

st.title(_("Train"))
lesson_links.link(11, 12)
st.markdown(_(
    "Train your own MiniGPT on the chosen corpus. Training runs in a background thread on the server, so it goes "
    "on while you visit other pages; the chart shows the training loss (blue), the validation loss on held-out "
    "text at each evaluation (red) and the learning rate (grey, right axis). The loss is the cross-entropy in "
    "nats. At each evaluation the run also writes a sample and keeps the attention maps for the Attention page's "
    "time-lapse."))

corpus = corpora.current_corpus()
entry, owner = runs.session_run()
train_form.ensure_filled(runs.run_settings(entry) if entry is not None else None)
keep = {"persist_state": "session"}

st.markdown(_("**Presets** fill in every setting below:"))
active = train_form.active_preset(*train_form.configs())
for col, name in zip(st.columns(len(train_form.PRESET_LABELS)), train_form.PRESET_LABELS):
    label, blurb = train_form.preset_label(name)
    col.button(label, key=f"preset:{name}", on_click=train_form.apply_preset, args=(name,), help=blurb,
               use_container_width=True, type="primary" if name == active else "secondary")
st.caption(_("The form holds the {preset} preset's settings.", preset=train_form.preset_label(active)[0]) if active
           else _("The form holds settings of your own, not a preset's."))

with st.expander(_("Hyperparameters"), expanded=entry is None):
    model_col, train_col = st.columns(2)
    h = train_form.help_for
    with model_col:
        st.markdown(_("**Model**"))
        st.select_slider(_("d_model (width)"), [16, 32, 64, 128, 256], key="d_model", help=h("d_model"), **keep)
        st.select_slider(_("num_heads (heads)"), [1, 2, 4, 8], key="num_heads", help=h("num_heads"), **keep)
        st.slider(_("num_layers (layers)"), 1, 6, key="num_layers", help=h("num_layers"), **keep)
        st.select_slider(_("d_ff (feed-forward width)"), [32, 64, 128, 256, 512, 1024], key="d_ff", help=h("d_ff"),
                         **keep)
        st.select_slider(_("max_len (positions)"), [16, 32, 64, 128, 256], key="max_len", help=h("max_len"), **keep)
        st.slider(_("dropout (rate)"), 0.0, 0.5, step=0.05, key="dropout", help=h("dropout"), **keep)
        st.checkbox(_("Divide attention scores by √d_k"), key="scale_attention", help=h("scale_attention"), **keep)
    with train_col:
        st.markdown(_("**Training**"))
        in_range = [fields.whole_number(_("Steps"), *train_form.RANGES["max_steps"], step=100, key="max_steps",
                                        help=h("max_steps"), **keep)]
        st.slider(_("Batch size"), 1, 64, key="batch_size", help=h("batch_size"), **keep)
        st.slider(_("block_size (characters per window)"), 4, 256, key="block_size", help=h("block_size"), **keep)
        st.select_slider(_("Learning rate"), [1e-4, 3e-4, 1e-3, 2e-3, 3e-3, 1e-2, 3e-2],
                         format_func=lambda v: f"{v:g}", key="lr", help=h("lr"), **keep)
        in_range += [fields.whole_number(label, *train_form.RANGES[key], key=key, help=h(key), **keep)
                     for label, key in ((_("Warmup steps"), "warmup_steps"),
                                        (_("Evaluate every … steps"), "eval_interval"), (_("Seed"), "train_seed"))]
        st.checkbox(_("Stop early when the validation loss stops improving"), key=train_form.EARLY_STOP,
                    help=h(train_form.EARLY_STOP), **keep)

model_cfg, train_cfg = train_form.configs()
with st.expander(_("A link to these settings, to send a class")):
    st.caption(_("Whoever opens it gets this form filled with these settings (their own run, not yours)."))
    st.code(f"{(st.context.url or '').split('?')[0]}?{train_form.PARAM}={train_form.to_param(model_cfg, train_cfg)}"
            f"&lang={language()}", language=None, wrap_lines=True)
try:
    _tokenizer, sized, _train = runs.run_configs(corpus, model_cfg, train_cfg)
except (ConfigError, CorpusError) as err:
    settings_ok = False
    st.error(md(error_text(err)))
else:
    settings_ok = None not in in_range  # a box outside its range has said so under itself
registry = runs.registry()
busy = registry.active_count()
own_active = owner and entry is not None and entry.is_active()
slots_full = busy >= registry.max_runs and not own_active
facts = [_("Corpus **{corpus}** ({chars:,} characters)", corpus=md(corpus.label), chars=len(corpus.text)),
         _("device **{device}**", device=choices.current_device())]
if settings_ok:
    facts.append(_("a new run with these settings: **{params:,}** parameters", params=sized.num_params()))
facts.append(_("{busy} of {slots} training slots in use on this server", busy=busy, slots=registry.max_runs))
st.caption(" · ".join(facts))

state = entry.run.state if entry is not None else None
buttons = st.columns([1.4, 1, 1, 1, 4])
start = buttons[0].button(
    _("Start") if entry is None or not owner else _("Start a new run"), key="start", type="primary",
    disabled=not settings_ok or slots_full,
    help=(_("All {slots} training slots on this server are busy: wait until a run finishes.", slots=registry.max_runs)
          if slots_full else _("Train a new model; it replaces your previous run, never anyone else's.")))
pause = buttons[1].button(_("Pause"), key="pause", disabled=not (owner and state == "running"))
resume = buttons[2].button(_("Resume"), key="resume", disabled=not (owner and state == "paused"))
stop = buttons[3].button(_("Stop"), key="stop", disabled=not (owner and state in ("running", "paused")),
                         help=_("End the run; its model stays loaded for Generate, Attention and the download."))
step_cols = st.columns([1.4, 1.2, 4], vertical_alignment="bottom")
steps_at_a_time = step_cols[1].segmented_control(_("Steps at a time"), STEP_SIZES, default=10, key="step_size",
                                                 label_visibility="collapsed") or 1
step = step_cols[0].button(_("Step ×{n}", n=steps_at_a_time), key="step", disabled=not (owner and state == "paused"),
                           help=_("Train exactly this many steps, then pause, and watch what they changed. Pause a "
                                  "run first, or press Reset."))
reset = step_cols[2].button(_("Reset"), key="reset", disabled=not settings_ok or slots_full,
                            help=_("A new run with these settings, paused at step 0: step through it from the start."))
if slots_full:
    st.info(_("All {slots} training slots on this server are in use. Start comes back when one finishes; meanwhile "
              "Generate and Attention work with the loaded model.", slots=registry.max_runs))

if start or reset:
    try:
        runs.start_run(corpus, model_cfg, train_cfg, paused=reset)
    except (ConfigError, CorpusError, RunLimitError) as err:
        st.error(md(error_text(err)))
    else:
        compare.keep_before_replacing(entry if owner else None)  # the run just replaced
        st.rerun()
for action, clicked in (("pause", pause), ("resume", resume), ("stop", stop), (f"steps:{steps_at_a_time}", step)):
    if clicked:
        try:
            runs.control_run(action)
        except NotOwnerError as err:
            st.error(md(error_text(err)))
        else:
            st.rerun()

if entry is None:
    st.info(_("No run yet: pick a preset (or set the hyperparameters) and press **Start**. The default, *Small*, "
              "learns the course text's style in about half a minute."))
    st.stop()
if not owner:
    st.info(_("You are watching run `{run}`, read-only: only the browser session that started it can pause or stop "
              "it. Press Start to train a run of your own.", run=entry.run_id))
run_model, run_train = runs.run_settings(entry)
st.markdown(_("**Run `{run}`** on {corpus}: {settings} · **{params:,}** parameters", run=entry.run_id,
              corpus=md(entry.corpus), settings=train_form.describe(run_model, run_train),
              params=entry.run.trainer.model_params))


@st.fragment(run_every=1.0 if state == "running" else None)
def live_panel() -> None:
    current, _owner = runs.session_run()  # the owner's poll keeps the run from being released as idle
    if current is None:
        st.rerun()
    snap = current.run.snapshot()
    trainer = current.run.trainer
    vocab = trainer.tokenizer.vocab_size
    uniform = uniform_loss(vocab)
    cols = st.columns(5)
    cols[0].metric(_("State"), advice.state_label(snap.state), help=advice.metric_help("state"))
    cols[1].metric(_("Step (of {total:,})", total=snap.max_steps), number(snap.step), help=advice.metric_help("step"))
    cols[2].metric(_("Characters/s"), number(snap.tokens_per_sec, ",.0f"), help=advice.metric_help("tokens"))
    cols[3].metric(_("ETA"), format_duration(snap.eta_seconds) if snap.state == "running" else "–",
                   help=advice.metric_help("eta"))
    last_val = snap.evals[-1].val_loss if snap.evals else None
    cols[4].metric(_("Val loss (nats)"), number(last_val, ".3f") if last_val is not None else "–",
                   delta=_("{diff:+.2f} vs guessing", diff=last_val - uniform) if last_val is not None else None,
                   delta_color="inverse", help=advice.metric_help("val"))
    st.progress(min(snap.progress, 1.0), text=_("{done:.0%} of {total:,} steps", done=snap.progress,
                                                  total=snap.max_steps))
    if last_val is not None:
        st.caption(advice.perplexity_note(last_val))
    if snap.error:
        st.error(_("Training stopped: {error}", error=md(error_text(snap.error))))
    if snap.stopped_early:
        best_step, best = trainer.best_val
        st.success(_("Stopped early at step {step:,}: the validation loss has not improved on {best:.3f} (step "
                     "{best_step:,}) for {patience} evaluations, so the model went back to its weights of step "
                     "{best_step:,}.", step=snap.step, best=best, best_step=best_step,
                     patience=trainer.cfg.early_stop_patience))
    over = overfitting([(r.step, r.train_loss, r.val_loss) for r in snap.evals])
    task = trainer.task
    floor = task.loss_floor(trainer.cfg.block_size) if task is not None else None
    figure = loss_figure(snap.history, uniform=uniform, overfit=over, floor=floor, tr=_)
    st.plotly_chart(figure, key="loss_chart", config=charts.config())
    if snap.state != "running":
        charts.html_button([figure], _("Loss"), "loss")
    scored = [e for e in snap.history if e.task_accuracy is not None]
    if task is not None and scored:
        last = scored[-1]
        st.markdown(_("**The {task} task** on {lines:,} held-out lines, at step {step:,}: **{chars:.0%}** of the "
                      "answer characters are the model's first choice, and **{whole:.0%}** of the answers are right "
                      "from the first character to the last, which is what greedy decoding writes. Guessing gets "
                      "{chance:.0%} of the characters.", task=advice.task_label(task.name),
                      lines=trainer.task_lines, step=last.step, chars=last.task_accuracy, whole=last.task_solved,
                      chance=1 / len(task.alphabet)))
        st.plotly_chart(task_figure(snap.history, 1 / len(task.alphabet), tr=_), key="task_chart",
                        config=charts.config())
    if over is not None:
        st.warning(advice.overfitting_warning(over, trainer.corpus_chars, trainer.cfg.early_stop_patience > 0))
    if last_val is not None and last_val > uniform and snap.step > 0:
        st.warning(advice.worse_than_guessing(last_val, uniform, vocab))
    if trainer.unseen.chars:
        st.info(advice.unseen_note(trainer.unseen))
    if snap.evals:
        st.markdown(_("**Sample at step {step:,}** (temperature 0.8)", step=snap.evals[-1].step))
        st.code(snap.evals[-1].sample, language=None, wrap_lines=True)
    if snap.state != state:
        st.rerun()  # a full rerun re-evaluates run_every: polling stops once the run is not running


live_panel()

st.download_button(_("Download checkpoint (.zip)"), data=lambda: runs.run_checkpoint_zip(entry),
                   file_name=f"minigpt-{entry.run_id}.zip", mime="application/zip", on_click="ignore",
                   key="download", help=_("The current weights; upload the zip on Home to use them again."))
st.download_button(_("Download the history (.csv)"), data=lambda: history_table(entry.run.snapshot().history).to_csv(
                   index=False), file_name=f"minigpt-{entry.run_id}-history.csv", mime="text/csv", on_click="ignore",
                   key="download_history", help=_("Every logged step: train loss, validation loss, learning rate, "
                                                  "characters/s and time, one row each."))
compare.keep_button(entry)
st.markdown(_("**Share a read-only view** of this run (copy it with the icon on the right):"))
st.code(runs.readonly_link(entry), language=None)
if owner:
    st.caption(_("The `key` in your address bar is what lets you control the run: keep that address to yourself."))
