"""The Train page's form: presets, each hyperparameter's widget key and one-line help, and the
configs the form describes. Values live in session_state under the widgets' keys, set before
the widgets are drawn, so that a preset, the defaults or a reattached run can fill them."""
from __future__ import annotations

import secrets
from dataclasses import asdict, dataclass, replace

import streamlit as st

from minigpt import DEFAULT_PRESET, EARLY_STOP_PATIENCE, N_, PRESETS, ConfigError, CorpusError, GPTConfig, TrainConfig
from minigpt.serve.line import RunPlan

from . import fields, runs, url
from .corpora import current_corpus
from .fields import REMEMBERED
from .i18n import _, error_text, language, n_
from .text import format_duration

FORM_FILLED_KEY = "train_form_filled"   # session_state: the form has its first values in this session
OWN_SEED_KEY = "train_own_seed"         # session_state: this learner's seed for a class's links that name none
# the whole-number boxes' ranges: a model a small shared server trains in minutes (fields.whole_number)
RANGES = {"max_steps": (10, 20_000), "warmup_steps": (0, 5_000), "eval_interval": (1, 5_000),
          "train_seed": (0, 2**31 - 1)}
EARLY_STOP = "early_stop"  # the checkbox: stop after EARLY_STOP_EARLY_STOP_PATIENCE evaluations without improvement


@dataclass(frozen=True)
class Field:
    key: str        # the widget's key in session_state
    config: type    # GPTConfig or TrainConfig
    name: str       # the config field
    help: str       # the English template; help_for gives it in the page's language


MODEL_FIELDS = (
    Field("d_model", GPTConfig, "d_model",
          N_("d_model: the length of the vector that stands for each character, in every layer. Wider holds more, "
             "trains slower.")),
    Field("num_heads", GPTConfig, "num_heads",
          N_("Attention heads per layer. Each head looks at the text in its own way with d_k = d_model / num_heads "
             "numbers.")),
    Field("num_layers", GPTConfig, "num_layers",
          N_("Transformer blocks stacked on each other: attention, then the feed-forward network, each with a "
             "residual connection.")),
    Field("d_ff", GPTConfig, "d_ff",
          N_("d_ff: the width of the feed-forward network inside each block, usually 4 × d_model.")),
    Field("max_len", GPTConfig, "max_len",
          N_("max_len: how many positions the model has encodings for. It can only ever read max_len characters, "
             "and it is trained on block_size of them.")),
    Field("dropout", GPTConfig, "dropout",
          N_("During training, each activation is zeroed with this probability, so that the model cannot lean on "
             "one path. Fights overfitting; 0 turns it off.")),
    Field("scale_attention", GPTConfig, "scale_attention",
          N_("Untick to train without dividing the attention scores by √d_k (see the √d_k page).")),
)
TRAIN_FIELDS = (
    Field("max_steps", TrainConfig, "max_steps", N_("Optimizer steps: one step learns from one batch.")),
    Field("batch_size", TrainConfig, "batch_size", N_("Windows of text per step. More gives smoother steps but "
                                                      "each takes longer.")),
    Field("block_size", TrainConfig, "block_size",
          N_("block_size: characters per training window, at most max_len. The model learns to use up to this "
             "much context, and Generate and Attention keep to it.")),
    Field("lr", TrainConfig, "lr", N_("Learning rate: how far each step moves the weights, at its peak after "
                                      "warmup; it then decays along a cosine to a tenth.")),
    Field("warmup_steps", TrainConfig, "warmup_steps",
          N_("Warmup: the learning rate grows from lr / warmup to lr over these first steps, so that the first "
             "large gradients cannot throw the model off.")),
    Field("eval_interval", TrainConfig, "eval_interval",
          N_("Every this many steps the run measures the loss on held-out text (the validation loss), writes a "
             "sample and keeps the attention for the time-lapse.")),
    Field("train_seed", TrainConfig, "seed",
          N_("The seed fixes the initial weights, the batches and dropout: the same seed and settings train the "
             "same model.")),
)
FIELDS = MODEL_FIELDS + TRAIN_FIELDS
EARLY_STOP_HELP = N_("Stop when the validation loss has not improved for {patience} evaluations in a row: the "
                     "model has stopped learning what carries over to new text.")


def fill(model: GPTConfig, train: TrainConfig) -> None:
    """Put these configs' values into the form."""
    ss = st.session_state
    for f in FIELDS:
        ss[f.key] = getattr(model if f.config is GPTConfig else train, f.name)
    ss[EARLY_STOP] = train.early_stop_patience > 0
    ss[FORM_FILLED_KEY] = True


def apply_preset(name: str) -> None:
    """Button callback: the preset's values, before the widgets are drawn."""
    preset = PRESETS[name]
    fill(preset.model, preset.train)


def ensure_filled(run_configs: tuple[GPTConfig, TrainConfig] | None) -> None:
    """On a session's first visit: the run's own settings when a run is attached (a reload must
    not show other settings than the run has), else a ?train= link's, else the default preset."""
    if st.session_state.get(FORM_FILLED_KEY):
        return
    if run_configs is None and url.TRAIN in st.query_params:
        value = st.query_params[url.TRAIN]
        try:
            model, train = from_param(value)
        except ConfigError as err:
            st.warning(_("The settings in this link cannot train ({error}): the form shows the default preset.",
                         error=error_text(err)))
        else:
            if in_class() and not names_seed(value):  # a class's learners would train bit-identical runs
                train = replace(train, seed=own_seed())
                st.info(_("The form holds the settings of the link you opened, with a seed of your own, so that your "
                          "run is not a copy of your classmates': press **Start** to train them."))
            else:
                st.info(_("The form holds the settings of the link you opened: press **Start** to train them."))
            run_configs = model, train
    fill(*(run_configs or (PRESETS[DEFAULT_PRESET].model, PRESETS[DEFAULT_PRESET].train)))


