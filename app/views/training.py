"""The Train page's run: what a new run would be, the buttons that start and steer it, and the
live view of the run this session owns or watches, redrawn every second while it trains."""
from __future__ import annotations

import streamlit as st

from minigpt import DEFAULT_PRESET, PRESETS, ConfigError, CorpusError, GPTConfig, TrainConfig
from minigpt.lab.diagnosis import overfitting, uniform_loss
from minigpt.lab.run_records import csv_text, history_table
from minigpt.serve import INTERRUPTED, SAMPLE_TEMPERATURE, NotOwnerError, RunEntry
from minigpt.viz import loss_figure, task_figure

from app.chrome import charts
from app.chrome.i18n import _, error_text, number
from app.chrome.text import format_duration, md
from app.parts import compare, line, post
from app.state import kept_runs, run_notes, runs, serving, train_settings
from app.state.choices import current_device
from app.state.corpora import Corpus, RunFacts

STEP_SIZES = (1, 10, 100)  # the Step button's choices
ACTIONS = ("pause", "resume", "stop")


def new_run_line(corpus: Corpus, model: GPTConfig, train: TrainConfig, in_range: bool) -> bool:
    """One line on what Start would train here, or why these settings cannot train; True when they can.
    In a class with a challenge, whether such a run would meet it."""
    try:
        _tokenizer, sized, checked = runs.run_configs(corpus, model, train)
    except (ConfigError, CorpusError) as err:
        st.error(md(error_text(err)))
        settings_ok = False
    else:
        settings_ok = in_range  # a box outside its range has said so under itself
    facts = [corpus_fact(corpus), _("device **{device}**", device=serving.run_device() or current_device())]
    if settings_ok:
        facts.append(_("a new run with these settings: **{params:,}** parameters", params=sized.num_params()))
    facts.append(line.server_line())
    st.caption(" · ".join(facts))
    if settings_ok:
        post.challenge_note(corpus.key, sized, checked)
    return settings_ok


def corpus_fact(corpus: Corpus) -> str:
    """What the new run line says of the corpus: its name and length, and whose text a class's is."""
    if corpus.of_class:
        return _("Corpus **{corpus}**, the text of class {code} ({chars:,} characters)", corpus=md(corpus.label),
                 code=corpus.of_class, chars=len(corpus.text))
    return _("Corpus **{corpus}** ({chars:,} characters)", corpus=md(corpus.label), chars=len(corpus.text))


def controls(corpus: Corpus, model: GPTConfig, train: TrainConfig, settings_ok: bool) -> None:
    """Start, Pause, Resume, Stop, Step ×n and Reset, and what pressing one does."""
    entry, owner = runs.session_run()
    registry = runs.registry()
    own_active = owner and entry is not None and (entry.is_active() or entry.is_waiting())
    line_ahead = registry.active_count() >= registry.max_runs and not own_active  # a new run would wait
    state = entry.run.state if entry is not None and owner else None
    buttons = st.columns([1.4, 1, 1, 1, 4])
    start = buttons[0].button(
        _("Start") if state is None else _("Start a new run"), key="start", type="primary", disabled=not settings_ok,
        help=(_("Every training slot is in use: your run waits in line and starts by itself when its turn comes. It "
                "replaces your previous run, never anyone else's.") if line_ahead
              else _("Train a new model; it replaces your previous run, never anyone else's.")))
    clicked = {"pause": buttons[1].button(_("Pause"), key="pause", disabled=state != "running"),
               "resume": buttons[2].button(_("Resume"), key="resume", disabled=state not in ("paused", INTERRUPTED)),
               "stop": buttons[3].button(_("Stop"), key="stop", disabled=state not in ("running", "paused"),
                                         help=_("End the run; its model stays loaded for Generate, Attention and "
                                                "the download."))}
    step_cols = st.columns([1.4, 1.2, 4], vertical_alignment="bottom")
    size = step_cols[1].segmented_control(_("Steps at a time"), STEP_SIZES, default=10, key="step_size",
                                          label_visibility="collapsed") or 1
    clicked[f"steps:{size}"] = step_cols[0].button(
        _("Step ×{n}", n=size), key="step", disabled=state != "paused",
        help=_("Train exactly this many steps, then pause, and watch what they changed. Pause a run first, or press "
               "Reset."))
    reset = step_cols[2].button(_("Reset"), key="reset", disabled=not settings_ok,
                                help=_("A new run with these settings, paused at step 0: step through it from the "
                                       "start."))
    if (start or reset) and kept_runs.start_run_keeping_the_last(corpus, model, train, paused=reset):
        st.rerun()
    for action, pressed in clicked.items():
        if pressed:
            try:
                runs.control_run(action)
            except NotOwnerError as err:
                st.error(md(error_text(err)))
            else:
                st.rerun()


