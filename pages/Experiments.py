"""Experiments: take a part of the loaded model out, and measure what it did; race a scaled model
against an unscaled one; compare runs."""
from minigpt import N_

from app import navigation
from app.chrome import site
from app.parts import compare, post
from app.state import loaded_model, runs
from app.views import knockouts, scaling_race

loaded = navigation.open_model_page(site.EXPERIMENTS, N_(
    "What does a part of the model do? Take it out and look. A knock-out works on a copy: the model the other "
    "pages use, and other learners' sessions, stay as they are. The loss is measured on the same validation "
    "windows before and after, so the change is the knock-out's alone."), lesson_steps=(7,))

windows = loaded_model.validation_windows(loaded)
knockouts.knockout_section(loaded, windows)
knockouts.importance_section(loaded, windows)
scaling_race.race_section()
compare.compare_section()
post.post_button(*runs.session_run())
