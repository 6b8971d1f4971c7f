"""Generate: sample text from the loaded model, streamed, with each step's probabilities."""
import time

import streamlit as st

from app import models, navigation
from app.text import markdown_stream
from minigpt import (MAX_NEW_TOKENS, SamplingError, check_sampling, demo_prompts, prepare_prompt, steps_table,
                     stream)

navigation.setup_page(__file__)

st.title("Generate")
st.markdown(
    "The model writes one character at a time: it turns the text so far into a probability for every "
    "character it knows, and one is drawn. Temperature 0 always takes the likeliest (greedy); higher "
    "temperatures, top-k and top-p trade safety for variety. The table under the text shows what the "
    "model believed at every step."
)

lm = models.require_model()
st.caption(lm.summary())

prompt_key = f"prompt:{lm.vocab_id}"  # each vocabulary keeps its own prompt
seeds = demo_prompts(lm.tokenizer)
if seeds:
    seed_cols = st.columns(len(seeds) + 4)
    for col, seed_text in zip(seed_cols, seeds):
        col.button(seed_text, key=f"seed:{seed_text}", on_click=st.session_state.__setitem__,
                   args=(prompt_key, seed_text), help="The reference demo's prompts")
st.session_state.setdefault(prompt_key, models.first_prompt(lm))  # no value=: the seed buttons set it
prompt = st.text_input("Prompt", key=prompt_key, persist_state="session")

keep = {"persist_state": "session"}
cols = st.columns(5)
temperature = cols[0].slider("Temperature", 0.0, 2.0, value=0.8, step=0.05, key="temperature",
                             help="0 = greedy: always the likeliest character.", **keep)
top_k = cols[1].number_input("Top-k (0 = off)", 0, lm.tokenizer.vocab_size, value=0, key="top_k",
                             help="Draw only among the k likeliest characters.", **keep)
top_p = cols[2].slider("Top-p", 0.05, 1.0, value=1.0, step=0.05, key="top_p",
                       help="Draw only among the likeliest characters whose probabilities add up to p (1 = off).",
                       **keep)
max_new = cols[3].number_input("Max new tokens", 1, min(500, MAX_NEW_TOKENS), value=200, key="max_new_tokens", **keep)
seed = cols[4].number_input("Seed", 0, 2**31 - 1, value=0, key="gen_seed",
                            help="The same seed and settings give the same text.", **keep)

if st.button("Generate", key="generate", type="primary"):
    unknown = lm.tokenizer.unknown_chars(prompt)
    try:
        check_sampling(temperature, int(top_k), top_p, int(max_new))
        prepared = None if unknown else prepare_prompt(lm.tokenizer, prompt, lm.block_size)
    except SamplingError as err:
        st.error(str(err))
    else:
        if unknown:
            st.warning("This model has never seen these characters, so it cannot read the prompt: "
                       + ", ".join(repr(c) for c in unknown) + ". Remove them, or load a model trained on a "
                       "corpus that has them.")
        else:
            steps = []
            delay = st.session_state.get("stream_delay", 0.015)

            def pieces():
                yield prompt
                for step in stream(lm.model, lm.tokenizer, prepared, max_new_tokens=int(max_new),
                                   temperature=temperature, top_k=int(top_k) or None, top_p=top_p, seed=int(seed),
                                   block_size=lm.block_size):
                    steps.append(step)
                    yield step.text
                    time.sleep(delay)

            typewriter = st.empty()
            try:
                with typewriter:
                    st.write_stream(markdown_stream(pieces()))
            except SamplingError as err:  # a model whose training diverged
                st.error(str(err))
            else:
                st.session_state["generation"] = {"text": prompt + "".join(s.text for s in steps), "steps": steps,
                                                  "notes": prepared.notes, "vocab": lm.vocab_id}
            typewriter.empty()  # the exact text, whitespace and all, is shown below

result = st.session_state.get("generation")
if result and result["vocab"] == lm.vocab_id:
    for note in result["notes"]:
        st.caption(f"Note: {note}")
    st.code(result["text"], language=None, wrap_lines=True)
    st.markdown("**Step by step**: the character drawn, the probability the model gave it, and its five "
                "likeliest characters (before temperature, top-k and top-p).")
    st.dataframe(steps_table(result["steps"]), hide_index=True, key="steps_table",
                 column_config={"p(chosen)": st.column_config.ProgressColumn("p(chosen)", min_value=0.0,
                                                                            max_value=1.0, format="%.3f")})
