"""posenc.apply_rope against Hugging Face's rotary code, over a grid.

Oracles (transformers 4.49):
  * half-split: transformers.models.llama.modeling_llama.apply_rotary_pos_emb
    with cos/sin from LlamaRotaryEmbedding (full rotary), and
    transformers.models.gpt_neox.modeling_gpt_neox.apply_rotary_pos_emb with
    GPTNeoXRotaryEmbedding (partial rotary: only the first rotary_dim rotate);
  * interleaved: transformers.models.gptj.modeling_gptj.apply_rotary_pos_emb /
    rotate_every_two with create_sinusoidal_positions (GPT-J's own table).

Every case checks two things:
  1. posenc against the float64 NumPy definition (rope_oracles.rope_float64)
     with the per-dtype tolerance TOLERANCE (f32 1e-5, f16 2e-3, bf16 2e-2;
     atol = rtol): what posenc itself promises.
  2. posenc against the Hugging Face oracle with the same tolerance plus the
     oracle's own float32 angle error (hf_fp32_angle_slack x |x|max): HF forms
     position x inv_freq in float32, which is off by up to ~1 ulp of the
     angle (6e-8 x position radians); for f16/bf16 HF also rounds cos/sin and
     every product to the storage dtype, which TOLERANCE already covers.
test_observed_errors runs every grid case again (under pytest-xdist the
others run in other workers), prints the largest errors (run pytest with -s;
docs/precision.md records them) and holds them to what the roundings
explain: every oracle seen in every dtype, each error within a budget in
units of the dtype's rounding, and larger in a coarser dtype.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
from transformers import GPTNeoXConfig, LlamaConfig
from transformers.models.gpt_neox import modeling_gpt_neox
from transformers.models.gptj import modeling_gptj
from transformers.models.llama import modeling_llama

import posenc
from rope_oracles import (DEEPSEEK_V2_LITE, DTYPES, TOLERANCE, UNIT, f64, half_ulp, hf_fp32_angle_slack,
                          max_abs_error, max_violation, positions_grid, random_qk, rope_float64, to_numpy,
                          to_torch)

# ---- Hugging Face oracles ------------------------------------------------------


def hf_llama(q, k, positions, head_dim, theta=10000.0, rope_scaling=None, max_positions=4096):
    """Llama's half-split RoPE on [batch, seq, heads, head_dim] arrays."""
    config = LlamaConfig(hidden_size=head_dim * q.shape[2], num_attention_heads=q.shape[2],
                         num_key_value_heads=k.shape[2], head_dim=head_dim, rope_theta=theta,
                         max_position_embeddings=max_positions, rope_scaling=rope_scaling)
    tq, tk = to_torch(q), to_torch(k)
    cos, sin = modeling_llama.LlamaRotaryEmbedding(config)(tq, torch.from_numpy(positions))
    # [batch, seq, head_dim] cos/sin broadcast over heads at axis 2.
    oq, ok = modeling_llama.apply_rotary_pos_emb(tq, tk, cos, sin, unsqueeze_dim=2)
    return to_numpy(oq), to_numpy(ok)


def hf_gpt_neox(q, k, positions, head_dim, rotary_pct, theta=10000.0):
    """GPT-NeoX's half-split RoPE on the first int(head_dim * rotary_pct) dims."""
    config = GPTNeoXConfig(hidden_size=head_dim * q.shape[2], num_attention_heads=q.shape[2],
                           rotary_pct=rotary_pct, rotary_emb_base=theta,
                           max_position_embeddings=4096)
    tq, tk = to_torch(q), to_torch(k)
    cos, sin = modeling_gpt_neox.GPTNeoXRotaryEmbedding(config)(tq, torch.from_numpy(positions))
    oq, ok = modeling_gpt_neox.apply_rotary_pos_emb(tq, tk, cos, sin, unsqueeze_dim=2)
    return to_numpy(oq), to_numpy(ok)


