"""What a run's numbers mean, in sentences for the learner: the metrics' help, overfitting,
validation characters that training never shows, a loss worse than guessing."""
from __future__ import annotations

import math

from minigpt import DEFAULT_CORPUS, N_, corpus_chars
from minigpt.lab.diagnosis import Overfitting, UnseenCharacters

from app.chrome.i18n import _, n_
from app.chrome.text import md

SMALL_CORPUS = 5_000  # characters: below this, a larger corpus is the first remedy for overfitting
METRIC_HELP = {
    "state": N_("running, paused, stopped, finished (all steps done, or stopped early), or error."),
    "step": N_("Optimizer steps done: each one learns from one batch of windows."),
    "tokens": N_("Tokens per second: characters the model trains on each second (batch_size × block_size per "
                 "step), the median of the last few measurements."),
    "eta": N_("Time left at this run's average pace so far."),
    "val": N_("Validation loss: the cross-entropy, in nats, on the last tenth of the corpus, which training never "
              "sees. Lower is better; ln V, the loss of guessing uniformly among the V characters, is the line "
              "on the chart."),
}
STATES = {"waiting": N_("waiting"), "starting": N_("starting"), "idle": N_("idle"),
          "running": N_("running"), "paused": N_("paused"), "stopped": N_("stopped"),
          "finished": N_("finished"), "error": N_("error"), "interrupted": N_("interrupted")}


TASKS = {"reverse": N_("reverse"), "copy": N_("copy"), "sort": N_("sort")}


def task_label(name: str) -> str:
    """A task's name in the page's language."""
    return _(TASKS[name])


def metric_help(name: str) -> str:
    return _(METRIC_HELP[name])


def state_label(state: str) -> str:
    """A run's state in the page's language (the library's states are identifiers)."""
    return _(STATES[state]) if state in STATES else state


def perplexity_note(val: float) -> str:
    ppl = math.exp(val)
    return n_("Perplexity exp({loss:.2f}) = {ppl:,.1f}: on held-out text the model is as unsure as if it chose "
              "among {n:,} character at random.",
              "Perplexity exp({loss:.2f}) = {ppl:,.1f}: on held-out text the model is as unsure as if it chose "
              "among {n:,} characters at random.",
              round(ppl), loss=val, ppl=ppl)  # n: the count the sentence names, ppl rounded as '.0f' would


def overfitting_warning(over: Overfitting, corpus_length: int, early_stopping: bool) -> str:
    remedies = [_("more dropout"), _("a smaller model")]
    if corpus_length < SMALL_CORPUS:
        remedies.insert(0, _("a larger corpus ({corpus} has {chars:,} characters)", corpus=DEFAULT_CORPUS,
                             chars=corpus_chars(DEFAULT_CORPUS)))
    if not early_stopping:
        remedies.append(_("early stopping, which ends the run on its best weights"))
    return _("**Overfitting.** Since step {best_step:,} the validation loss has risen from {best_val:.2f} to "
             "{val:.2f} while the training loss kept falling ({train_at_best:.2f} → {train:.2f}). The model is "
             "memorising its {chars:,} characters of training text instead of learning rules that carry over to "
             "text it has not seen; the smaller the corpus and the larger the model, the sooner this comes. "
             "Try {remedies} or {last}.",
             best_step=over.best_step, best_val=over.best_val, val=over.val, train_at_best=over.train_at_best,
             train=over.train, chars=corpus_length, remedies=_(", ").join(remedies[:-1]), last=remedies[-1])


def worse_than_guessing(val: float, uniform: float, vocab: int) -> str:
    return _("The validation loss ({val:.2f}) is above ln {vocab} = {uniform:.2f}, the loss of guessing uniformly "
             "among the {vocab} characters: on text it has not seen, the model does worse than knowing nothing.",
             val=val, vocab=vocab, uniform=uniform)


def unseen_note(unseen: UnseenCharacters) -> str:
    shown = " ".join(md(c) if c.strip() else repr(c) for c in unseen.chars[:12])
    if len(unseen.chars) > 12:
        shown = _("{shown} and {more} more", shown=shown, more=len(unseen.chars) - 12)
    return n_("{n} character of the validation part ({occurrences} of its {length} characters) never appears in "
              "the training part: {shown}. The model cannot have learnt it, gives it almost no probability, and "
              "each occurrence costs it many nats.",
              "{n} characters of the validation part ({occurrences} of its {length} characters) never appear in "
              "the training part: {shown}. The model cannot have learnt them, gives them almost no probability, "
              "and each costs it many nats.",
              len(unseen.chars), occurrences=unseen.occurrences, length=unseen.val_length, shown=shown)