def run_heading(entry: RunEntry | None, owner: bool) -> None:
    """Whose run this is and its settings; with no run, how to start one (and the page ends there)."""
    if entry is None:
        st.info(_("No run yet: pick a preset (or set the hyperparameters) and press **Start**. The default, *{preset}*,"
                  " learns the course text's style.", preset=_(PRESETS[DEFAULT_PRESET].label)))
        st.stop()
    if not owner:
        st.info(_("You are watching run `{run}`, read-only: only the browser session that started it can pause or "
                  "stop it. Press Start to train a run of your own.", run=entry.run_id))
    model, train = runs.run_settings(entry)
    st.markdown(_("**Run `{run}`** on {corpus}: {settings} · **{params:,}** parameters", run=entry.run_id,
                  corpus=md(entry.corpus), settings=train_settings.describe(model, train),
                  params=entry.run.trainer.model_params))


def live_view(entry: RunEntry) -> None:
    """The run's numbers and curves, redrawn every second while it trains (a fragment: the rest of
    the page stays as it is)."""
    moving = entry.run.state in ("running", "waiting", "starting")
    st.fragment(_live, run_every=1.0 if moving else None)(entry.run.state)


def _live(state: str) -> None:
    current, owner = runs.session_run()  # the owner's poll keeps the run from being released as idle
    if current is None:
        st.rerun()
    if current.run.state in ("waiting", "starting"):
        if current.run.state != state:
            st.rerun()
        if current.run.state == "waiting":
            line.waiting_view(current, owner)
        else:
            st.info(_("Your turn has come: the run is starting."))
        return
    snap = current.run.snapshot()
    trainer = current.run.trainer
    facts: RunFacts = current.facts
    if snap.state == INTERRUPTED:
        interrupted_note(current.run, owner)
    uniform = uniform_loss(trainer.tokenizer.vocab_size)
    last_val = snap.evals[-1].val_loss if snap.evals else None
    _metrics(snap, uniform, last_val)
    if snap.state == "running":
        line.busy_note(current, snap)
    line.paused_note(current, owner)
    if snap.notice is not None:  # its machine left the cluster: it went on from a checkpoint elsewhere
        st.info(error_text(snap.notice))
    if snap.error:
        st.error(_("Training stopped: {error}", error=md(error_text(snap.error))))
    if snap.stopped_early:
        best_step, best = trainer.best_val
        st.success(_("Stopped early at step {step:,}: the validation loss has not improved on {best:.3f} (step "
                     "{best_step:,}) for {patience} evaluations, so the model went back to its weights of step "
                     "{best_step:,}.", step=snap.step, best=best, best_step=best_step,
                     patience=trainer.cfg.early_stop_patience))
    over = overfitting([(r.step, r.train_loss, r.val_loss) for r in snap.evals])
    task = facts.task
    floor = task.loss_floor(trainer.cfg.block_size) if task is not None else None
    figure = loss_figure(snap.history, uniform=uniform, overfit=over, floor=floor, tr=_)
    st.plotly_chart(figure, key="loss_chart", config=charts.config())
    if snap.state != "running":
        charts.html_button([figure], _("Loss"), "loss")
    scored = [e for e in snap.history if e.score is not None]
    if task is not None and scored:
        last = scored[-1].score
        st.markdown(_("**The {task} task** on {lines:,} held-out lines, at step {step:,}: **{chars:.0%}** of the "
                      "answer characters are the model's first choice, and **{whole:.0%}** of the answers are right "
                      "from the first character to the last, which is what greedy decoding writes. Guessing gets "
                      "{chance:.0%} of the characters.", task=run_notes.task_label(task.name), lines=last.count,
                      step=scored[-1].step, chars=last.chars, whole=last.lines, chance=last.chance))
        st.plotly_chart(task_figure(snap.history, last.chance, tr=_), key="task_chart", config=charts.config())
    if over is not None:
        st.warning(run_notes.overfitting_warning(over, trainer.corpus_chars, trainer.cfg.early_stop_patience > 0))
    if last_val is not None and last_val > uniform and snap.step > 0:
        st.warning(run_notes.worse_than_guessing(last_val, uniform, trainer.tokenizer.vocab_size))
    if facts.unseen.chars:
        st.info(run_notes.unseen_note(facts.unseen))
    if snap.evals:
        st.markdown(_("**Sample at step {step:,}** (temperature {temperature:g})", step=snap.evals[-1].step,
                      temperature=SAMPLE_TEMPERATURE))
        st.code(snap.evals[-1].sample, language=None, wrap_lines=True)
    if snap.state != state:
        st.rerun()  # a full rerun re-evaluates run_every: polling stops once the run is not running


