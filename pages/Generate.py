"""Generate: sample text from the loaded model, streamed, with each step's probabilities."""
import streamlit as st

from minigpt import N_

from app import navigation
from app.chrome import site
from app.parts import beliefs
from app.views import generation

loaded = navigation.open_model_page(site.GENERATE, N_(
    "The model writes one character at a time: it turns the text so far into a probability for every character "
    "it knows, and one is drawn. Temperature 0 always takes the likeliest (greedy); higher temperatures, top-k "
    "and top-p trade safety for variety. The table under the text shows what the model believed at every step."),
    lesson_steps=(13, 14))

prompt_key = generation.prompt_key(loaded)
settings = generation.settings(loaded)
prompt, clicked = generation.prompt_form(prompt_key)

typed = st.session_state.get(prompt_key, "")
if settings.sampling is not None:  # a setting out of its range has said so under its box
    beliefs.next_character(loaded, typed, settings.sampling)
    beliefs.three_temperatures(loaded, typed, settings.seed or 0, settings.sampling)

output = st.empty()  # one slot: a new request replaces the old answer at once, never under it
if clicked and settings.complete:  # a setting or seed out of range has said so under its box
    generation.write(loaded, prompt, prompt_key, settings, output)
generation.show_result(loaded, output)
