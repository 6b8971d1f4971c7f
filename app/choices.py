"""The learner's three choices on Home, kept in the session across pages: corpus, model, device."""
from __future__ import annotations

import streamlit as st

from minigpt import available_devices

# session_state keys of Home's widgets
CORPUS, MODEL_SOURCE, DEVICE = "corpus", "model_source", "device"

# the model sources, worded as Home's radio shows them
SHIPPED, UPLOADED, TRAINED = "Shipped with the app", "A checkpoint I upload", "The run on the Train page"
MODEL_SOURCES = (SHIPPED, UPLOADED, TRAINED)


def model_source() -> str:
    return st.session_state.get(MODEL_SOURCE, SHIPPED)


def current_device() -> str:
    device = st.session_state.get(DEVICE)
    devices = available_devices()
    return device if device in devices else devices[0]
