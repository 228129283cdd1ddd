"""The Python API itself: spec round trips, argument forms, return types,
docstring examples, threads."""

from __future__ import annotations

import doctest
import json
import pickle
import threading

import ml_dtypes
import numpy as np
import pytest
from transformers import LlamaConfig

import posenc
import posenc.reference
import posenc.rope

SCALINGS = [
    None,
    {"rope_type": "linear", "factor": 4.0},
    {"rope_type": "ntk", "alpha": 8.0},
    {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 4096},
    {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768,
     "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 0.707, "mscale_all_dim": 0.707,
     "truncate": False, "ext_factor": 0.5, "attn_factor": 1.1},
    {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
     "original_max_position_embeddings": 8192},
    {"rope_type": "longrope", "short_factor": [1.0] * 32, "long_factor": [2.0] * 32,
     "original_max_position_embeddings": 4096, "factor": 32.0, "attention_factor": 1.2},
    {"rope_type": "factors", "factors": list(np.linspace(1, 8, 32))},
]


@pytest.mark.parametrize("scaling", SCALINGS,
                         ids=lambda s: "none" if s is None else s["rope_type"])
def test_spec_round_trips(scaling):
    spec = posenc.RopeSpec(theta=500000.0, head_dim=64, scaling=scaling)
    assert spec.scaling_type == ("none" if scaling is None else scaling["rope_type"])
    if scaling is not None:
        for key, value in scaling.items():
            assert spec.scaling[key] == value
    assert posenc.RopeSpec(500000.0, 64, scaling=spec.scaling) == spec
    assert pickle.loads(pickle.dumps(spec)) == spec
    assert posenc.RopeSpec.from_hf_config(spec.to_hf_config(max_position_embeddings=4096)) == spec
    assert hash(spec) == hash(posenc.RopeSpec(500000.0, 64, scaling=scaling))
    assert repr(spec).startswith("RopeSpec(theta=500000.0, head_dim=64")
    inv_freq, attention_factor = spec.frequencies(100)
    assert inv_freq.dtype == np.float64 and inv_freq.shape == (32,)
    assert isinstance(attention_factor, float)


def test_properties_and_repr():
    spec = posenc.RopeSpec(head_dim=96, partial_rotary_factor=0.25, layout="interleaved")
    assert (spec.theta, spec.head_dim, spec.rotary_dim, spec.pairs) == (10000.0, 96, 24, 12)
    assert spec.layout == "interleaved" and spec.partial_rotary_factor == 0.25
    assert spec.scaling is None and spec.original_context_length == 0
    assert repr(spec) == "RopeSpec(theta=10000.0, head_dim=96, rotary_dim=24, layout='interleaved')"
    assert posenc.RopeSpec(head_dim=96, rotary_dim=96) == posenc.RopeSpec(head_dim=96)
    yarn = posenc.RopeSpec(head_dim=128, scaling={"type": "yarn", "factor": 4,
                                                  "original_max_position_embeddings": 4096})
    assert yarn.original_context_length == 4096
    weights = yarn.yarn_extrapolation_weights()
    assert weights.shape == (64,) and weights[0] == 1.0 and weights[-1] == 0.0


def test_from_hf_config_accepts_every_form(tmp_path):
    config = {"hidden_size": 4096, "num_attention_heads": 32, "rope_theta": 500000.0,
              "max_position_embeddings": 131072,
              "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                               "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    forms = [config, json.dumps(config), path, str(path), LlamaConfig(**config)]
    specs = [posenc.RopeSpec.from_hf_config(form) for form in forms]
    assert all(s == specs[0] for s in specs)
    assert specs[0].max_position_embeddings == 131072
    # transformers v5 spelling: rope_parameters with rope_theta inside.
    v5 = {"hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 131072,
          "rope_parameters": dict(config["rope_scaling"], rope_theta=500000.0)}
    assert posenc.RopeSpec.from_hf_config(v5) == specs[0]


def test_return_types(rng):
    spec = posenc.RopeSpec(head_dim=32)
    q = rng.standard_normal((1, 2, 3, 32)).astype(np.float32)
    single = posenc.apply_rope(spec, q, layout="bshd")
    assert isinstance(single, np.ndarray) and single.shape == q.shape
    pair = posenc.apply_rope(spec, q, q[:, :, :1], layout="bshd")
    assert isinstance(pair, tuple) and len(pair) == 2
    for dtype in (np.float16, ml_dtypes.bfloat16):
        x = q.astype(dtype)
        assert posenc.apply_rope(spec, x, layout="bshd").dtype == np.dtype(dtype)
    # Nested lists become float64 arrays, which are refused rather than
    # silently converted: the caller picks the dtype.
    with pytest.raises(ValueError, match='dtype = "float64"'):
        posenc.apply_rope(spec, q.tolist(), layout="bshd")
    assert posenc.apply_rope(spec, np.asarray(q.tolist(), np.float32), layout="bshd").tobytes() == single.tobytes()


def test_reused_frequencies_match_computed_ones():
    spec = posenc.RopeSpec(head_dim=64, scaling={"rope_type": "dynamic", "factor": 2.0,
                                                 "original_max_position_embeddings": 16})
    x = np.random.default_rng(1).standard_normal((2, 40, 2, 64)).astype(np.float32)
    # Computed for this call's length (40 > 16: dynamic scaling active) ...
    auto = posenc.apply_rope(spec, x, layout="bshd")
    given = posenc.apply_rope(spec, x, frequencies=spec.frequencies(40), layout="bshd")
    assert auto.tobytes() == given.tobytes()
    # ... which differs from the table of a short sequence.
    short = posenc.apply_rope(spec, x, frequencies=spec.frequencies(16), layout="bshd")
    assert not np.array_equal(auto, short)


def test_concurrent_python_threads_get_correct_results():
    """The GIL is released during kernels: calls from several Python threads
    run side by side and each gets its own, correct, result."""
    spec = posenc.RopeSpec(head_dim=128)
    rng = np.random.default_rng(2)
    inputs = [rng.standard_normal((2, 64, 8, 128)).astype(np.float32) for _ in range(4)]
    expected = [posenc.apply_rope(spec, x, offset=i, layout="bshd") for i, x in enumerate(inputs)]
    results = [None] * 4

    def work(i):
        for _ in range(5):
            results[i] = posenc.apply_rope(spec, inputs[i], offset=i, layout="bshd")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for got, want in zip(results, expected):
        assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("module", [posenc, posenc.rope, posenc.reference, posenc.passkey],
                         ids=lambda m: m.__name__)
def test_docstring_examples(module):
    result = doctest.testmod(module, extraglobs={"posenc": posenc, "np": np},
                             optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0 and result.attempted > 0