def interrupted_note(run, owner: bool) -> None:
    """A run that was training when the server stopped: where it stopped, and where Resume goes on from."""
    resume = run.resume_step
    step = max(run.snapshot().step, resume or 0)
    if resume is None:
        st.warning(_("Interrupted at step {step:,}: the server stopped while this run trained, before its first "
                     "checkpoint. Resume trains it again from the start.", step=step) if owner else
                   _("Interrupted at step {step:,}: the server stopped while this run trained.", step=step))
    elif owner:
        st.warning(_("Interrupted at step {step:,}: the server stopped while this run trained. Resume trains it on from "
                     "step {resume:,}, its last checkpoint, exactly as it would have gone on.", step=step, resume=resume))
    else:
        st.warning(_("Interrupted at step {step:,}: the server stopped while this run trained. Its owner can resume "
                     "it from step {resume:,}.", step=step, resume=resume))


def _metrics(snap, uniform: float, last_val: float | None) -> None:
    cols = st.columns([1.4, 1, 1, 1, 1])  # the state's column fits "interrupted", and 已中断
    cols[0].metric(_("State"), run_notes.state_label(snap.state), help=run_notes.metric_help("state"))
    cols[1].metric(_("Step (of {total:,})", total=snap.max_steps), number(snap.step), help=run_notes.metric_help("step"))
    cols[2].metric(_("Characters/s"), number(snap.tokens_per_sec, ",.0f"), help=run_notes.metric_help("tokens"))
    cols[3].metric(_("ETA"), format_duration(snap.eta_seconds) if snap.state == "running" else "–",
                   help=run_notes.metric_help("eta"))
    cols[4].metric(_("Val loss (nats)"), number(last_val, ".3f") if last_val is not None else "–",
                   delta=_("{diff:+.2f} vs guessing", diff=last_val - uniform) if last_val is not None else None,
                   delta_color="inverse", help=run_notes.metric_help("val"))
    st.progress(min(snap.progress, 1.0), text=_("{done:.0%} of {total:,} steps", done=snap.progress,
                                                  total=snap.max_steps))
    if last_val is not None:
        st.caption(run_notes.perplexity_note(last_val))


def downloads_and_sharing(entry: RunEntry, owner: bool) -> None:
    """The run's checkpoint and history to download, keeping it for the comparison, and a link to watch it."""
    if getattr(entry.run, "resume_step", 0) is not None:  # a run read back from the store keeps its checkpoint's
        st.download_button(_("Download checkpoint (.zip)"), data=lambda: runs.run_checkpoint_zip(entry),
                           file_name=f"minigpt-{entry.run_id}.zip", mime="application/zip", on_click="ignore",
                           key="download", help=_("The current weights; upload the zip on Home to use them again."))
    st.download_button(_("Download the history (.csv)"),
                       data=lambda: csv_text(history_table(entry.run.snapshot().history)),
                       file_name=f"minigpt-{entry.run_id}-history.csv", mime="text/csv", on_click="ignore",
                       key="download_history", help=_("Every logged step: train loss, validation loss, learning "
                                                      "rate, characters/s and time, one row each."))
    compare.keep_button(entry)
    post.post_button(entry, owner)
    st.markdown(_("**Share a read-only view** of this run (copy it with the icon on the right):"))
    st.code(runs.readonly_link(entry), language=None)
    if owner:
        st.caption(_("The `key` in your address bar is what lets you control the run: keep that address to "
                     "yourself."))
