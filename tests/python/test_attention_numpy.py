"""posenc.attention against float64 NumPy transcriptions of definitions that
no Hugging Face module implements.

* ReRoPE and Leaky ReRoPE, after Su Jianlin's reference construction
  (github.com/bojone/rerope, rerope_patch.py and leaky_rerope_patch.py; blog
  kexue.fm/archives/9708): two score matrices, selected by |p - j| < window.
  The first is RoPE at the true positions. The second: ReRoPE rotates q to
  position `window` and leaves k unrotated; Leaky ReRoPE (factor k) rotates q
  to (p + window (k - 1)) / k and k to j / k (Su builds both with a linear
  scaling of factor k and q's positions shifted by window (k - 1)). Log-n
  scaling multiplies q by max(1, log(p + 1) / log(train_length)) before the
  rotation, as there.
* Self-Extend (Jin et al. 2024, "LLM Maybe LongLM"): neighbour attention
  (RoPE) for p - j < w, grouped attention beyond with q at
  floor(p / G) + w - floor(w / G) and k at floor(j / G). Stated precisely:
  with a group size G larger than every position (G -> infinity) the grouped
  part puts q at w and k at 0, so Self-Extend(G = inf, w) is ReRoPE(window
  = w); with G = 1 it is plain RoPE. (LongLM#40 phrases the first as "ReRoPE
  is Self-Extend with window = training length - 1", the window one would
  choose to keep every distance inside the trained range.)
* The Λ mask (LM-Infinite / StreamingLLM sinks + window), built explicitly.
* Learned sink logits (gpt-oss), log-n and softcap together; ALiBi in an
  encoder (symmetric distance form, not causal).

All code here is written from those definitions, not copied. Tolerance per
dtype (rope_oracles.TOLERANCE). test_observed_errors runs every case again
(under pytest-xdist the others run in other workers), prints the largest
errors (pytest -s) and holds them to what the dtype's rounding explains:
every case seen in every dtype, each error within half an ulp of the
case's largest output plus the float32 kernel's arithmetic, and larger in
a coarser dtype.
"""

from __future__ import annotations

import copy
from typing import Optional

import numpy as np
import pytest

import posenc
from attention_oracles import (DTYPES, causal, dot_scores, f64, positions_of, print_observed, record, repeat_kv,
                               rotate, rounded, softmax_attention)
from rope_oracles import UNIT, half_ulp

DTYPE_NAMES = list(DTYPES)
OBSERVED: dict = {}
MAGNITUDE: dict = {}  # (oracle, dtype) -> the largest |posenc output| of the case (its rounding's scale)

HEAD_DIM = 32
SPEC = posenc.RopeSpec(theta=10000.0, head_dim=HEAD_DIM)


def inv_freq() -> np.ndarray:
    return SPEC.frequencies()[0]


def qkv(rng, batch, q_len, kv_len, q_heads=4, kv_heads=2, dtype="f32", q_scale=1.5):
    q = rounded(rng.standard_normal((batch, q_len, q_heads, HEAD_DIM)) * q_scale, dtype)
    k = rounded(rng.standard_normal((batch, kv_len, kv_heads, HEAD_DIM)), dtype)
    v = rounded(rng.standard_normal((batch, kv_len, kv_heads, HEAD_DIM)), dtype)
    return q, k, v


def observe(oracle: str, dtype: str, actual, expected) -> None:
    """record()'s tolerance check and largest error, and the output's scale for test_observed_errors."""
    record(OBSERVED, oracle, dtype, actual, expected)
    MAGNITUDE[(oracle, dtype)] = max(MAGNITUDE.get((oracle, dtype), 0.0), float(np.abs(f64(actual)).max()))


def logn(positions: np.ndarray, train_length: int) -> np.ndarray:
    if train_length <= 0:
        return np.ones(positions.shape)
    return np.maximum(1.0, np.log(positions + 1.0) / np.log(train_length))


# ---- ReRoPE / Leaky ReRoPE ------------------------------------------------------------

RE_ROPE_WINDOWS = [1, 5, 16, 64]
LEAKS = [None, 4.0, 16.0]
IMPLEMENTATIONS = ["kernel", "reference"]
DECODE_LEAKS = [None, 8.0]