def hf_gptj(x, positions, rotary_dim):
    """GPT-J's interleaved RoPE (base 10000) on the first rotary_dim dims."""
    table = modeling_gptj.create_sinusoidal_positions(int(positions.max()) + 1, rotary_dim)
    sincos = table[torch.from_numpy(positions)]  # [batch, seq, rotary_dim] = [sin | cos]
    sin, cos = torch.split(sincos, rotary_dim // 2, dim=-1)
    t = to_torch(x)
    rotated = modeling_gptj.apply_rotary_pos_emb(t[..., :rotary_dim], sin.to(t.dtype), cos.to(t.dtype))
    return to_numpy(torch.cat([rotated, t[..., rotary_dim:]], dim=-1))


# ---- the grid -------------------------------------------------------------------

HEAD_DIMS = [32, 64, 80, 96, 128, 256]
SEQS = [1, 7, 300]
# How positions are given: one offset, one offset per batch row (ragged
# decode), or explicit position ids (left padding / packing).
POSITION_MODES = ["offset", "offsets", "position_ids"]

BATCH = 3
Q_HEADS, K_HEADS = 8, 2  # GQA in one call

OBSERVED: dict = {}  # (oracle, dtype, where) -> (largest |posenc - oracle|, largest |posenc - float64|)
SCALE: dict = {}  # (oracle, dtype, where) -> (largest |input|, largest position, largest |posenc output|)


def position_kwargs(mode: str, seq: int, rng: np.random.Generator):
    if mode == "offset":
        return {"offset": 17}
    if mode == "offsets":
        return {"offsets": [0, 5, 1000]}
    # Left padding: row b starts late and its pad tokens repeat position 0;
    # plus a packed row whose positions restart.
    ids = np.zeros((BATCH, seq), np.int64)
    ids[0] = np.arange(seq)
    pad = seq // 3
    ids[1, pad:] = np.arange(seq - pad)
    half = (seq + 1) // 2
    ids[2, :half] = np.arange(half)
    ids[2, half:] = np.arange(seq - half) + 2000
    return {"position_ids": ids}


def record(key, errors, scale):
    """Keeps the largest of each of `errors` and `scale` (the bounds grow with each scale)."""
    for table, values in ((OBSERVED, errors), (SCALE, scale)):
        table[key] = tuple(max(old, new) for old, new in zip(table.get(key, (0,) * len(values)), values))


def check(ours, oracle_out, truth, dtype, positions, oracle, xmax):
    tol = TOLERANCE[dtype]
    slack = hf_fp32_angle_slack(int(positions.max()))
    assert ours.dtype == DTYPES[dtype][0]
    assert max_violation(ours, truth, tol) <= 1.0, "posenc vs float64 definition"
    assert max_violation(ours, oracle_out, tol + slack * xmax) <= 1.0, f"posenc vs {oracle}"
    errors = max_abs_error(ours, oracle_out), max_abs_error(ours, truth)
    scale = xmax, int(positions.max()), float(np.abs(f64(ours)).max())
    record((oracle, dtype, "all positions"), errors, scale)
    if positions.max() < 64:  # where HF's fp32 angle error is negligible
        record((oracle, dtype, "positions < 64"), errors, scale)


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("mode", POSITION_MODES)
@pytest.mark.parametrize("seq", SEQS, ids=lambda s: f"seq{s}")
@pytest.mark.parametrize("head_dim", HEAD_DIMS, ids=lambda d: f"d{d}")
def test_llama_half_split(head_dim, seq, mode, dtype, rng):
    np_dtype = DTYPES[dtype][0]
    q = random_qk(rng, (BATCH, seq, Q_HEADS, head_dim), np_dtype)
    k = random_qk(rng, (BATCH, seq, K_HEADS, head_dim), np_dtype)
    kwargs = position_kwargs(mode, seq, rng)
    positions = positions_grid(BATCH, seq, **kwargs)
    spec = posenc.RopeSpec(theta=10000.0, head_dim=head_dim)
    oq, ok = posenc.apply_rope(spec, q, k, **kwargs)
    hq, hk = hf_llama(q, k, positions, head_dim)
    inv_freq, _ = spec.frequencies()
    for ours, x, hf in ((oq, q, hq), (ok, k, hk)):
        truth = rope_float64(x, positions, inv_freq, "half-split")
        check(ours, hf, truth, dtype, positions, "llama", float(np.abs(f64(x)).max()))


# GPT-NeoX-20B (head_dim 96, rotary_pct 0.25 -> 24 rotated dims), Phi-2-like
# (head_dim 80, 0.4 -> 32), and a half of 128.
NEOX_SHAPES = {"gpt-neox-20b": (96, 0.25), "d80-r32": (80, 0.4), "d128-r64": (128, 0.5)}


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("seq", SEQS, ids=lambda s: f"seq{s}")
@pytest.mark.parametrize("head_dim, rotary_pct", list(NEOX_SHAPES.values()), ids=list(NEOX_SHAPES))
def test_gpt_neox_partial_rotary(head_dim, rotary_pct, seq, dtype, rng):
    np_dtype = DTYPES[dtype][0]
    q = random_qk(rng, (BATCH, seq, Q_HEADS, head_dim), np_dtype)
    k = random_qk(rng, (BATCH, seq, K_HEADS, head_dim), np_dtype)
    offsets = [3, 0, 1500]
    positions = positions_grid(BATCH, seq, offsets=offsets)
    spec = posenc.RopeSpec(head_dim=head_dim, partial_rotary_factor=rotary_pct)
    oq, ok = posenc.apply_rope(spec, q, k, offsets=offsets, layout="bshd")
    hq, hk = hf_gpt_neox(q, k, positions, head_dim, rotary_pct)
    inv_freq, _ = spec.frequencies()
    r = spec.rotary_dim
    for ours, x, hf in ((oq, q, hq), (ok, k, hk)):
        truth = rope_float64(x, positions, inv_freq, "half-split")
        check(ours, hf, truth, dtype, positions, "gpt-neox", float(np.abs(f64(x)).max()))
        # The dimensions past rotary_dim pass through bit-identical.
        assert ours[..., r:].tobytes() == x[..., r:].tobytes()


# GPT-J-6B: head_dim 256 with rotary_dim 64, plus full interleaved rotary.
GPTJ_SHAPES = {"gpt-j-6b": (256, 64), "d64": (64, 64), "d128": (128, 128), "d96-r32": (96, 32)}


@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("mode", POSITION_MODES)
@pytest.mark.parametrize("seq", SEQS, ids=lambda s: f"seq{s}")
@pytest.mark.parametrize("head_dim, rotary_dim", list(GPTJ_SHAPES.values()), ids=list(GPTJ_SHAPES))
def test_gptj_interleaved(head_dim, rotary_dim, seq, mode, dtype, rng):
    np_dtype = DTYPES[dtype][0]
    q = random_qk(rng, (BATCH, seq, Q_HEADS, head_dim), np_dtype)
    k = random_qk(rng, (BATCH, seq, K_HEADS, head_dim), np_dtype)
    kwargs = position_kwargs(mode, seq, rng)
    positions = positions_grid(BATCH, seq, **kwargs)
    spec = posenc.RopeSpec.from_hf_config({"model_type": "gptj", "n_embd": 16 * head_dim,
                                           "n_head": 16, "rotary_dim": rotary_dim,
                                           "n_positions": 2048})
    assert spec.layout == "interleaved" and spec.rotary_dim == rotary_dim
    oq, ok = posenc.apply_rope(spec, q, k, **kwargs)
    inv_freq, _ = spec.frequencies()
    for ours, x in ((oq, q), (ok, k)):
        truth = rope_float64(x, positions, inv_freq, "interleaved")
        check(ours, hf_gptj(x, positions, rotary_dim), truth, dtype, positions, "gpt-j",
              float(np.abs(f64(x)).max()))
        assert ours[..., rotary_dim:].tobytes() == x[..., rotary_dim:].tobytes()


# ---- attention factor, positions, implementations ---------------------------

QWEN2_YARN = {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}


def test_yarn_attention_factor_applied_once_to_q_and_k(rng):
    """Qwen2-7B with YaRN x4: q and k are each scaled by the attention factor a
    (so logits by a^2), exactly once, as HF's cos/sin carry it."""
    spec = posenc.RopeSpec(theta=1e6, head_dim=128, scaling=QWEN2_YARN)
    plain = posenc.RopeSpec(theta=1e6, head_dim=128, scaling=dict(QWEN2_YARN, attention_factor=1.0))
    _, a = spec.frequencies()
    assert a == pytest.approx(1.1386294361119891, rel=1e-15)  # 0.1 ln 4 + 1
    q = random_qk(rng, (2, 9, 28, 128), np.float32)
    k = random_qk(rng, (2, 9, 4, 128), np.float32)
    offsets = [0, 40000]  # past the original 32K
    oq, ok = posenc.apply_rope(spec, q, k, offsets=offsets, layout="bshd")
    pq, pk = posenc.apply_rope(plain, q, k, offsets=offsets, layout="bshd")
    # Rotation keeps norms: each output row is a times its input row.
    for ours, x in ((oq, q), (ok, k)):
        ratio = np.linalg.norm(f64(ours), axis=-1) / np.linalg.norm(f64(x), axis=-1)
        np.testing.assert_allclose(ratio, a, rtol=1e-6)
    np.testing.assert_allclose(f64(oq), a * f64(pq), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(f64(ok), a * f64(pk), rtol=1e-6, atol=1e-6)
    # Logits scale by a^2 (k head 0 serves q heads 0..6).
    logits = np.einsum("bsd,btd->bst", f64(oq[:, :, 0]), f64(ok[:, :, 0]))
    plain_logits = np.einsum("bsd,btd->bst", f64(pq[:, :, 0]), f64(pk[:, :, 0]))
    np.testing.assert_allclose(logits, a * a * plain_logits, rtol=1e-5, atol=1e-4)
    # And the same as Hugging Face, whose cos/sin include the factor.
    positions = positions_grid(2, 9, offsets=offsets)
    hq, hk = hf_llama(q, k, positions, 128, theta=1e6, rope_scaling=QWEN2_YARN, max_positions=32768)
    slack = hf_fp32_angle_slack(int(positions.max())) * a
    assert max_violation(oq, hq, 1e-5 + slack * np.abs(q).max()) <= 1
    assert max_violation(ok, hk, 1e-5 + slack * np.abs(k).max()) <= 1
    # inverse undoes forward including the factor; backward is the transpose,
    # which scales by a again rather than dividing.
    back = posenc.apply_rope(spec, oq, offsets=offsets, direction="inverse", layout="bshd")
    np.testing.assert_allclose(back, q, atol=1e-5)
    grad = posenc.apply_rope(spec, oq, offsets=offsets, direction="backward", layout="bshd")
    np.testing.assert_allclose(grad, a * a * q, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("layout", ["half-split", "interleaved"])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_offsets_and_position_ids_agree(layout, dtype, rng):
    spec = posenc.RopeSpec(head_dim=64, layout=layout)
    x = random_qk(rng, (4, 11, 3, 64), DTYPES[dtype][0])
    offsets = np.array([0, 1, 777, 123456])
    ids = offsets[:, None] + np.arange(11)[None, :]
    a = posenc.apply_rope(spec, x, offsets=offsets, layout="bshd")
    b = posenc.apply_rope(spec, x, position_ids=ids, layout="bshd")
    assert a.tobytes() == b.tobytes()
    # A single offset equals the same offset per row and (1, seq) / (seq,) ids.
    c = posenc.apply_rope(spec, x, offset=42, layout="bshd")
    for kwargs in ({"offsets": [42] * 4}, {"position_ids": np.arange(42, 53)[None]},
                   {"position_ids": np.arange(42, 53)}):
        assert posenc.apply_rope(spec, x, **kwargs, layout="bshd").tobytes() == c.tobytes()
    # Row b at offset o equals a batch of one at offset o (mlx#3494).
    for row, start in enumerate(offsets):
        single = posenc.apply_rope(spec, x[row:row + 1], offset=int(start), layout="bshd")
        assert single.tobytes() == a[row:row + 1].tobytes()


@pytest.mark.parametrize("layout", ["half-split", "interleaved"])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("head_dim, rotary_dim", [(64, None), (96, 24), (128, 64), (40, 40)])
def test_fast_and_reference_agree(layout, dtype, head_dim, rotary_dim, rng):
    spec = posenc.RopeSpec(theta=500000.0, head_dim=head_dim, rotary_dim=rotary_dim, layout=layout)
    q = random_qk(rng, (2, 13, 8, head_dim), DTYPES[dtype][0])
    k = random_qk(rng, (2, 13, 2, head_dim), DTYPES[dtype][0])
    kwargs = {"offsets": [5, 70000]}
    fast = posenc.apply_rope(spec, q, k, **kwargs)
    ref = posenc.reference.apply_rope(spec, q, k, **kwargs)
    for f, r in zip(fast, ref):
        if dtype == "f32":
            np.testing.assert_allclose(f, r, rtol=1e-6, atol=2e-6)
        else:
            # Both round once to the storage dtype, from float32 (fast) or
            # float64 (reference): at most one unit in the last place apart.
            mantissa_bits = 10 if dtype == "f16" else 7
            _, exponent = np.frexp(np.abs(f64(r)))
            ulp = np.ldexp(1.0, np.maximum(exponent - 1 - mantissa_bits, -24))
            assert np.all(np.abs(f64(f) - f64(r)) <= ulp)


def test_thread_count_does_not_change_results(rng):
    spec = posenc.RopeSpec(head_dim=128)
    x = random_qk(rng, (4, 64, 8, 128), np.float32)
    before = posenc.num_threads()
    try:
        posenc.set_num_threads(1)
        one = posenc.apply_rope(spec, x, offset=99, layout="bshd")
        posenc.set_num_threads(2)
        assert posenc.num_threads() == 2
        two = posenc.apply_rope(spec, x, offset=99, layout="bshd")
    finally:
        posenc.set_num_threads(before)
    assert one.tobytes() == two.tobytes()


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_inplace_and_strided_views(dtype, rng):
    """q, k and v sliced from one fused QKV projection (strided views, last
    axis contiguous), rotated in place; the same as rotating copies; v untouched."""
    spec = posenc.RopeSpec(head_dim=64)
    qkv = random_qk(rng, (2, 5, 8 + 2 + 2, 64), DTYPES[dtype][0])
    original = qkv.copy()
    q, k = qkv[:, :, :8], qkv[:, :, 8:10]
    assert not q.flags.c_contiguous
    expected_q, expected_k = posenc.apply_rope(spec, q.copy(), k.copy(), offset=3, layout="bshd")
    out_q, out_k = posenc.apply_rope(spec, q, k, offset=3, inplace=True, layout="bshd")
    assert out_q is q and out_k is k
    assert q.tobytes() == expected_q.tobytes() and k.tobytes() == expected_k.tobytes()
    assert qkv[:, :, 10:].tobytes() == original[:, :, 10:].tobytes()
    # Not in place: the inputs are left alone and fresh arrays come back.
    x = original[:, :, :8]
    y = posenc.apply_rope(spec, x, offset=3, layout="bshd")
    assert y is not x and x.tobytes() == original[:, :, :8].tobytes()
    # A view with a step over the batch axis, and a transposed [b, h, s, d] view.
    z = original[::2, :, :8]
    np.testing.assert_array_equal(posenc.apply_rope(spec, z, offset=3, layout="bshd"),
                                  posenc.apply_rope(spec, np.ascontiguousarray(z), offset=3, layout="bshd"))
    bhsd = np.ascontiguousarray(original[:, :, :8].transpose(0, 2, 1, 3))
    view = bhsd.transpose(0, 2, 1, 3)  # [b, s, h, d] with permuted strides
    np.testing.assert_array_equal(posenc.apply_rope(spec, view, offset=3, layout="bshd"),
                                  posenc.apply_rope(spec, np.ascontiguousarray(view), offset=3, layout="bshd"))


def test_permuted_weights_make_half_split_equal_interleaved(rng):
    """Meta's Llama weights use interleaved RoPE; HF permutes W_q/W_k so that
    half-split gives the same attention scores (transformers#25199)."""
    heads, head_dim, hidden, seq = 4, 64, 96, 6
    wq = rng.standard_normal((heads * head_dim, hidden)).astype(np.float32)
    wk = rng.standard_normal((heads * head_dim, hidden)).astype(np.float32)
    x = rng.standard_normal((1, seq, hidden)).astype(np.float32)
    interleaved = posenc.RopeSpec(head_dim=head_dim, layout="interleaved")
    half_split = posenc.RopeSpec(head_dim=head_dim, layout="half-split")

    def project(w):
        return (x @ w.T).reshape(1, seq, heads, head_dim)

    q_i, k_i = posenc.apply_rope(interleaved, project(wq), project(wk), offset=10, layout="bshd")
    wq_h = posenc.permute_qk_weights(wq, heads, head_dim)
    wk_h = posenc.permute_qk_weights(wk, heads, head_dim)
    q_h, k_h = posenc.apply_rope(half_split, project(wq_h), project(wk_h), offset=10, layout="bshd")
    scores_i = np.einsum("bshd,bthd->bhst", f64(q_i), f64(k_i))
    scores_h = np.einsum("bshd,bthd->bhst", f64(q_h), f64(k_h))
    np.testing.assert_allclose(scores_h, scores_i, rtol=1e-4, atol=1e-2)
    # The rotated vectors are the same up to the per-head permutation.
    perm = posenc.permute_qk_weights(np.arange(head_dim), 1, head_dim)
    np.testing.assert_allclose(q_h, q_i[..., perm], rtol=1e-5, atol=1e-4)
    # Round trip, partial rotary, and a bias vector.
    assert np.array_equal(posenc.permute_qk_weights(wq_h, heads, head_dim, to="interleaved"), wq)
    bias = np.arange(heads * head_dim, dtype=np.float32)
    pb = posenc.permute_qk_weights(bias, heads, head_dim, rotary_dim=32)
    assert np.array_equal(pb[:16], np.arange(0, 32, 2)) and np.array_equal(pb[32:64], bias[32:64])
    assert np.array_equal(posenc.permute_qk_weights(pb, heads, head_dim, 32, to="interleaved"), bias)


def test_deepseek_v2_interleaved_scores(rng):
    """DeepSeek-V2's published apply_rotary_pos_emb (modeling_deepseek.py)
    de-interleaves q_pe/k_pe, (d/2, 2) -> (2, d/2), before rotate_half: it
    rotates (2k, 2k+1) pairs and returns them in half-split order. posenc's
    interleaved layout gives the same vectors up to that order, hence the
    same scores."""
    spec = posenc.RopeSpec.from_hf_config(DEEPSEEK_V2_LITE)
    q = random_qk(rng, (1, 5, 16, 64), np.float32)
    k = random_qk(rng, (1, 5, 1, 64), np.float32)
    oq, ok = posenc.apply_rope(spec, q, k, offset=100, layout="bshd")
    inv_freq, a = spec.frequencies()
    positions = positions_grid(1, 5, offset=100)

    def deepseek(x):  # reimplemented from the definition, in torch float64
        t = torch.from_numpy(f64(x))
        b, s, h, d = t.shape
        t = t.view(b, s, h, d // 2, 2).transpose(4, 3).reshape(b, s, h, d)
        angle = torch.from_numpy(positions.astype(np.float64))[..., None] * torch.from_numpy(inv_freq)
        emb = torch.cat([angle, angle], dim=-1)[:, :, None, :]
        rotated = torch.cat([-t[..., d // 2:], t[..., :d // 2]], dim=-1)
        return ((t * emb.cos() + rotated * emb.sin()) * a).numpy()

    np.testing.assert_allclose(np.einsum("bshd,bthd->bhst", f64(oq), f64(ok)),
                               np.einsum("bshd,bthd->bhst", deepseek(q), deepseek(k)),
                               rtol=1e-5, atol=1e-4)
    order = np.concatenate([np.arange(0, 64, 2), np.arange(1, 64, 2)])
    np.testing.assert_allclose(f64(oq)[..., order], deepseek(q), atol=2e-6)


# ---- the observed errors --------------------------------------------------------

# The rotation of a pair (a, b) of norm r <= sqrt(2) max|x|: its cos and sin rounded, the two products and
# the sum each cost at most one rounding of about r. posenc does them in float32 (angles in float64) and
# rounds the result once to the storage dtype; Hugging Face rounds cos and sin to the storage dtype and
# multiplies and adds there, after forming its angles in float32 (hf_fp32_angle_slack).
ROTATION_ROUNDINGS = 4


def bounds(dtype: str, xmax: float, max_position: int, out_max: float):
    """(|posenc - Hugging Face|, |posenc - float64|) at most, for inputs |x| <= xmax."""
    r = math.sqrt(2.0) * xmax
    posenc_f32 = ROTATION_ROUNDINGS * UNIT["f32"] * r
    posenc = posenc_f32 if dtype == "f32" else half_ulp(dtype, out_max) + posenc_f32
    hf = ROTATION_ROUNDINGS * UNIT[dtype] * r + hf_fp32_angle_slack(max_position) * xmax
    return posenc + hf, posenc


def test_observed_errors(rng):
    # Every grid case again, here: under pytest-xdist the cases above run in other workers.
    start = copy.deepcopy(rng)
    fresh = lambda: copy.deepcopy(start)  # noqa: E731
    OBSERVED.clear()
    SCALE.clear()
    for dtype in DTYPES:
        for seq in SEQS:
            for mode in POSITION_MODES:
                for head_dim in HEAD_DIMS:
                    test_llama_half_split(head_dim, seq, mode, dtype, fresh())
                for head_dim, rotary_dim in GPTJ_SHAPES.values():
                    test_gptj_interleaved(head_dim, rotary_dim, seq, mode, dtype, fresh())
            for head_dim, rotary_pct in NEOX_SHAPES.values():
                test_gpt_neox_partial_rotary(head_dim, rotary_pct, seq, dtype, fresh())
    for (oracle, dtype, where), (vs_oracle, vs_truth) in sorted(OBSERVED.items()):
        limits = bounds(dtype, *SCALE[(oracle, dtype, where)])
        print(f"{oracle:9s} {dtype:5s} {where:15s} max|posenc - HF| = {vs_oracle:.3g} (<= {limits[0]:.3g})   "
              f"max|posenc - float64| = {vs_truth:.3g} (<= {limits[1]:.3g})")
    wanted = {(oracle, dtype, where) for dtype in DTYPES for oracle, wheres in (
        ("llama", ("all positions", "positions < 64")), ("gpt-j", ("all positions", "positions < 64")),
        ("gpt-neox", ("all positions",))) for where in wheres}
    assert set(OBSERVED) == wanted, f"not run or unknown: {sorted(wanted ^ set(OBSERVED))}"
    for key, errors in OBSERVED.items():
        limits = bounds(key[1], *SCALE[key])
        for what, error, limit in zip(("posenc - HF", "posenc - float64"), errors, limits):
            assert error <= limit, f"{key}: max |{what}| {error:.3g} > {limit:.3g}"
    # Each dtype reaches the computation: coarser storage, larger errors.
    for oracle, _, where in {key for key in OBSERVED if key[1] == "f32"}:
        for column in (0, 1):
            errors = [OBSERVED[(oracle, dtype, where)][column] for dtype in ("f32", "f16", "bf16")]
            assert errors[0] < errors[1] < errors[2], (oracle, where, column, errors)
