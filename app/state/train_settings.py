"""A run's settings as the Train form holds them: each hyperparameter's widget key and one-line help,
the form's values and the configs they describe, the ?train= link that carries them, and how a
setting is named and written wherever runs are compared (Experiments, the class board). Values live
in session_state under the widgets' keys, set before the widgets are drawn, so that a preset, the
defaults, a link or a reattached run can fill them (parts.train_form draws the widgets)."""
from __future__ import annotations

import secrets
from dataclasses import asdict, dataclass, replace

import streamlit as st

from minigpt import (BUILTIN_CORPORA, DEFAULT_PRESET, EARLY_STOP_PATIENCE, N_, PRESETS, CharTokenizer, ConfigError,
                     GPTConfig, TrainConfig)
from minigpt.serve import BoardError, Challenge, ClassCorpus

from app.chrome import url
from app.chrome.i18n import _, error_text, n_
from app.chrome.text import md, word_list
from app.state.choices import CORPUS
from app.state.classroom import CLASS_KEY, classes
from app.state.corpora import current_corpus, use_class_corpus

FORM_FILLED_KEY = "train_form_filled"   # session_state: the form has its first values in this session
OWN_SEED_KEY = "train_own_seed"         # session_state: this learner's seed for a class's links that name none
CLASS_FIT_KEY = "train_class_fit"       # session_state: (class, challenge, its text) the form was last fitted to
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


def fill(model: GPTConfig, train: TrainConfig) -> None:
    """Put these configs' values into the form."""
    ss = st.session_state
    for f in FIELDS:
        ss[f.key] = getattr(model if f.config is GPTConfig else train, f.name)
    ss[EARLY_STOP] = train.early_stop_patience > 0
    ss[FORM_FILLED_KEY] = True


def apply_preset(name: str) -> None:
    """Button callback: the preset's values, before the widgets are drawn; in a class, with the learner's
    own seed kept (the preset's one seed would give the class identical runs)."""
    preset = PRESETS[name]
    fill(preset.model, replace(preset.train, seed=own_seed()) if in_class() else preset.train)


def ensure_filled(run_configs: tuple[GPTConfig, TrainConfig] | None) -> None:
    """On a session's first visit: the run's own settings when a run is attached (a reload must
    not show other settings than the run has), else a ?train= link's, else the default preset.
    In a class, with no run attached, the form is then fitted to the class (fit_class): call it
    before reading the session's corpus, which the class's text or challenge may change."""
    if not st.session_state.get(FORM_FILLED_KEY):
        first_fill(run_configs)
    if run_configs is None and in_class():
        fit_class()


def first_fill(run_configs: tuple[GPTConfig, TrainConfig] | None) -> None:
    """The form's first values in this session (ensure_filled says which)."""
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
    return bool(st.session_state.get(CLASS_KEY))


def fit_class() -> None:
    """Fit the form to the class this session is in, each time it comes in or the class's challenge
    or text changes, whichever way the learner came to Train: a seed of the learner's own where the
    form holds the presets' shared one (a class would train identical runs), the class's text, and
    the challenge's corpus, steps and size. What changed is said once, above the form; the learner
    may change any of it after. A run of these settings that still misses the challenge is said
    under the form, before Start (parts.post)."""
    ss = st.session_state
    code = ss[CLASS_KEY]
    try:
        challenge, text = classes().find(code).challenge, classes().class_corpus(code)
    except BoardError:  # no such class (any more): the board page says so
        return
    if ss.get(CLASS_FIT_KEY) == (code, challenge, text):
        return
    first_in_class = (ss.get(CLASS_FIT_KEY) or (None,))[0] != code
    ss[CLASS_FIT_KEY] = (code, challenge, text)
    model, train = configs()
    said = []
    if first_in_class and train.seed == PRESETS[DEFAULT_PRESET].train.seed:
        train = replace(train, seed=own_seed())
        said.append(_("a seed of your own (so that your run is not a copy of your classmates')"))
    if text is not None and not (challenge is not None and challenge.corpus in BUILTIN_CORPORA):
        fit_class_text(code, text, said)  # a challenge on a built-in corpus names the corpus its runs need
    if challenge is not None:
        fit_corpus(challenge, said)
        model, train = fit_challenge(challenge, model, train, said)
    fill(model, train)
    if said:
        st.info(_("The form is set for class {code}: {changes}.", code=code, changes=word_list(said)))


def fit_class_text(code: str, text: ClassCorpus, said: list[str]) -> None:
    """Make the class's corpus the session's: its built-in one, or its uploaded text as an upload."""
    if not use_class_corpus(code, text):
        return
    said.append(_("the corpus {corpus}", corpus=text.builtin) if text.builtin is not None
                else _("the class's text {name}", name=md(text.label)))


