"""pytest configuration for the posenc Python tests.

The tests run against the *installed* package (`pip install .`); run them
from this directory so that `import posenc` cannot pick up the source tree.
Shared helpers are in rope_oracles.py.
"""

import numpy as np
import pytest
import torch

import posenc


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20240607)


@pytest.fixture(autouse=True, scope="session")
def _single_thread_torch():
    # Two-core machines: keep torch from oversubscribing next to posenc's pool.
    torch.set_num_threads(1)
    yield


def pytest_report_header(config):
    return f"posenc {posenc.__version__} from {posenc.__file__}; torch {torch.__version__}"
