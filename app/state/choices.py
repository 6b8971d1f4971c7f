"""The learner's three choices on Home, kept in the session across pages: corpus, model, device."""
from __future__ import annotations

import streamlit as st

import minigpt
from minigpt import N_

from app.chrome.i18n import _
from app.state import warmup

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


def devices() -> list[str]:
    """The devices this server can use, best first. Asks torch (loading it)."""
    return minigpt.available_devices()


def current_device() -> str:
    """The device the session's models use: its choice, else the best here. Asks torch (loading it)."""
    return _chosen(devices())


def known_devices() -> list[str] | None:
    """The devices, where they are known without waiting for torch to load (warmup); else None."""
    return devices() if warmup.ready() else warmup.devices_without_torch()


def device_label() -> str:
    """The session's device, as the sidebar and Home say it; while only torch can tell which devices
    there are and it is still loading, this says so instead of waiting for it."""
    usable = known_devices()
    return _("being found…") if usable is None else _chosen(usable)


def _chosen(usable: list[str]) -> str:
    """The session's choice among `usable`, else the best of them."""
    device = st.session_state.get(DEVICE)
    return device if device in usable else usable[0]