def fit_corpus(challenge: Challenge, said: list[str]) -> None:
    """Make the challenge's built-in corpus the session's (Home's choice)."""
    if challenge.corpus is None or current_corpus().key == challenge.corpus or challenge.corpus not in BUILTIN_CORPORA:
        return
    st.session_state[CORPUS] = challenge.corpus
    said.append(_("the corpus {corpus}", corpus=challenge.corpus))


def fit_challenge(challenge: Challenge, model: GPTConfig, train: TrainConfig,
                  said: list[str]) -> tuple[GPTConfig, TrainConfig]:
    """The form's settings within the challenge's steps and size: at most its steps, and where the
    model is over its parameters, the largest preset's that is within them (with its training
    settings), on the corpus the run will train on."""
    if challenge.max_params is not None:
        vocab = CharTokenizer.from_text(current_corpus().text).vocab_size
        def params(m: GPTConfig) -> int:
            return replace(m, vocab_size=vocab).num_params()
        if params(model) > challenge.max_params:
            fitting = sorted((p for p in PRESETS.values() if params(p.model) <= challenge.max_params),
                             key=lambda p: -params(p.model))
            if fitting:
                model, train = fitting[0].model, replace(fitting[0].train, seed=train.seed)
                said.append(_("the {preset} preset's model (at most {limit:,} parameters)",
                              preset=_(fitting[0].label), limit=challenge.max_params))
    if challenge.max_steps is not None and train.max_steps > challenge.max_steps:
        train = replace(train, max_steps=max(challenge.max_steps, RANGES["max_steps"][0]))
        said.append(n_("{n:,} step", "{n:,} steps", train.max_steps))
    return model, train


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


def active_preset(model: GPTConfig, train: TrainConfig) -> str | None:
    """The preset whose settings the form holds, if any: every field of the form, and early stopping."""
    def values(m: GPTConfig, t: TrainConfig) -> tuple:
        return (*(getattr(m if f.config is GPTConfig else t, f.name) for f in FIELDS), t.early_stop_patience > 0)

    def seeded(preset_train: TrainConfig) -> TrainConfig:  # a learner's own seed in a class is the preset's still
        own = st.session_state.get(OWN_SEED_KEY)
        return replace(train, seed=preset_train.seed) if own is not None and train.seed == own else train
    return next((name for name, p in PRESETS.items() if values(p.model, p.train) == values(model, seeded(p.train))),
                None)


def model_shape(model: GPTConfig) -> str:
    """A model's shape in words, as a run's settings and the loaded model's summary both say it."""
    return _("{layers} × {heads}, d_model {d_model} (d_k {d_k}), d_ff {d_ff}, max_len {max_len}",
             layers=n_("{n} layer", "{n} layers", model.num_layers), heads=n_("{n} head", "{n} heads", model.num_heads),
             d_model=model.d_model, d_k=model.d_k, d_ff=model.d_ff, max_len=model.max_len)


def describe(model: GPTConfig, train: TrainConfig) -> str:
    """One line of a run's settings."""
    shape = _("{shape}, dropout {dropout:g}", shape=model_shape(model), dropout=model.dropout)
    if not model.scale_attention:
        shape = _("{settings}, no 1/√d_k", settings=shape)
    training = _("block_size {block}, batch {batch}, lr {lr:g}, {steps:,} steps", block=train.block_size,
                 batch=train.batch_size, lr=train.lr, steps=train.max_steps)
    if train.early_stop_patience:
        training = _("{settings}, early stopping", settings=training)
    return f"{shape} · {training}"


SETTING_LABELS = {  # a setting's row in the table: the Train form's label where it has one
    "corpus": N_("Corpus"), "d_model": N_("d_model (width)"), "num_heads": N_("num_heads (heads)"),
    "num_layers": N_("num_layers (layers)"), "d_ff": N_("d_ff (feed-forward width)"),
    "max_len": N_("max_len (positions)"), "dropout": N_("dropout (rate)"),
    "scale_attention": N_("Divide attention scores by √d_k"), "max_steps": N_("Steps"), "batch_size": N_("Batch size"),
    "block_size": N_("block_size (characters per window)"), "lr": N_("Learning rate"),
    "min_lr": N_("Lowest learning rate"), "warmup_steps": N_("Warmup steps"),
    "eval_interval": N_("Evaluate every … steps"), "seed": N_("Seed"),
    "early_stop_patience": N_("Evaluations without improvement before stopping early (0: never)"),
    "weight_decay": N_("Weight decay"), "betas": N_("AdamW betas"), "schedule": N_("Learning-rate schedule"),
    "eval_iters": N_("Batches per evaluation"), "grad_clip": N_("Gradient clipping (0: none)"),
    "val_fraction": N_("Validation share of the corpus"), "grad_accum": N_("Micro-batches per step"),
}


def setting_text(value) -> str:
    """A setting's value in a table cell: ✓ or ✗ for a switch, a float as short as it goes."""
    return "✓" if value is True else "✗" if value is False else f"{value:g}" if isinstance(value, float) else str(value)
