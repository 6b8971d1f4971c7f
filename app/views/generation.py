"""The Generate page's writing: the prompt and its seed buttons, the sampling settings, the text
streamed as it is drawn, and the step-by-step table of what the model believed."""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TypeVar

import streamlit as st

from minigpt import MAX_NEW_TOKENS, Message, Sampling, SamplingError, check_max_new_tokens, demo_prompts, prepare_prompt
from minigpt.viz import steps_table

from app.chrome import fields
from app.chrome.fields import REMEMBERED
from app.chrome.i18n import _, error_text
from app.chrome.text import markdown_stream, md
from app.parts import beliefs, prompts, sampling
from app.state import loaded_model, shared_results
from app.state.loaded_model import LoadedModel

GENERATION_KEY = "generation"  # session_state: the last text written, its steps and notes, with its vocabulary
STREAM_DELAY_KEY = "stream_delay"  # session_state: the pace of the streamed characters, in seconds (tests set 0)
STREAM_PACE = 0.015  # seconds: at most one character this often, so that the learner sees the model write

T = TypeVar("T")


def paced(items: Iterable[T], interval: float, clock: Callable[[], float] = time.monotonic,
          sleep: Callable[[float], None] = time.sleep) -> Iterator[T]:
    """The items no faster than one per `interval` seconds: a wait only where the next one came
    sooner. A busy server's own slowness is the pace then, and nothing is added to it."""
    last = None
    for item in items:
        if last is not None and (wait := interval - (clock() - last)) > 0:
            sleep(wait)
        last = clock()
        yield item


@dataclass(frozen=True)
class Settings:
    """What the learner asks the model for: how to draw, how many characters, from which seed."""
    sampling: Sampling | None  # None: a setting out of its range, and an error under it says so
    max_new: int
    seed: int | None           # None: the box holds a number out of its range, and says so

    @property
    def complete(self) -> bool:
        return self.sampling is not None and self.seed is not None


def prompt_key(loaded: LoadedModel) -> str:
    """The prompt box's key, one per vocabulary; the demo's prompts as buttons above it."""
    key = f"prompt:{loaded.vocab_id}"  # each vocabulary keeps its own prompt
    seeds = demo_prompts(loaded.tokenizer)
    if seeds:
        for col, seed_text in zip(st.columns(len(seeds) + 4), seeds):
            col.button(seed_text, key=f"seed:{seed_text}", on_click=st.session_state.__setitem__,
                       args=(key, seed_text), help=_("The reference demo's prompts"))
    st.session_state.setdefault(key, loaded_model.first_prompt(loaded))  # no value=: the seed buttons set it
    return key


def settings(loaded: LoadedModel) -> Settings:
    """The sampling settings' widgets (the part's), then the length and the seed, in one row."""
    cols = st.columns(sampling.COLUMNS + 2)
    r = REMEMBERED
    chosen = sampling.sliders(cols, loaded.tokenizer.vocab_size, remember=True)
    max_new = cols[-2].number_input(_("Max new tokens"), value=200, step=10, key="max_new_tokens", **r,
                                    help=_("How many characters to write, from 1 to {limit:,}.", limit=MAX_NEW_TOKENS))
    seed = fields.whole_number(_("Seed"), 0, 2**31 - 1, value=0, key="gen_seed", where=cols[-1], **r,
                               help=_("The same seed and settings give the same text."))
    return Settings(chosen, int(max_new), seed)


def prompt_form(key: str) -> tuple[str, bool]:
    """The prompt box and the Generate button, as one form: Enter submits it."""
    with st.form("generate_form", border=False):
        prompt = st.text_input(_("Prompt"), key=key, help=_("Press Enter or Generate. Chinese, Latin letters, "
                                                           "spaces and full-width punctuation are all fine, as long "
                                                           "as the model knows them."))
        return prompt, st.form_submit_button(_("Generate"), type="primary", key="generate")


def write(loaded: LoadedModel, prompt: str, prompt_key: str, s: Settings, output) -> None:
    """Generate from `prompt` with complete settings, streamed into `output` (one slot: a new request
    replaces the old answer at once, never under it), and keep the result for `show_result`."""
    st.session_state.pop(GENERATION_KEY, None)
    unknown = loaded.tokenizer.unknown_chars(prompt)
    k = s.sampling.top_k or 0
    try:
        check_max_new_tokens(s.max_new)
        prepared = None if unknown else prepare_prompt(loaded.tokenizer, prompt, loaded.block_size)
    except SamplingError as err:
        output.error(md(error_text(err)))
    else:
        if unknown:
            prompts.known_or_explain(prompt, loaded.tokenizer, prompt_key, where=output)
        else:
            notes = list(prepared.notes)  # messages, not words: a language switch translates them again
            if k >= loaded.tokenizer.vocab_size:
                notes.append(Message("top-k {k} is not below the {vocab} characters this model knows: every "
                                     "character stays in, as with top-k 0.", k=k, vocab=loaded.tokenizer.vocab_size))
            steps = []
            written = paced(shared_results.written(loaded, prepared, s.max_new, s.sampling, s.seed),
                            st.session_state.get(STREAM_DELAY_KEY, STREAM_PACE))

            def pieces():
                yield prompt
                for step in written:
                    steps.append(step)
                    yield step.text

            try:
                with output.container():
                    st.write_stream(markdown_stream(pieces()))
            except SamplingError as err:  # a model whose training diverged
                output.error(md(error_text(err)))
            else:
                st.session_state[GENERATION_KEY] = {
                    "text": prompt + "".join(step.text for step in steps), "steps": steps, "notes": notes,
                    "vocab": loaded.vocab_id, "context": loaded.tokenizer.decode(prepared.ids)}  # what the model read


def show_result(loaded: LoadedModel, output) -> None:
    """The last text written, exactly (whitespace and all), and the table of its steps."""
    result = st.session_state.get(GENERATION_KEY)
    if not (result and result["vocab"] == loaded.vocab_id):
        return
    with output.container():  # the exact text, whitespace and all, replaces the streamed markdown
        for note in result["notes"]:
            st.caption(_("Note: {note}", note=md(error_text(note))))
        st.code(result["text"], language=None, wrap_lines=True)
        st.markdown(_("**Step by step**: the character drawn, the probability the model gave it, and its five "
                      "likeliest characters (before temperature, top-k and top-p)."))
        chosen = _("p(chosen)")
        table = steps_table(result["steps"], tr=_)
        step_col, char_col, _prob, top_col = table.columns  # narrow enough together for a phone's width
        st.dataframe(table, hide_index=True, key="steps_table", column_config={
            step_col: st.column_config.NumberColumn(step_col, width=48),
            char_col: st.column_config.TextColumn(char_col, width=56),
            chosen: st.column_config.ProgressColumn(chosen, min_value=0.0, max_value=1.0, format="%.3f", width=110),
            top_col: st.column_config.TextColumn(top_col, width=120)})
        if result["steps"]:
            beliefs.generation_by_probability(loaded, result["context"], result["steps"])
