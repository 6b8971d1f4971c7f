"""The learner's three choices on Home, kept in the session across pages: corpus, model, device."""
from __future__ import annotations

import streamlit as st

from minigpt import N_, available_devices

from .i18n import _

# session_state keys of Home's widgets
CORPUS, MODEL_SOURCE, DEVICE = "corpus", "model_source", "device"

# the model sources: session values that stay the same in every language, and their wording
SHIPPED, UPLOADED, TRAINED = "shipped", "uploaded", "trained"
MODEL_SOURCES = (SHIPPED, UPLOADED, TRAINED)
_SOURCE_LABELS = {SHIPPED: N_("Shipped with the app"), UPLOADED: N_("A checkpoint I upload"),
                  TRAINED: N_("The run on the Train page")}


def model_source() -> str:
    return st.session_state.get(MODEL_SOURCE, SHIPPED)


def model_source_label(source: str) -> str:
    return _(_SOURCE_LABELS[source])


def current_device() -> str:
    device = st.session_state.get(DEVICE)
    devices = available_devices()
    return device if device in devices else devices[0]