def rerope_float64(q, k, v, qp, kp, window: int, leak: Optional[float] = None, train_length: int = 0):
    """Su's construction in float64 (see the module docstring); q [b, q, h, d],
    k, v [b, k, kvh, d], qp [b, q], kp [b, k] absolute positions."""
    q = f64(q) * logn(qp, train_length)[:, :, None, None]
    k = repeat_kv(f64(k), q.shape[2])
    w = inv_freq()
    near = dot_scores(rotate(q, qp, w), rotate(k, kp, w))
    if leak is None:
        far = dot_scores(rotate(q, np.full(qp.shape, float(window)), w), k)
    else:
        far = dot_scores(rotate(q, (qp + window * (leak - 1)) / leak, w), rotate(k, kp / leak, w))
    within = np.abs(qp[:, None, :, None] - kp[:, None, None, :]) < window
    scores = np.where(within, near, far) / np.sqrt(HEAD_DIM)
    return softmax_attention(scores, causal(qp, kp), repeat_kv(f64(v), q.shape[2]))


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("window", RE_ROPE_WINDOWS)
@pytest.mark.parametrize("leak", LEAKS)
@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_rerope_su(dtype, window, leak, implementation, rng):
    q, k, v = qkv(rng, 2, 45, 45, dtype=dtype)
    qp = kp = positions_of(2, 45)
    expected = rerope_float64(q, k, v, qp, kp, window, leak)
    run = posenc.attention if implementation == "kernel" else posenc.reference.attention
    out = run(q, k, v, encoding=posenc.ReRopeEncoding(SPEC, window, leak=leak))
    name = "ReRoPE" if leak is None else "Leaky ReRoPE"
    observe(f"{name} vs Su's construction ({implementation})", dtype, out, expected)


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("leak", DECODE_LEAKS)
def test_rerope_decode_with_logn(dtype, leak, rng):
    """Decode: 3 queries after 97 cached keys, log-n past a 64-token training
    length, ragged rows (per-row query offsets and kv_lengths)."""
    q, k, v = qkv(rng, 2, 3, 100, dtype=dtype)
    kv_lengths = [100, 71]
    qp = np.array([[97, 98, 99], [68, 69, 70]])
    kp = positions_of(2, 100)
    expected = rerope_float64(q, k, v, qp, kp, 24, leak, train_length=64)
    expected[1] = rerope_float64(q[1:], k[1:, :71], v[1:, :71], qp[1:], kp[1:, :71], 24, leak, train_length=64)[0]
    out = posenc.attention(q, k, v, encoding=posenc.ReRopeEncoding(SPEC, 24, leak=leak), logn_train_length=64,
                           kv_lengths=kv_lengths, layout="bshd")
    observe("ReRoPE decode + log-n + kv_lengths", dtype, out, expected)


def test_rerope_wide_window_is_rope(rng):
    q, k, v = qkv(rng, 1, 30, 30)
    a = posenc.attention(q, k, v, encoding=posenc.ReRopeEncoding(SPEC, window=30), layout="bshd")
    b = posenc.attention(q, k, v, encoding=posenc.RopeEncoding(SPEC), layout="bshd")
    observe("ReRoPE(window >= length) vs RoPE", "f32", a, b)


# ---- Self-Extend -------------------------------------------------------------------------

NEIGHBOURS = [4, 15]


