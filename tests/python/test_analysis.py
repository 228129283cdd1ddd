"""posenc.analysis against closed forms and float64 re-derivations in NumPy."""
import json

import numpy as np
import pytest

import posenc


def test_dims_closed_forms():
    spec = posenc.RopeSpec.from_hf_config("../../examples/configs/llama-3.1-8b.json")
    dims = posenc.analysis.rope_dims(spec, 8192, comparison_factor=8)
    c = dims["configured"]
    np.testing.assert_allclose(c["wavelength"], 2 * np.pi / c["inv_freq"], rtol=1e-14)
    np.testing.assert_allclose(c["rotations"], 8192 / c["wavelength"], rtol=1e-14)
    inv_freq, _ = spec.frequencies()
    np.testing.assert_allclose(c["inv_freq"], inv_freq, rtol=0)
    assert [m["method"] for m in dims["comparisons"]] == ["plain", "linear", "ntk", "yarn", "llama3"]


def test_dims_longrope_against_numpy():
    spec = posenc.RopeSpec.from_hf_config("../../examples/configs/phi-3-mini-128k.json")
    with open("../../examples/configs/phi-3-mini-128k.json") as f:
        long_factor = np.array(json.load(f)["rope_scaling"]["long_factor"])
    dims = posenc.analysis.rope_dims(spec, 4096, comparison_factor=32)
    longrope = dims["comparisons"][-1]
    assert longrope["method"] == "longrope"
    plain = 10000.0 ** (-np.arange(48) * 2 / 96)
    np.testing.assert_allclose(longrope["inv_freq"], plain / long_factor, rtol=1e-14)
    np.testing.assert_allclose(longrope["rotations"], 4096 * longrope["inv_freq"] / (2 * np.pi), rtol=1e-14)
    given = posenc.analysis.rope_dims(posenc.RopeSpec(head_dim=8), 100, 2.0, longrope_factors=[1, 2, 3, 4])
    np.testing.assert_allclose(given["comparisons"][-1]["inv_freq"], 10000.0 ** (-np.arange(4) / 4) / [1, 2, 3, 4])
    with pytest.raises(ValueError, match="longrope_factors.size"):
        posenc.analysis.rope_dims(posenc.RopeSpec(head_dim=8), 100, 2.0, longrope_factors=[1, 2])


def test_decay_bound_against_numpy():
    spec = posenc.RopeSpec(head_dim=64)
    decay = posenc.analysis.rope_decay(spec, max_distance=50, samples=4)
    theta = 10000.0 ** (-np.arange(32) * 2 / 64)
    for i, delta in enumerate(decay["distance"]):
        s = np.cumsum(np.exp(1j * delta * theta))  # S_j = sum_{i<j} e^{i delta theta_i}, j = 1..d/2
        assert decay["bound"][i] == pytest.approx(np.abs(s).mean(), rel=1e-12)
    assert decay["bound"][0] == pytest.approx((32 + 1) / 2)
    distances = posenc.analysis.log_spaced_distances(4096, 50)
    assert distances[0] == 1 and distances[-1] == 4096 and np.all(np.diff(distances) > 0)
    listed = posenc.analysis.rope_decay(spec, samples=2, distances=distances)
    np.testing.assert_array_equal(listed["distance"], distances)


def test_sinusoidal_shift_and_dots():
    dim, n = 16, 40
    table = posenc.sinusoidal_table(dim, n)
    t = posenc.analysis.sinusoidal_shift_matrix(dim, 5)
    np.testing.assert_allclose((t @ table[:-5].T).T, table[5:], atol=1e-12)
    np.testing.assert_allclose(posenc.analysis.sinusoidal_dot_matrix(dim, n), table @ table.T, atol=1e-12)
    assert posenc.analysis.sinusoidal_linear_map(dim, 64, 8)["max_error"] < 1e-12
    # Solved from the encodings alone, in any window: the same T.
    for first in (0, 300):
        solved = posenc.analysis.sinusoidal_solve_shift_matrix(dim, 5, first=first, count=64)
        np.testing.assert_allclose(solved, t, atol=1e-10)
    assert posenc.analysis.sinusoidal_linear_map(dim, 64, 8)["max_solved_deviation"] < 1e-10


def test_binary_digits():
    bits = posenc.analysis.binary_digits(16, 4)
    np.testing.assert_array_equal(bits @ (2.0 ** np.arange(4)), np.arange(16))


def test_invariance_and_errors():
    spec = posenc.RopeSpec(head_dim=32)
    r = posenc.analysis.rope_invariance(spec, 512, 32)
    assert r["max_error_f64"] < 1e-12 and r["max_error_f32"] < 1e-4 * max(1.0, r["max_abs_score"])
    with pytest.raises(ValueError):
        posenc.analysis.rope_decay(spec, max_distance=-1)
