"""pytest configuration for the posenc Python tests.

The tests run against the *installed* package (`pip install .`); run them
from this directory so that `import posenc` cannot pick up the source tree.
Shared helpers are in rope_oracles.py.
"""

import time

import numpy as np
import pytest
import torch

import posenc


# The tests' random inputs; scripts/precision draws the same ones, so the
# errors it writes into docs/gallery/precision/ are the ones pytest -s prints.
SEED = 20240607


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(SEED)


@pytest.fixture(autouse=True, scope="session")
def _single_thread_torch():
    # Two-core machines: keep torch from oversubscribing next to posenc's pool.
    torch.set_num_threads(1)
    yield


# SmolLM2 (scripts/fetch-model) as Hugging Face and posenc load it, once per
# session: test_model_hf.py and test_hf_patch.py share them (a test that
# patches the HF model removes the patch before it returns).
@pytest.fixture(scope="session")
def smollm_path():
    from hf_models import smollm_gguf
    return smollm_gguf()


@pytest.fixture(scope="session")
def smollm_hf(smollm_path):
    from hf_models import hf_llama
    start = time.perf_counter()
    model = hf_llama(smollm_path)
    print(f"\nHF load of SmolLM2 (gguf-py dequantization): {time.perf_counter() - start:.1f} s")
    return model


@pytest.fixture(scope="session")
def smollm_ours(smollm_path):
    start = time.perf_counter()
    model = posenc.DecoderModel(smollm_path)
    print(f"\nposenc load of SmolLM2: {time.perf_counter() - start:.1f} s")
    return model


def pytest_report_header(config):
    return f"posenc {posenc.__version__} from {posenc.__file__}; torch {torch.__version__}"