def self_extend_float64(q, k, v, qp, kp, group: int, neighbours: int):
    """Self-Extend (grouped attention beyond `neighbours`) in float64."""
    q, k = f64(q), repeat_kv(f64(k), q.shape[2])
    w = inv_freq()
    near = dot_scores(rotate(q, qp, w), rotate(k, kp, w))
    q_group = qp // group + neighbours - neighbours // group
    far = dot_scores(rotate(q, q_group, w), rotate(k, kp // group, w))
    within = (qp[:, None, :, None] - kp[:, None, None, :]) < neighbours
    scores = np.where(within, near, far) / np.sqrt(HEAD_DIM)
    return softmax_attention(scores, causal(qp, kp), repeat_kv(f64(v), q.shape[2]))


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("neighbours", NEIGHBOURS)
def test_rerope_is_self_extend_with_infinite_groups(dtype, neighbours, rng):
    q, k, v = qkv(rng, 2, 50, 50, dtype=dtype)
    qp = kp = positions_of(2, 50)
    infinite = 10**9   # larger than every position: floor(p / G) = 0
    expected = self_extend_float64(q, k, v, qp, kp, infinite, neighbours)
    np.testing.assert_allclose(expected, rerope_float64(q, k, v, qp, kp, neighbours), rtol=1e-12, atol=1e-12)
    out = posenc.attention(q, k, v, encoding=posenc.ReRopeEncoding(SPEC, neighbours), layout="bshd")
    observe("ReRoPE vs Self-Extend(G = inf)", dtype, out, expected)
    # G = 1 is plain RoPE; a finite G > 1 is neither.
    rope = posenc.attention(q, k, v, encoding=SPEC, layout="bshd")
    observe("RoPE vs Self-Extend(G = 1)", dtype, rope, self_extend_float64(q, k, v, qp, kp, 1, neighbours))
    grouped = self_extend_float64(q, k, v, qp, kp, 4, neighbours)
    assert np.abs(f64(out) - grouped).max() > 1e-2


# ---- the Λ mask ----------------------------------------------------------------------------

LAMBDA_WINDOWS = [(1, 0), (6, 0), (6, 1), (6, 4), (33, 2), (200, 3)]
LAMBDA_ENCODINGS = ["nope", "rope"]


def lambda_mask(qp, kp, window: int, sinks: int, is_causal: bool = True) -> np.ndarray:
    """[b, 1, q, k] by the definition: the last `window` keys up to the query
    (|p - j| < window when not causal) plus keys at positions < sinks."""
    p, j = qp[:, None, :, None], kp[:, None, None, :]
    near = (p - j < window) if is_causal else (np.abs(p - j) < window)
    visible = near | (j < sinks)
    return visible & (j <= p) if is_causal else visible


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
@pytest.mark.parametrize("window, sinks", LAMBDA_WINDOWS)
@pytest.mark.parametrize("encoding", LAMBDA_ENCODINGS)
def test_lambda_mask(dtype, window, sinks, encoding, rng):
    q, k, v = qkv(rng, 2, 70, 70, dtype=dtype)
    qp = kp = positions_of(2, 70)
    w = inv_freq()
    kr = repeat_kv(f64(k), 4)
    scores = (dot_scores(rotate(q, qp, w), rotate(kr, kp, w)) if encoding == "rope" else dot_scores(q, kr))
    expected = softmax_attention(scores / np.sqrt(HEAD_DIM), lambda_mask(qp, kp, window, sinks), repeat_kv(f64(v), 4))
    out = posenc.attention(q, k, v, encoding=SPEC if encoding == "rope" else None, window=window, sinks=sinks, layout="bshd")
    observe(f"Λ mask ({encoding})", dtype, out, expected)


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_lambda_mask_decode_and_position_ids(dtype, rng):
    """Keys at explicit (gapped) positions, queries at the end; a non-causal
    window too."""
    q, k, v = qkv(rng, 2, 4, 90, dtype=dtype)
    kp = np.stack([np.arange(90), np.arange(90) * 2]).astype(np.int64)
    qp = np.stack([np.arange(86, 90), np.arange(172, 180, 2)]).astype(np.int64)
    kr, vr = repeat_kv(f64(k), 4), repeat_kv(f64(v), 4)
    for is_causal in (True, False):
        expected = softmax_attention(dot_scores(q, kr) / np.sqrt(HEAD_DIM),
                                     lambda_mask(qp, kp, 10, 3, is_causal), vr)
        out = posenc.attention(q, k, v, window=10, sinks=3, causal=is_causal, q_positions=qp, k_positions=kp, layout="bshd")
        observe("Λ mask, position ids" + ("" if is_causal else ", not causal"), dtype, out, expected)


# ---- sink logits, log-n, softcap; ALiBi encoder -----------------------------------------------


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_sink_logits_logn_softcap(dtype, rng):
    q, k, v = qkv(rng, 2, 20, 20, dtype=dtype, q_scale=3.0)
    qp = kp = positions_of(2, 20, offset=40)
    sinks = np.array([0.5, -1.0, 2.0, 0.0])
    cap, train = 4.0, 16
    kr = repeat_kv(f64(k), 4)
    s = dot_scores(f64(q) * logn(qp, train)[:, :, None, None], kr) / np.sqrt(HEAD_DIM)
    s = cap * np.tanh(s / cap)
    # The sink: one more logit per head with a zero value.
    sink_column = np.broadcast_to(sinks[None, :, None, None], s.shape[:3] + (1,))
    scores = np.concatenate([s, sink_column], axis=-1)
    visible = np.concatenate([np.broadcast_to(causal(qp, kp), s.shape), np.ones(sink_column.shape, bool)], axis=-1)
    values = np.concatenate([repeat_kv(f64(v), 4), np.zeros((2, 1, 4, HEAD_DIM))], axis=1)
    expected = softmax_attention(scores, visible, values)
    out = posenc.attention(q, k, v, sink_logits=sinks, logn_train_length=train, softcap=cap, q_offset=40,
                           k_offset=40, layout="bshd")
    observe("sink logits + log-n + softcap", dtype, out, expected)


@pytest.mark.parametrize("dtype", DTYPE_NAMES)
def test_alibi_encoder_distance_form(dtype, rng):
    q, k, v = qkv(rng, 2, 25, 25, q_heads=4, kv_heads=4, dtype=dtype)
    slopes = np.array([0.5, 0.25, 0.125, 0.0625])
    p = np.arange(25)
    bias = -slopes[None, :, None, None] * np.abs(p[:, None] - p[None, :])[None, None]
    expected = softmax_attention(dot_scores(q, k) / np.sqrt(HEAD_DIM) + bias, np.ones((1, 1, 25, 25), bool), v)
    out = posenc.attention(q, k, v, encoding=posenc.AlibiEncoding(slopes), causal=False, layout="bshd")
    observe("ALiBi encoder (distance form)", dtype, out, expected)


# ---- the observed errors --------------------------------------------------------------------

CASES = [f"{name} vs Su's construction ({implementation})" for name in ("ReRoPE", "Leaky ReRoPE")
         for implementation in IMPLEMENTATIONS] + [
    "ReRoPE decode + log-n + kv_lengths", "ReRoPE vs Self-Extend(G = inf)", "RoPE vs Self-Extend(G = 1)",
    "Λ mask (nope)", "Λ mask (rope)", "Λ mask, position ids", "Λ mask, position ids, not causal",
    "sink logits + log-n + softcap", "ALiBi encoder (distance form)"]
F32_ONLY = "ReRoPE(window >= length) vs RoPE"  # the kernel against itself, f32 only
# The kernel's float32 arithmetic (rotation, 32-term dot products, exp, sums over up to 100 keys), absolute:
# 4 x 2^-20 = 64 units of 2^-24, test_attention_hf.py's float32 budget (seen: up to 14.75 units).
KERNEL_F32 = 64 * UNIT["f32"]
# posenc.reference works in float64 like the oracle: only the summation order differs.
FLOAT64_ORDER = 2.0**-40


def bound(oracle: str, dtype: str) -> float:
    """posenc rounds its result once to the storage dtype: at most half an ulp of the case's largest
    output, plus what came before the rounding (the float32 kernel, or float64 for the reference)."""
    before = FLOAT64_ORDER if oracle.endswith("(reference)") else KERNEL_F32
    return half_ulp(dtype, MAGNITUDE[(oracle, dtype)]) + before


def test_observed_errors(rng):
    # Every case again, here: under pytest-xdist the cases above run in other workers. Each starts
    # from the rng fixture's state, so it sees the inputs of its own run.
    start = copy.deepcopy(rng)
    fresh = lambda: copy.deepcopy(start)  # noqa: E731
    OBSERVED.clear()
    MAGNITUDE.clear()
    for dtype in DTYPE_NAMES:
        for window in RE_ROPE_WINDOWS:
            for leak in LEAKS:
                for implementation in IMPLEMENTATIONS:
                    test_rerope_su(dtype, window, leak, implementation, fresh())
        for leak in DECODE_LEAKS:
            test_rerope_decode_with_logn(dtype, leak, fresh())
        for neighbours in NEIGHBOURS:
            test_rerope_is_self_extend_with_infinite_groups(dtype, neighbours, fresh())
        for window, sinks in LAMBDA_WINDOWS:
            for encoding in LAMBDA_ENCODINGS:
                test_lambda_mask(dtype, window, sinks, encoding, fresh())
        test_lambda_mask_decode_and_position_ids(dtype, fresh())
        test_sink_logits_logn_softcap(dtype, fresh())
        test_alibi_encoder_distance_form(dtype, fresh())
    test_rerope_wide_window_is_rope(fresh())
    print_observed("NumPy float64 oracles", OBSERVED)
    wanted = {(case, dtype) for case in CASES for dtype in DTYPE_NAMES} | {(F32_ONLY, "f32")}
    assert set(OBSERVED) == wanted, f"cases not run or unknown: {sorted(wanted ^ set(OBSERVED))}"
    for (oracle, dtype), error in OBSERVED.items():
        limit = bound(oracle, dtype)
        assert error <= limit, f"{oracle} [{dtype}]: max abs error {error:.3g} > {limit:.3g}"
    # Each dtype reaches the computation: coarser storage, larger errors.
    for case in CASES:
        assert OBSERVED[(case, "f32")] < OBSERVED[(case, "f16")] < OBSERVED[(case, "bf16")], case
