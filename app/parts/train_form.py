"""The Train form, on Train and in the lesson: the presets, a widget for each hyperparameter with its
one-line help, how long the steps will take here, and a link to the settings. The values and what
they describe are state.train_settings'."""
from __future__ import annotations

import streamlit as st

from minigpt import EARLY_STOP_PATIENCE, N_, PRESETS, ConfigError, CorpusError, GPTConfig, TrainConfig
from minigpt.serve import RunSpec

from app.chrome import fields, url
from app.chrome.fields import REMEMBERED
from app.chrome.i18n import _, n_
from app.chrome.text import format_duration
from app.state import runs
from app.state.corpora import current_corpus
from app.state.train_settings import (
    EARLY_STOP,
    FIELDS,
    RANGES,
    active_preset,
    apply_preset,
    configs,
    describe,
    to_param,
)

EARLY_STOP_HELP = N_("Stop when the validation loss has not improved for {patience} evaluations in a row: the "
                     "model has stopped learning what carries over to new text.")


def help_for(key: str) -> str:
    if key == EARLY_STOP:
        return _(EARLY_STOP_HELP, patience=EARLY_STOP_PATIENCE)
    return _(next(f.help for f in FIELDS if f.key == key))


def preset_label(name: str) -> tuple[str, str]:
    """A preset's button label and help, in the page's language: its name, what it is for and its
    settings, the numbers filled in from the preset (no time: that depends on the server; a run's
    ETA is measured from its own speed once it starts)."""
    preset = PRESETS[name]
    return _(preset.label), _("{use} {settings}.", use=_(preset.use), settings=describe(preset.model, preset.train))


def form(expanded: bool) -> bool:
    """The presets' buttons and the hyperparameters; False when a whole-number box is out of its
    range (it says so under itself)."""
    st.markdown(_("**Presets** fill in every setting below:"))
    active = active_preset(*configs())
    for col, name in zip(st.columns(len(PRESETS)), PRESETS):
        label, blurb = preset_label(name)
        col.button(label, key=f"preset:{name}", on_click=apply_preset, args=(name,), help=blurb,
                   use_container_width=True, type="primary" if name == active else "secondary")
    st.caption(_("The form holds the {preset} preset's settings.", preset=preset_label(active)[0]) if active
               else _("The form holds settings of your own, not a preset's."))

    with st.expander(_("Hyperparameters"), expanded=expanded):
        model_col, train_col = st.columns(2)
        h, r = help_for, REMEMBERED
        with model_col:
            st.markdown(_("**Model**"))
            st.select_slider(_("d_model (width)"), [16, 32, 64, 128, 256], key="d_model", help=h("d_model"), **r)
            st.select_slider(_("num_heads (heads)"), [1, 2, 4, 8], key="num_heads", help=h("num_heads"), **r)
            st.slider(_("num_layers (layers)"), 1, 6, key="num_layers", help=h("num_layers"), **r)
            st.select_slider(_("d_ff (feed-forward width)"), [32, 64, 128, 256, 512, 1024], key="d_ff", help=h("d_ff"),
                             **r)
            st.select_slider(_("max_len (positions)"), [16, 32, 64, 128, 256], key="max_len", help=h("max_len"), **r)
            st.slider(_("dropout (rate)"), 0.0, 0.5, step=0.05, key="dropout", help=h("dropout"), **r)
            st.checkbox(_("Divide attention scores by √d_k"), key="scale_attention", help=h("scale_attention"), **r)
        with train_col:
            st.markdown(_("**Training**"))
            in_range = [fields.whole_number(_("Steps"), *RANGES["max_steps"], step=100, key="max_steps",
                                            help=h("max_steps"), **r)]
            st.slider(_("Batch size"), 1, 64, key="batch_size", help=h("batch_size"), **r)
            st.slider(_("block_size (characters per window)"), 4, 256, key="block_size", help=h("block_size"), **r)
            st.select_slider(_("Learning rate"), [1e-4, 3e-4, 1e-3, 2e-3, 3e-3, 1e-2, 3e-2],
                             format_func=lambda v: f"{v:g}", key="lr", help=h("lr"), **r)
            in_range += [fields.whole_number(label, *RANGES[key], key=key, help=h(key), **r)
                         for label, key in ((_("Warmup steps"), "warmup_steps"),
                                            (_("Evaluate every … steps"), "eval_interval"), (_("Seed"), "train_seed"))]
            st.checkbox(_("Stop early when the validation loss stops improving"), key=EARLY_STOP,
                        help=h(EARLY_STOP), **r)
    hint = time_hint(*configs()) if None not in in_range else ""
    if hint:
        st.caption(hint)
    return None not in in_range


def time_hint(model: GPTConfig, train: TrainConfig) -> str:
    """How long these settings train on this server, before Start: their steps at the pace the server
    measured for runs of this shape (or scaled from another shape's, rough), or that it cannot tell yet."""
    steps, corpus = train.max_steps, current_corpus()
    try:
        tokenizer, sized, checked = runs.run_configs(corpus, model, train)
    except (ConfigError, CorpusError):
        return ""  # the line under the form says why they cannot train
    pace = runs.registry().speeds.pace(RunSpec("", sized, checked, tuple(tokenizer.chars), corpus.text).shape)
    if pace is None:
        return n_("How long {n:,} step takes here is not known yet: no run has trained on this server so far. Once "
                  "yours starts, its time left shows beside it.",
                  "How long {n:,} steps take here is not known yet: no run has trained on this server so far. Once "
                  "yours starts, its time left shows beside it.", steps)
    time = format_duration(steps / pace.steps_per_sec)
    if not pace.measured:
        return n_("{n:,} step takes about {time} on this server: a rough estimate, since no run of this size has "
                  "finished here yet.",
                  "{n:,} steps take about {time} on this server: a rough estimate, since no run of this size has "
                  "finished here yet.", steps, time=time)
    return n_("{n:,} step takes about {time} on this server, at the pace runs of this size trained here.",
              "{n:,} steps take about {time} on this server, at the pace runs of this size trained here.",
              steps, time=time)


def share_link(model: GPTConfig, train: TrainConfig) -> None:
    """The form's settings as a link, for a teacher to send a class."""
    with st.expander(_("A link to these settings, to send a class")):
        st.caption(_("Whoever opens it gets this form filled with these settings (their own run, not yours)."))
        # no language: it is for someone else, whose browser (or choice) decides theirs
        st.code(url.link(**{url.TRAIN: to_param(model, train)}), language=None, wrap_lines=True)
