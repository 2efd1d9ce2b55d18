"""Shared test settings."""

import os
from pathlib import Path

import pytest
import torch

from training.token_cache import CACHE_ENV

# The local IMDB copy, beside the repo (never in it): tests of the training path read it. A test that
# needs it is marked `needs_imdb` (a module: `pytestmark = pytest.mark.needs_imdb`) and skipped where it
# is absent, unless REQUIRE_DATA=1 (set by .ci/run): then it fails, so that a green CI has trained.
IMDB = Path(__file__).resolve().parents[2] / "shared" / "data" / "imdb"
REQUIRE_DATA = "REQUIRE_DATA"


def pytest_configure(config):
    config.addinivalue_line("markers", f"needs_imdb: reads {IMDB}; skipped without it, failed with {REQUIRE_DATA}=1")


def pytest_runtest_setup(item):
    if item.get_closest_marker("needs_imdb") and not (IMDB / "train.parquet").is_file():
        missing = f"local IMDB copy not found at {IMDB}"
        if os.environ.get(REQUIRE_DATA) == "1":
            pytest.fail(f"{missing} ({REQUIRE_DATA}=1: this run must test the training path)", pytrace=False)
        pytest.skip(missing)


@pytest.fixture(autouse=True, scope="session")
def token_cache(tmp_path_factory):
    """Tokenized splits are cached in a folder of the session's own (`training.token_cache`), never in
    the user's ~/.cache; the runs the tests start as subprocesses inherit it."""
    before = os.environ.get(CACHE_ENV)
    os.environ[CACHE_ENV] = str(tmp_path_factory.mktemp("token-cache"))
    yield
    if before is None:
        os.environ.pop(CACHE_ENV, None)
    else:
        os.environ[CACHE_ENV] = before


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """The tests' tensors are tiny: a second thread only adds hand-off cost, and on a busy 2-core
    machine each parallel op can wait a whole time slice for it (tens of times slower). The app
    runs with one thread too (see `demo.app.main`)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# How close a value the app serves must be to a reference computed in float32. float32 against
# float32 differs only by the order of additions. The app's batched passes run in bfloat16 where
# the CPU multiplies it natively (or with DEMO_PRECISION=bf16): on all 2,500 held-out reviews the
# largest change of a class probability against float32 was 0.011 for the classifier shipped until
# 2026-11-25 and 0.019 for its successor (benchmarks/results/precision_agreement.json), so a served
# probability or attention weight is checked within 0.02 of its float32 reference there.
SERVED_ATOL = {"fp32": 1e-5, "bf16": 0.02}


@pytest.fixture(scope="session")
def served_atol():
    """`served_atol(service)`: the absolute tolerance for comparing what `service` serves (in its
    own precision) with a float32 reference."""
    return lambda service: SERVED_ATOL[service.precision]
