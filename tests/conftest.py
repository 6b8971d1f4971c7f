"""Shared test settings: one torch thread; empty Streamlit caches and no training thread per test."""
import pytest
import streamlit as st
import torch

from minigpt import stop_all_runs


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    # Tiny models are overhead-bound; on a shared 2-core box two intra-op threads
    # collapse under contention (a browser, a server and pytest run together).
    torch.set_num_threads(1)
    yield


@pytest.fixture(autouse=True)
def _fresh_streamlit_resources():
    """cache_resource is process-wide and app threads outlive AppTest.run(): clear both.

    Clearing calls the run registry's on_release, which stops its runs; stop_all_runs()
    also stops runs that tests built outside the registry."""
    st.cache_resource.clear()
    st.cache_data.clear()
    yield
    st.cache_resource.clear()
    st.cache_data.clear()
    stop_all_runs()
