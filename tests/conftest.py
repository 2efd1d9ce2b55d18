"""Shared test settings."""

import pytest
import torch


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """The tests' tensors are tiny: a second thread only adds hand-off cost, and on a busy 2-core
    machine each parallel op can wait a whole time slice for it (tens of times slower). The app
    runs with one thread too (see `demo.app.main`)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
