"""√d_k scaling: the demo's experiment on random queries and keys, with and without 1/√d_k."""
from minigpt import N_

from app import navigation
from app.chrome import site
from app.views import scaling_view

navigation.open_page(site.SCALING, N_(
    "Scaled dot-product attention computes softmax(QKᵀ / √d_k). This experiment draws random queries and keys, as "
    "an untrained head would produce, and compares the softmax with and without the division: without it, bigger "
    "heads give ever more peaked attention (low entropy, one weight near 1); with it, every head size behaves "
    "alike."), lesson_steps=(5,))

scaling_view.experiment()
