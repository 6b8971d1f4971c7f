"""Generate: sample text from the loaded model, streamed, with each step's probabilities."""
import time

import streamlit as st

from app import beliefs, fields, lesson_links, models, navigation, prompts
from app.i18n import _, error_text
from app.text import markdown_stream, md
from minigpt import MAX_NEW_TOKENS, Message, SamplingError, check_sampling, demo_prompts, prepare_prompt, steps_table, stream

navigation.setup_page(__file__)

st.title(_("Generate"))
lesson_links.link(13, 14)
st.markdown(_(
    "The model writes one character at a time: it turns the text so far into a probability for every character "
    "it knows, and one is drawn. Temperature 0 always takes the likeliest (greedy); higher temperatures, top-k "
    "and top-p trade safety for variety. The table under the text shows what the model believed at every step."))

lm = models.require_model()
st.caption(lm.summary())
RESULT = "generation"

prompt_key = f"prompt:{lm.vocab_id}"  # each vocabulary keeps its own prompt
seeds = demo_prompts(lm.tokenizer)
if seeds:
    seed_cols = st.columns(len(seeds) + 4)
    for col, seed_text in zip(seed_cols, seeds):
        col.button(seed_text, key=f"seed:{seed_text}", on_click=st.session_state.__setitem__,
                   args=(prompt_key, seed_text), help=_("The reference demo's prompts"))
st.session_state.setdefault(prompt_key, models.first_prompt(lm))  # no value=: the seed buttons set it

keep = {"persist_state": "session"}
cols = st.columns(5)
temperature = cols[0].slider(_("Temperature"), 0.0, 2.0, value=0.8, step=0.05, key="temperature", **keep,
                             help=_("The scores are divided by the temperature before softmax: below 1 the "
                                    "likeliest characters win more often, above 1 the choice spreads out. 0 = greedy: "
                                    "always the likeliest character."))
top_k = cols[1].number_input(_("Top-k (0 = off)"), value=0, step=1, key="top_k", **keep,
                             help=_("Draw only among the k likeliest characters. At or above the {vocab} this model "
                                    "knows, every character stays in.", vocab=lm.tokenizer.vocab_size))
top_p = cols[2].slider(_("Top-p"), 0.05, 1.0, value=1.0, step=0.05, key="top_p", **keep,
                       help=_("Draw only among the likeliest characters whose probabilities add up to p (1 = off)."))
max_new = cols[3].number_input(_("Max new tokens"), value=200, step=10, key="max_new_tokens", **keep,
                               help=_("How many characters to write, from 1 to {limit:,}.", limit=MAX_NEW_TOKENS))
seed = fields.whole_number(_("Seed"), 0, 2**31 - 1, value=0, key="gen_seed", where=cols[4], **keep,
                           help=_("The same seed and settings give the same text."))

with st.form("generate_form", border=False):
    prompt = st.text_input(_("Prompt"), key=prompt_key, help=_("Press Enter or Generate. Chinese, Latin letters, "
                                                              "spaces and full-width punctuation are all fine, as "
                                                              "long as the model knows them."))
    clicked = st.form_submit_button(_("Generate"), type="primary", key="generate")

beliefs.next_character(lm, st.session_state.get(prompt_key, ""), temperature, int(top_k), top_p)
beliefs.three_temperatures(lm, st.session_state.get(prompt_key, ""), seed or 0, int(top_k), top_p)

output = st.empty()  # one slot: a new request replaces the old answer at once, never under it
if clicked and seed is not None:  # a seed out of range has said so under its box
    st.session_state.pop(RESULT, None)
    unknown = lm.tokenizer.unknown_chars(prompt)
    k = int(top_k)
    try:
        check_sampling(temperature, k, top_p, int(max_new))
        prepared = None if unknown else prepare_prompt(lm.tokenizer, prompt, lm.block_size)
    except SamplingError as err:
        output.error(md(error_text(err)))
    else:
        if unknown:
            prompts.known_or_explain(prompt, lm.tokenizer, prompt_key, where=output)
        else:
            notes = list(prepared.notes)  # messages, not words: a language switch translates them again
            if k >= lm.tokenizer.vocab_size:
                notes.append(Message("top-k {k} is not below the {vocab} characters this model knows: every "
                                     "character stays in, as with top-k 0.", k=k, vocab=lm.tokenizer.vocab_size))
                k = 0
            steps = []
            delay = st.session_state.get("stream_delay", 0.015)

            def pieces():
                yield prompt
                for step in stream(lm.model, lm.tokenizer, prepared, max_new_tokens=int(max_new),
                                   temperature=temperature, top_k=k or None, top_p=top_p, seed=seed,
                                   block_size=lm.block_size):
                    steps.append(step)
                    yield step.text
                    time.sleep(delay)

            try:
                with output.container():
                    st.write_stream(markdown_stream(pieces()))
            except SamplingError as err:  # a model whose training diverged
                output.error(md(error_text(err)))
            else:
                st.session_state[RESULT] = {"text": prompt + "".join(s.text for s in steps), "steps": steps,
                                            "notes": notes, "vocab": lm.vocab_id,
                                            "context": lm.tokenizer.decode(prepared.ids)}  # what the model read

result = st.session_state.get(RESULT)
if result and result["vocab"] == lm.vocab_id:
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
            beliefs.generation_by_probability(lm, result["context"], result["steps"])
