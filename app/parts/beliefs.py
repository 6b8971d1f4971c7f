"""What the model believes next, on the Generate page: the next-character distribution as the
sampling settings move, one prompt at three temperatures at once, and a generation coloured by
the probability of each character, with the top five and the attention behind any one."""
from __future__ import annotations

from dataclasses import replace

import streamlit as st

from minigpt import SampledToken, Sampling, generate
from minigpt.lab.predictions import beliefs
from minigpt.viz import beliefs_figure, step_attention_figure

from app.chrome.charts import config as chart_config
from app.chrome.charts import shared_figure
from app.chrome.i18n import _, n_, number
from app.chrome.text import md
from app.state import shared_results
from app.state.loaded_model import LoadedModel

TEMPERATURES = (0.5, 1.0, 1.5)
THREE_TEMPERATURES_KEY = "three_temperatures_shown"   # session_state: the last side-by-side, with its vocabulary
# (lowest probability, markdown colour): a character the model gave at least this chance
COLOURS = ((0.5, "green"), (0.2, "blue"), (0.05, "orange"), (0.0, "red"))


def next_character(loaded: LoadedModel, prompt: str, sampling: Sampling) -> None:
    """The bars of the next character after `prompt`, redrawn at every move of a slider."""
    st.subheader(_("What the model believes next"))
    if not prompt or loaded.tokenizer.unknown_chars(prompt):
        st.caption(_("Type a prompt the model can read to see its next-character distribution."))
        return
    belief = beliefs(shared_results.next_logits(loaded, prompt), sampling)
    st.plotly_chart(shared_figure(beliefs_figure, belief, loaded.tokenizer.chars), key="beliefs", config=chart_config())
    st.caption(_("After “{prompt}”, at temperature {temperature:g}: the entropy is {entropy:.2f} nats, as unsure "
                 "as a fair choice among {choices:.1f} characters; top-k and top-p cut off {cut} of them.",
                 prompt=md(prompt[-20:]), temperature=sampling.temperature, entropy=belief.entropy,
                 choices=belief.effective_choices, cut=int(belief.removed.sum())))


def three_temperatures(loaded: LoadedModel, prompt: str, seed: int, sampling: Sampling) -> None:
    """One button: the same prompt and seed at three temperatures, side by side, with the other
    settings of `sampling`."""
    if st.button(_("The same prompt at temperatures {a:g}, {b:g} and {c:g}", a=TEMPERATURES[0], b=TEMPERATURES[1],
                   c=TEMPERATURES[2]), key="three_temperatures"):
        if not prompt or loaded.tokenizer.unknown_chars(prompt):
            st.warning(_("First give a prompt whose characters the model knows (Generate marks the others)."))
        else:
            texts = [generate(loaded.model, loaded.tokenizer, prompt, max_new_tokens=60,
                              sampling=replace(sampling, temperature=t), seed=seed, block_size=loaded.block_size)
                     for t in TEMPERATURES]
            st.session_state[THREE_TEMPERATURES_KEY] = {"vocab": loaded.vocab_id, "texts": texts, "seed": seed}
    shown = st.session_state.get(THREE_TEMPERATURES_KEY)
    if shown and shown["vocab"] == loaded.vocab_id:
        for col, t, text in zip(st.columns(len(TEMPERATURES)), TEMPERATURES, shown["texts"]):
            col.markdown(_("**Temperature {temperature:g}** (seed {seed})", temperature=t, seed=shown["seed"]))
            col.code(text, language=None, wrap_lines=True)


def coloured(prompt: str, steps: list[SampledToken]) -> str:
    """Markdown of the prompt and the generated characters, each on the colour of its probability."""
    out = [md(prompt)]
    for step in steps:
        colour = next(name for low, name in COLOURS if step.prob >= low)
        shown = "␣" if step.text == " " else "⏎" if step.text == "\n" else md(step.text)
        out.append(f":{colour}-background[{shown}]")
    return "".join(out)


def generation_by_probability(loaded: LoadedModel, prompt: str, steps: list[SampledToken]) -> None:
    """The generation coloured by probability; any character's top five and the attention rows
    the model used to choose it. `prompt`: what the model read first (an empty prompt starts
    from a newline), so that every step has a character to look from."""
    st.markdown(_("**Each character on the colour of the probability the model gave it**: green ≥ {green:g}, blue ≥ "
                  "{blue:g}, orange ≥ {orange:g}, red below (a surprise).",
                  **{name: low for low, name in COLOURS if name != "red"}))
    st.markdown(coloured(prompt, steps))
    labels = [f"{i + 1}: {s.text if s.text.strip() else repr(s.text)} ({number(s.prob, '.2f')})"
              for i, s in enumerate(steps)]
    pick = st.select_slider(_("Look at one generated character"), range(len(steps)), format_func=labels.__getitem__,
                            key=f"picked_step:{len(steps)}")
    step = steps[pick]
    top = ", ".join(f"{md(text) if text.strip() else repr(text)} {number(p, '.2f')}" for text, p in step.top)
    st.markdown(_("**{char}** had probability {prob:.3f}. The five likeliest were: {top}.", char=md(step.text),
                  prob=step.prob, top=top))
    context = prompt + "".join(s.text for s in steps[:pick])
    window = context[-step.context:]  # exactly what the model read: after the cache refilled, fewer than block_size
    rows = shared_results.last_query_attention(loaded, window)
    st.caption(n_("Where the last character before it looked, in each layer (mean of the heads), when the model "
                  "chose it, over the {n} character it read:", "Where the last character before it looked, in each "
                  "layer (mean of the heads), when the model chose it, over the {n} characters it read:",
                  len(window)))
    st.plotly_chart(step_attention_figure(rows, window, tr=_), key="step_attention", config=chart_config())
