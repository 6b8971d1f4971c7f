"""What a run's numbers mean, in sentences for the learner: the metrics' help, overfitting,
validation characters that training never shows, a loss worse than guessing."""
from __future__ import annotations

from minigpt import Overfitting, UnseenCharacters

from .text import md

SMALL_CORPUS = 5_000  # characters: below this, a larger corpus is the first remedy for overfitting
METRIC_HELP = {
    "state": "running, paused, stopped, finished (all steps done, or stopped early), or error.",
    "step": "Optimizer steps done: each one learns from one batch of windows.",
    "tokens": "Tokens per second: characters the model trains on each second (batch_size × block_size per "
              "step), the median of the last few measurements.",
    "eta": "Time left at this run's average pace so far.",
    "val": "Validation loss: the cross-entropy, in nats, on the last 10% of the corpus, which training never "
           "sees. Lower is better; ln V, the loss of guessing uniformly among the V characters, is the line "
           "on the chart.",
}


def overfitting_warning(over: Overfitting, corpus_chars: int, early_stopping: bool) -> str:
    remedies = ["more dropout", "a smaller model"]
    if corpus_chars < SMALL_CORPUS:
        remedies.insert(0, "a larger corpus (course-zh has about 10,000 characters)")
    if not early_stopping:
        remedies.append("early stopping, which ends the run on its best weights")
    return (f"**Overfitting.** Since step {over.best_step:,} the validation loss has risen from "
            f"{over.best_val:.2f} to {over.val:.2f} while the training loss kept falling "
            f"({over.train_at_best:.2f} → {over.train:.2f}). The model is memorising its {corpus_chars:,} "
            f"characters of training text instead of learning rules that carry over to text it has not seen; "
            f"the smaller the corpus and the larger the model, the sooner this comes. Try "
            f"{', '.join(remedies[:-1])} or {remedies[-1]}.")


def worse_than_guessing(val: float, uniform: float, vocab: int) -> str:
    return (f"The validation loss ({val:.2f}) is above ln {vocab} = {uniform:.2f}, the loss of guessing "
            f"uniformly among the {vocab} characters: on text it has not seen, the model does worse than "
            f"knowing nothing.")


def unseen_note(unseen: UnseenCharacters) -> str:
    shown = " ".join(md(c) if c.strip() else repr(c) for c in unseen.chars[:12])
    more = f" and {len(unseen.chars) - 12} more" if len(unseen.chars) > 12 else ""
    return (f"{len(unseen.chars)} characters of the validation part ({unseen.occurrences} of its "
            f"{unseen.val_length} characters) never appear in the training part: {shown}{more}. The model "
            f"cannot have learnt them, gives them almost no probability, and each costs it many nats.")
