"""Shared test settings."""
import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    # Tiny models are overhead-bound; on a shared 2-core box two intra-op threads
    # collapse under contention (a browser, a server and pytest run together).
    torch.set_num_threads(1)
    yield
