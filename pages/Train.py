"""Train: presets and hyperparameters, Start/Pause/Resume/Stop, and a live view of the run's background thread."""
from minigpt import N_

from app import navigation
from app.chrome import site
from app.parts import train_form
from app.state import corpora, runs, serving, train_settings
from app.views import training

navigation.open_page(site.TRAIN, N_(
    "Train your own MiniGPT on the chosen corpus. Training runs in a background thread on the server, so it goes "
    "on while you visit other pages; the chart shows the training loss (blue), the validation loss on held-out "
    "text at each evaluation (red) and the learning rate (grey, right axis). The loss is the cross-entropy in "
    "nats. At each evaluation the run also writes a sample and keeps the attention maps for the Attention page's "
    "time-lapse."), lesson_steps=(11, 12))

serving.not_saving_warning()
serving.cluster_warning()
entry, owner = runs.session_run()
train_settings.ensure_filled(runs.run_settings(entry) if entry is not None else None)
corpus = corpora.current_corpus()  # after the form: in a class, its text or its challenge may set the corpus
in_range = train_form.form(expanded=entry is None)
model_cfg, train_cfg = train_settings.configs()
train_form.share_link(model_cfg, train_cfg)

settings_ok = training.new_run_line(corpus, model_cfg, train_cfg, in_range)
training.controls(corpus, model_cfg, train_cfg, settings_ok)

training.run_heading(entry, owner)
training.live_view(entry)
training.downloads_and_sharing(entry, owner)