def in_class() -> bool:
    from .board import CLASS_KEY  # here: app.board draws the board, which the form does not need at import

    return bool(st.session_state.get(CLASS_KEY))


def names_seed(value: str) -> bool:
    """Whether a ?train= value sets the seed itself."""
    return any(item.partition(":")[0] == "train_seed" for item in value.split(","))


def own_seed() -> int:
    """This learner's seed, drawn once per session."""
    return st.session_state.setdefault(OWN_SEED_KEY, secrets.randbelow(RANGES["train_seed"][1] + 1))


def to_param(model: GPTConfig, train: TrainConfig) -> str:
    """The form's settings as one query parameter. The seed is left out where it is the default
    preset's: such a link, opened in a class, gives each learner a seed of their own (a shared
    seed would give the class identical runs); opened alone, it means the same default seed."""
    def text(value) -> str:
        return f"{value:g}" if isinstance(value, float) else str(int(value))
    default_seed = PRESETS[DEFAULT_PRESET].train.seed
    values = [f"{f.key}:{text(getattr(model if f.config is GPTConfig else train, f.name))}" for f in FIELDS
              if not (f.key == "train_seed" and train.seed == default_seed)]
    return ",".join(values + [f"{EARLY_STOP}:{int(train.early_stop_patience > 0)}"])


def from_param(value: str) -> tuple[GPTConfig, TrainConfig]:
    """The configs a ?train= value describes, over the default preset; ConfigError for anything
    that is not a setting of the form with a number it can take."""
    preset = PRESETS[DEFAULT_PRESET]
    model, train = asdict(preset.model), asdict(preset.train)
    by_key = {f.key: f for f in FIELDS}
    for item in value.split(",")[: len(FIELDS) + 1]:
        key, _sep, raw = item.partition(":")
        try:
            number = float(raw)
        except ValueError:
            raise ConfigError("{value!r} is not a number.", value=raw[:20]) from None
        if key == EARLY_STOP:
            train["early_stop_patience"] = EARLY_STOP_PATIENCE if number else 0
            continue
        if key not in by_key:
            raise ConfigError("{key!r} is not a setting of the form.", key=key[:20])
        f = by_key[key]
        low, high = RANGES.get(key, (number, number))
        if not low <= number <= high:
            raise ConfigError("{key} must be from {low:,} to {high:,}, got {value:g}.", key=key, low=low, high=high,
                              value=number)
        target = model if f.config is GPTConfig else train
        kind = type(target[f.name])
        target[f.name] = bool(number) if kind is bool else int(number) if kind is int else number
    train["min_lr"] = train["lr"] * TrainConfig.min_lr / TrainConfig.lr
    model_cfg = GPTConfig(**model)
    checked = replace(model_cfg, vocab_size=1).validate()  # the corpus sets the vocabulary when a run starts
    return model_cfg, TrainConfig(**train).validate(checked)


def configs() -> tuple[GPTConfig, TrainConfig]:
    """The configs the form describes now."""
    ss = st.session_state
    model = GPTConfig(**{f.name: ss[f.key] for f in MODEL_FIELDS})
    values = {f.name: ss[f.key] for f in TRAIN_FIELDS}
    for name in ("max_steps", "warmup_steps", "eval_interval", "seed"):  # number_input may hand back floats
        values[name] = int(values[name])
    values["min_lr"] = values["lr"] * TrainConfig.min_lr / TrainConfig.lr
    values["early_stop_patience"] = EARLY_STOP_PATIENCE if ss.get(EARLY_STOP) else 0
    return model, TrainConfig(**values)


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


def active_preset(model: GPTConfig, train: TrainConfig) -> str | None:
    """The preset whose settings the form holds, if any: every field of the form, and early stopping."""
    def values(m: GPTConfig, t: TrainConfig) -> tuple:
        return (*(getattr(m if f.config is GPTConfig else t, f.name) for f in FIELDS), t.early_stop_patience > 0)
    return next((name for name, p in PRESETS.items() if values(p.model, p.train) == values(model, train)), None)


def describe(model: GPTConfig, train: TrainConfig) -> str:
    """One line of a run's settings."""
    shape = _("{layers} × {heads}, d_model {d_model} (d_k {d_k}), d_ff {d_ff}, max_len {max_len}, dropout {dropout:g}",
              layers=n_("{n} layer", "{n} layers", model.num_layers), heads=n_("{n} head", "{n} heads", model.num_heads),
              d_model=model.d_model, d_k=model.d_k, d_ff=model.d_ff, max_len=model.max_len, dropout=model.dropout)
    if not model.scale_attention:
        shape = _("{settings}, no 1/√d_k", settings=shape)
    training = _("block_size {block}, batch {batch}, lr {lr:g}, {steps:,} steps", block=train.block_size,
                 batch=train.batch_size, lr=train.lr, steps=train.max_steps)
    if train.early_stop_patience:
        training = _("{settings}, early stopping", settings=training)
    return f"{shape} · {training}"


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
    pace = runs.registry().speeds.pace(RunPlan(sized, checked, tokenizer, corpus.text).shape)
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
        st.code(url.link(**{url.TRAIN: to_param(model, train), url.LANG: language()}), language=None, wrap_lines=True)
