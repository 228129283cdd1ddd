"""Bad input to posenc.attention raises ValueError naming the operation,
parameter, value and rule: "[attention] parameter = value: rule". The rules
are the C++ library's (ValidateAttention); the binding adds the array checks
only it can make, in the same format. Both the kernel and the reference
validate the same way."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

import posenc

SPEC = posenc.RopeSpec(head_dim=16)
Q = np.zeros((2, 5, 4, 16), np.float32)
K = np.zeros((2, 5, 2, 16), np.float32)
V = K


@pytest.fixture(params=["kernel", "reference"])
def attention(request):
    return posenc.attention if request.param == "kernel" else posenc.reference.attention


def raises(message: str):
    """The whole message, verbatim."""
    return pytest.raises(ValueError, match="^" + re.escape(message) + "$")


# ---- masks -----------------------------------------------------------------------


def test_negative_window(attention):
    with raises("[attention] mask.window = -1: must be >= 0 (0: no window)"):
        attention(Q, K, V, window=-1, layout="bshd")


def test_sinks_without_window(attention):
    with raises("[attention] mask.sinks = 2: sinks need a window (the Λ mask)"):
        attention(Q, K, V, sinks=2, layout="bshd")
    with raises("[attention] mask.sinks = -1: must be >= 0"):
        attention(Q, K, V, window=3, sinks=-1, layout="bshd")


# ---- encodings ---------------------------------------------------------------------


@pytest.mark.parametrize("leak, shown", [(1.0, "1"), (0.5, "0.5"), (-3, "-3"), (float("nan"), "nan")])
def test_leak_not_above_one(attention, leak, shown):
    with raises(f"[attention] rerope.leak = {shown}: must be > 1 (the growth 1/k beyond the window; "
                "k = 1 is plain RoPE)"):
        attention(Q, K, V, encoding=posenc.ReRopeEncoding(SPEC, 4, leak=leak), layout="bshd")


def test_rerope_window_not_positive(attention):
    with raises("[attention] rerope.window = 0: must be > 0"):
        attention(Q, K, V, encoding=posenc.ReRopeEncoding(SPEC, 0), layout="bshd")


def test_rerope_not_causal(attention):
    with raises("[attention] mask.causal = false: ReRoPE is defined for causal attention"):
        attention(Q, K, V, encoding=posenc.ReRopeEncoding(SPEC, 4), causal=False, layout="bshd")


def test_rope_head_dim_mismatch(attention):
    with raises("[attention] rope.head_dim = 32: must equal the q/k head_dim = 16"):
        attention(Q, K, V, encoding=posenc.RopeEncoding(posenc.RopeSpec(head_dim=32)), layout="bshd")
    with raises("[attention] rerope.head_dim = 32: must equal the q/k head_dim = 16"):
        attention(Q, K, V, encoding=posenc.ReRopeEncoding(posenc.RopeSpec(head_dim=32), 4), layout="bshd")


def test_wrong_slope_count(attention):
    with raises("[attention] alibi.slopes.size() = 2: must equal q_heads = 4"):
        attention(Q, K, V, encoding=posenc.AlibiEncoding([0.5, 0.25]), layout="bshd")
    with raises("[attention] form = 'bloom': must be \"distance\" or \"key-position\""):
        posenc.AlibiEncoding([0.5] * 4, form="bloom")
    with raises("[attention] slopes.shape = (2, 2): must be (q_heads,): one slope per query head"):
        posenc.AlibiEncoding([[0.5, 0.25], [0.1, 0.2]])


def test_t5_weights(attention):
    with raises("[attention] t5.weights.shape[1] = 3: must equal q_heads = 4 (tables are [num_buckets, q_heads])"):
        attention(Q, K, V, encoding=posenc.T5BiasEncoding(np.zeros((32, 3))), layout="bshd")
    with raises("[attention] weights.shape = (32,): must be (num_buckets, q_heads)"):
        posenc.T5BiasEncoding(np.zeros(32))
    with pytest.raises(ValueError, match=r"^\[t5_bias\] max_distance = 8: must be > 8"):
        attention(Q, K, V, encoding=posenc.T5BiasEncoding(np.zeros((32, 4)), max_distance=8), layout="bshd")


def test_unknown_encoding(attention):
    with raises("[attention] encoding = str: must be None, a RopeSpec, RopeEncoding, ReRopeEncoding, "
                "SelfExtendEncoding, AlibiEncoding, T5BiasEncoding, ShawEncoding or UrpeEncoding"):
        attention(Q, K, V, encoding="rope", layout="bshd")


# ---- shapes and dtypes ------------------------------------------------------------------


def test_mismatched_heads(attention):
    k3 = np.zeros((2, 5, 3, 16), np.float32)
    with raises("[attention] k.heads = 3: must divide q.heads = 4 (GQA groups)"):
        attention(Q, k3, k3, layout="bshd")
    with raises("[attention] v.shape = [2, 5, 1, ...]: must match k's [batch, kv_len, kv_heads]"):
        attention(Q, K, np.zeros((2, 5, 1, 16), np.float32), layout="bshd")
    with raises("[attention] k.head_dim = 8: must equal q.head_dim = 16"):
        attention(Q, np.zeros((2, 5, 2, 8), np.float32), np.zeros((2, 5, 2, 8), np.float32), layout="bshd")
    with raises("[attention] k.batch = 1: must equal q.batch = 2"):
        attention(Q, K[:1], V[:1], layout="bshd")


def test_dtypes(attention):
    with raises('[attention] dtype = "f16": q, k and v must share a dtype'):
        attention(Q, K.astype(np.float16), V, layout="bshd")
    with raises('[attention] dtype = "bf16": q, k and v must share a dtype'):
        attention(Q, K, V.astype(ml_dtypes.bfloat16), layout="bshd")
    with raises('[attention] q.dtype = "float64": must be float32, float16 or bfloat16 (ml_dtypes.bfloat16)'):
        attention(Q.astype(np.float64), K, V, layout="bshd")


def test_layout(attention):
    with raises("[attention] q.ndim = 3: must be 4 ([batch, q_len, q_heads, head_dim])"):
        attention(Q[0], K, V, layout="bshd")
    with raises("[attention] v.ndim = 2: must be 4 ([batch, kv_len, kv_heads, dim])"):
        attention(Q, K, V[0, 0], layout="bshd")
    wide = np.zeros((2, 5, 2, 32), np.float32)
    with raises("[attention] k.strides[3] = 2: the last axis must be contiguous (stride 1 element); "
                "pass np.ascontiguousarray(x)"):
        attention(Q, wide[..., ::2], V, layout="bshd")


# ---- positions and lengths ---------------------------------------------------------------


def test_kv_lengths(attention):
    with raises("[attention] kv_lengths[1] = 6: must be in [0, kv_len = 5] (cache overflow)"):
        attention(Q, K, V, kv_lengths=[5, 6], layout="bshd")
    with raises("[attention] kv_lengths[0] = -1: must be in [0, kv_len = 5] (cache overflow)"):
        attention(Q, K, V, kv_lengths=[-1, 5], q_offset=0, layout="bshd")
    with raises("[attention] kv_lengths.size() = 1: must equal batch = 2"):
        attention(Q, K, V, kv_lengths=[5], layout="bshd")
    with raises("[attention] kv_lengths.size() = 1: must equal batch = 2"):
        attention(Q, K, V, kv_lengths=[5], q_offset=0, layout="bshd")
    with raises("[attention] kv_lengths.dtype = float64: must be an integer type (token positions)"):
        attention(Q, K, V, kv_lengths=[5.0, 5.0], layout="bshd")


def test_default_query_positions_need_enough_keys(attention):
    with raises("[attention] q_len = 5: exceeds kv_len = 3: the default puts the queries at the end of the "
                "keys; give the query positions"):
        attention(Q, K[:, :3], V[:, :3], layout="bshd")
    with raises("[attention] q_len = 5: exceeds kv_lengths[0] = 3: the default puts the queries at the end "
                "of the keys; give the query positions"):
        attention(Q, K, V, kv_lengths=[3, 5], layout="bshd")
    attention(Q, K[:, :3], V[:, :3], q_offset=0, layout="bshd")   # explicit positions are fine


def test_positions(attention):
    with raises("[attention] q_positions = given: give q_offset or q_positions, not both"):
        attention(Q, K, V, q_offset=1, q_positions=[0, 1, 2, 3, 4], layout="bshd")
    with raises("[attention] q_positions.shape = (3,): must be (batch, q_len) = (2, 5), (1, q_len) or (q_len,)"):
        attention(Q, K, V, q_positions=[0, 1, 2], layout="bshd")
    with raises("[attention] k_positions.shape = (3, 5): must be (batch, k_len) = (2, 5), (1, k_len) or (k_len,)"):
        attention(Q, K, V, k_positions=np.zeros((3, 5), np.int64), layout="bshd")
    with raises("[attention] q_positions[0, 3] = -3: must not be negative"):
        attention(Q, K, V, q_positions=[0, 1, 2, -3, 4], layout="bshd")
    with raises("[attention] q_positions.dtype = float64: must be an integer type (token positions)"):
        attention(Q, K, V, q_positions=[0.0, 1, 2, 3, 4], layout="bshd")
    with raises("[attention] k_offset.size = 3: must equal batch = 2 (one start per sequence)"):
        attention(Q, K, V, k_offset=[0, 1, 2], layout="bshd")
    with raises("[attention] k_offset = -1: must not be negative"):
        attention(Q, K, V, k_offset=-1, layout="bshd")
    with raises("[attention] q_offset[1] = -2: must not be negative"):
        attention(Q, K, V, q_offset=[0, -2], layout="bshd")


# ---- scalars -------------------------------------------------------------------------------


def test_scalar_options(attention):
    with raises("[attention] sink_logits.size() = 1: must be 0 or q_heads = 4"):
        attention(Q, K, V, sink_logits=[1.0], layout="bshd")
    with raises("[attention] softcap = -1: must be >= 0 (0: off)"):
        attention(Q, K, V, softcap=-1, layout="bshd")
    with raises("[attention] logn_train_length = 1: must not be 1 (log base)"):
        attention(Q, K, V, logn_train_length=1, layout="bshd")
    with raises("[attention] logn_train_length = -5: must be >= 0 (0: off)"):
        attention(Q, K, V, logn_train_length=-5, layout="bshd")
    with raises("[attention] softmax_scale = nan: must be finite"):
        attention(Q, K, V, softmax_scale=float("nan"), layout="bshd")
    with raises("[attention] window = 2.5: must be an integer"):
        attention(Q, K, V, window=2.5, layout="bshd")
    with raises("[attention] causal = 1: must be True or False"):
        attention(Q, K, V, causal=1, layout="bshd")
    with raises("[attention] softcap = 'x': must be a number"):
        attention(Q, K, V, softcap="x", layout="bshd")


def test_spec_type():
    with raises("[attention] spec = dict: must be a posenc.RopeSpec"):
        posenc.RopeEncoding({"rope_theta": 10000.0})
    with raises("[attention] seq_len = 0: must be > 0 (None: the call's largest position + 1)"):
        posenc.RopeEncoding(SPEC, seq_len=0)
