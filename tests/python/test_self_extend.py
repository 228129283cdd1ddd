"""Self-Extend (Jin et al. 2024, "LLM Maybe LongLM: Self-Extend LLM Context
Window Without Tuning") against a float64 NumPy transcription of LongLM's
Llama patch (github.com/datamllab/LongLM, self_extend_patch/Llama.py,
``self_extend_forward``), written here from its formulas with its own RoPE,
independent of posenc's code:

* neighbour attention: q and k rotated at their ``position_ids`` (HF Llama's
  RoPE: ``x * cos + rotate_half(x) * sin`` on the half-split layout,
  ``inv_freq = theta ** -(2i / d)``);
* grouped attention: q at ``group_query_position = position_ids //
  group_size_1 + group_size_2 - group_size_2 // group_size_1`` and k at
  ``group_key_position = position_ids // group_size_1`` (LongLM sets the
  shift to 0 when every query position is below group_size_2, which changes
  nothing: no grouped score is used then);
* the neighbour mask selects neighbour scores where ``0 <= p - j <
  group_size_2`` (``tril`` minus a ``tril`` shifted by group_size_2, i.e.
  ``tril`` and ``triu(-group_size_2 + 1)``; for one decoded query, the last
  group_size_2 keys), grouped scores elsewhere below the diagonal; then the
  causal mask, softmax and ``p @ v`` (``repeat_kv`` for GQA).

posenc's ``group`` is LongLM's ``group_size_1`` and its ``window`` is
``group_size_2``. Compared: :func:`posenc.attention` (float32 kernel) within
1e-5, and :func:`posenc.reference.attention` (float64, rounded once to the
float32 output) within half a float32 ulp; over GQA and MQA, odd lengths,
windows not a multiple of the group, a decode step (q_len 1) and a chunk of
queries after cached keys (q_len < kv_len), the interleaved pair layout (the
same attention on permuted dimensions) and group 1 (plain RoPE). A test
fails if the two score matrices are swapped or the window ignored.

The context-extension method ``"self-extend:group=G,window=W"`` is checked
on the tiny Llama (random_llama_gguf.py) against Hugging Face's
LlamaForCausalLM with LongLM's attention patched into every layer (torch,
float64), and its defaults against the rule in context_extension.h.
"""

from __future__ import annotations

import math
import pickle
import re
import sys
import types

import numpy as np
import pytest

import posenc

THETA = 10000.0


# ---- LongLM in NumPy ----------------------------------------------------------------


def rotate_half(x: np.ndarray) -> np.ndarray:
    half = x.shape[-1] // 2
    return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)


def rope_cos_sin(position_ids: np.ndarray, head_dim: int, theta: float = THETA):
    """HF Llama's rotary embedding in float64: cos, sin [batch, seq, head_dim]."""
    inv_freq = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    freqs = position_ids.astype(np.float64)[..., None] * inv_freq
    emb = np.concatenate([freqs, freqs], axis=-1)
    return np.cos(emb), np.sin(emb)


def apply_rotary_pos_emb(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """x [batch, heads, seq, head_dim]; cos, sin [batch, seq, head_dim] (unsqueezed at dim 1)."""
    return x * cos[:, None] + rotate_half(x) * sin[:, None]


def repeat_kv(x: np.ndarray, n_rep: int) -> np.ndarray:
    """[batch, kv_heads, seq, d] -> [batch, kv_heads * n_rep, seq, d], as HF's expand + reshape."""
    b, h, s, d = x.shape
    return np.broadcast_to(x[:, :, None], (b, h, n_rep, s, d)).reshape(b, h * n_rep, s, d)


def longlm_neighbor_mask(q_len: int, kv_len: int, group_size_2: int) -> np.ndarray:
    """LongLM's own construction, for the two cases it supports."""
    if q_len == 1:
        mask = np.zeros((q_len, kv_len))
        mask[:, -group_size_2:] = 1
    elif q_len == kv_len:
        mask = np.tril(np.ones((q_len, kv_len)))
        if q_len - group_size_2 > 0:
            group_mask = np.tril(np.ones((q_len - group_size_2, kv_len - group_size_2)))
            mask[group_size_2:, :-group_size_2] -= group_mask
    else:
        raise ValueError("q_len should be 1 or seq_len.")
    return mask.astype(bool)


def neighbor_mask(q_len: int, kv_len: int, group_size_2: int) -> np.ndarray:
    """tril and triu(-group_size_2 + 1) on the rows of queries at kv_len - q_len + r:
    0 <= p - j < group_size_2. Equals LongLM's mask where it has one."""
    offset = kv_len - q_len
    ones = np.ones((q_len, kv_len))
    mask = (np.tril(ones, offset) * np.triu(ones, offset - group_size_2 + 1)).astype(bool)
    if q_len == 1 or q_len == kv_len:
        assert np.array_equal(mask, longlm_neighbor_mask(q_len, kv_len, group_size_2))
    return mask


def self_extend_longlm(q, k, v, group_size_1: int, group_size_2: int, theta: float = THETA) -> np.ndarray:
    """LongLM's self_extend_forward after the projections, in float64.

    q [batch, q_len, heads, d], k and v [batch, kv_len, kv_heads, d] (posenc's
    layout, unrotated); the queries are the last q_len tokens (positions
    kv_len - q_len ...), the keys at 0..kv_len-1. Returns [batch, q_len, heads, d_v].
    """
    query_states = np.asarray(q, np.float64).transpose(0, 2, 1, 3)
    key_states = np.asarray(k, np.float64).transpose(0, 2, 1, 3)
    value_states = np.asarray(v, np.float64).transpose(0, 2, 1, 3)
    bsz, num_heads, q_len, head_dim = query_states.shape
    kv_seq_len = key_states.shape[2]
    n_rep = num_heads // key_states.shape[1]

    query_position = np.broadcast_to(np.arange(kv_seq_len - q_len, kv_seq_len), (bsz, q_len))
    key_position = np.broadcast_to(np.arange(kv_seq_len), (bsz, kv_seq_len))

    neighbor_q_cos, neighbor_q_sin = rope_cos_sin(query_position, head_dim, theta)
    neighbor_k_cos, neighbor_k_sin = rope_cos_sin(key_position, head_dim, theta)

    _re_group_size_2 = 0 if query_position.max() < group_size_2 else group_size_2
    group_query_position = query_position // group_size_1 + _re_group_size_2 - _re_group_size_2 // group_size_1
    group_key_position = key_position // group_size_1

    group_q_cos, group_q_sin = rope_cos_sin(group_query_position, head_dim, theta)
    group_k_cos, group_k_sin = rope_cos_sin(group_key_position, head_dim, theta)

    neighbor_query_states = apply_rotary_pos_emb(query_states, neighbor_q_cos, neighbor_q_sin)
    neighbor_key_states = apply_rotary_pos_emb(key_states, neighbor_k_cos, neighbor_k_sin)
    group_query_states = apply_rotary_pos_emb(query_states, group_q_cos, group_q_sin)
    group_key_states = apply_rotary_pos_emb(key_states, group_k_cos, group_k_sin)

    neighbor_key_states = repeat_kv(neighbor_key_states, n_rep)
    group_key_states = repeat_kv(group_key_states, n_rep)
    value_states = repeat_kv(value_states, n_rep)

    neighbor_attn_weights = neighbor_query_states @ neighbor_key_states.transpose(0, 1, 3, 2) / math.sqrt(head_dim)
    group_attn_weights = group_query_states @ group_key_states.transpose(0, 1, 3, 2) / math.sqrt(head_dim)

    causal_mask = np.where(key_position[:, None, None, :] > query_position[:, None, :, None], -np.inf, 0.0)
    neighbor_attn_weights = neighbor_attn_weights + causal_mask
    group_attn_weights = group_attn_weights + causal_mask

    mask = neighbor_mask(q_len, kv_seq_len, group_size_2)
    attn_weights = np.where(mask, neighbor_attn_weights, group_attn_weights)
    attn_weights = np.exp(attn_weights - attn_weights.max(-1, keepdims=True))
    attn_weights = attn_weights / attn_weights.sum(-1, keepdims=True)
    return (attn_weights @ value_states).transpose(0, 2, 1, 3)


def interleaved_to_half_split(x: np.ndarray) -> np.ndarray:
    """The interleaved pair layout's dimensions (2i, 2i + 1) moved to (i, i + d/2):
    RoPE on either layout is then the same rotation, and q.k is unchanged."""
    d = x.shape[-1]
    return x[..., np.concatenate([np.arange(0, d, 2), np.arange(1, d, 2)])]


# ---- posenc.SelfExtendEncoding vs LongLM ---------------------------------------------

# batch, q_len, kv_len, q_heads, kv_heads, head_dim, group, window
CASES = [
    (1, 37, 37, 4, 2, 16, 4, 8),      # GQA, odd length, W a multiple of G
    (2, 51, 51, 2, 2, 32, 3, 7),      # W not a multiple of G: q at p // 3 + 7 - 2
    (1, 64, 64, 4, 1, 64, 8, 16),     # MQA, wide heads
    (1, 1, 45, 4, 2, 16, 4, 16),      # one decode step after 44 cached tokens
    (2, 1, 80, 2, 1, 32, 16, 24),     # decode, large group
    (2, 5, 40, 4, 2, 16, 2, 6),       # a chunk of 5 queries after 35 cached tokens
    (1, 29, 29, 2, 2, 16, 2, 40),     # window beyond the sequence: all neighbour scores (RoPE)
    (1, 33, 33, 2, 1, 16, 5, 1),      # window 1: only the diagonal is a neighbour
]
IDS = [f"b{b}-q{q}-kv{kv}-h{h}/{hk}-d{d}-G{g}-W{w}" for b, q, kv, h, hk, d, g, w in CASES]


def qkv(rng, batch, q_len, kv_len, q_heads, kv_heads, head_dim):
    q = (rng.standard_normal((batch, q_len, q_heads, head_dim)) * 1.5).astype(np.float32)
    k = rng.standard_normal((batch, kv_len, kv_heads, head_dim)).astype(np.float32)
    v = rng.standard_normal((batch, kv_len, kv_heads, head_dim)).astype(np.float32)
    return q, k, v


def assert_rounded_from(actual: np.ndarray, expected: np.ndarray) -> float:
    """actual (float32) is expected (float64) rounded once: within half a
    float32 ulp (and 1e-12 for values near zero)."""
    assert actual.dtype == np.float32
    ulp = np.maximum(np.spacing(np.abs(actual)), np.spacing(np.abs(expected).astype(np.float32))).astype(np.float64)
    error = np.abs(actual.astype(np.float64) - expected)
    assert (error <= ulp / 2 + 1e-12).all(), f"max error {error.max():.3g}"
    return float(error.max())


@pytest.mark.parametrize("batch,q_len,kv_len,q_heads,kv_heads,head_dim,group,window", CASES, ids=IDS)
def test_matches_longlm(rng, batch, q_len, kv_len, q_heads, kv_heads, head_dim, group, window):
    q, k, v = qkv(rng, batch, q_len, kv_len, q_heads, kv_heads, head_dim)
    expected = self_extend_longlm(q, k, v, group, window)
    encoding = posenc.SelfExtendEncoding(posenc.RopeSpec(theta=THETA, head_dim=head_dim), group, window)
    out = posenc.attention(q, k, v, encoding=encoding, layout="bshd")
    ref = posenc.reference.attention(q, k, v, encoding=encoding, layout="bshd")
    assert out.shape == ref.shape == (batch, q_len, q_heads, head_dim)
    kernel_error = float(np.abs(out - expected).max())
    ref_error = assert_rounded_from(ref, expected)
    print(f"\nSelf-Extend G={group} W={window} q_len={q_len} kv_len={kv_len}: kernel {kernel_error:.3g}, "
          f"reference {ref_error:.3g}")
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_interleaved_layout_matches_longlm_on_permuted_dimensions(rng):
    """GGUF Llama models rotate interleaved pairs: LongLM (half-split) on q and
    k with their dimensions permuted is the same attention."""
    q, k, v = qkv(rng, 2, 43, 43, 4, 2, 32)
    spec = posenc.RopeSpec(theta=THETA, head_dim=32, layout="interleaved")
    expected = self_extend_longlm(interleaved_to_half_split(q), interleaved_to_half_split(k), v, 4, 12)
    encoding = posenc.SelfExtendEncoding(spec, group=4, window=12)
    np.testing.assert_allclose(posenc.attention(q, k, v, encoding=encoding, layout="bshd"), expected, rtol=1e-5, atol=1e-5)
    assert_rounded_from(posenc.reference.attention(q, k, v, encoding=encoding, layout="bshd"), expected)


def test_explicit_positions_and_offsets(rng):
    """The same decode chunk given by q_offset / q_positions / k_offset: the
    encoding reads positions, not indices (LongLM's position_ids)."""
    q, k, v = qkv(rng, 1, 4, 50, 2, 1, 16)
    expected = self_extend_longlm(q, k, v, 4, 10)
    encoding = posenc.SelfExtendEncoding(posenc.RopeSpec(head_dim=16), 4, 10)
    for kwargs in ({"q_offset": 46}, {"q_positions": np.arange(46, 50)}, {"q_offset": 46, "k_offset": 0}):
        np.testing.assert_allclose(posenc.attention(q, k, v, encoding=encoding, **kwargs), expected,
                                   rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("implementation", ["kernel", "reference"])
def test_group_one_is_rope(rng, implementation):
    run = posenc.attention if implementation == "kernel" else posenc.reference.attention
    spec = posenc.RopeSpec(head_dim=32)
    q, k, v = qkv(rng, 2, 47, 47, 4, 2, 32)
    rope = run(q, k, v, encoding=posenc.RopeEncoding(spec), layout="bshd")
    for window in (1, 5, 46):
        grouped = run(q, k, v, encoding=posenc.SelfExtendEncoding(spec, group=1, window=window), layout="bshd")
        np.testing.assert_allclose(grouped, rope, rtol=0, atol=2e-6)
    np.testing.assert_allclose(rope, self_extend_longlm(q, k, v, 1, 5), rtol=1e-5, atol=1e-5)


def test_branches_are_not_swapped(rng):
    """Neighbour scores inside the window, grouped scores beyond: a transcription
    with the branches swapped, or one ignoring the window, is far from posenc,
    and the window changes the result."""
    q, k, v = qkv(rng, 1, 60, 60, 2, 2, 32)
    spec = posenc.RopeSpec(head_dim=32)
    out = posenc.attention(q, k, v, encoding=posenc.SelfExtendEncoding(spec, group=4, window=8), layout="bshd")
    expected = self_extend_longlm(q, k, v, 4, 8)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)

    # Swapped: grouped scores inside the window, neighbour scores beyond.
    qt, kt, vt = (x.astype(np.float64).transpose(0, 2, 1, 3) for x in (q, k, v))
    pos = np.arange(60)[None]
    cos, sin = rope_cos_sin(pos, 32)
    gq_cos, gq_sin = rope_cos_sin(pos // 4 + 8 - 8 // 4, 32)
    gk_cos, gk_sin = rope_cos_sin(pos // 4, 32)
    near = apply_rotary_pos_emb(qt, cos, sin) @ apply_rotary_pos_emb(kt, cos, sin).transpose(0, 1, 3, 2)
    far = apply_rotary_pos_emb(qt, gq_cos, gq_sin) @ apply_rotary_pos_emb(kt, gk_cos, gk_sin).transpose(0, 1, 3, 2)
    scores = np.where(neighbor_mask(60, 60, 8), far, near) / math.sqrt(32) + np.triu(np.full((60, 60), -np.inf), 1)
    w = np.exp(scores - scores.max(-1, keepdims=True))
    swapped = ((w / w.sum(-1, keepdims=True)) @ vt).transpose(0, 2, 1, 3)
    assert np.abs(out - swapped).max() > 0.05
    assert np.abs(expected - swapped).max() > 0.05

    # The window matters: all neighbour (RoPE) with a window past the length,
    # all grouped but the diagonal with window 1.
    rope = posenc.attention(q, k, v, encoding=spec, layout="bshd")
    wide = posenc.attention(q, k, v, encoding=posenc.SelfExtendEncoding(spec, group=4, window=60), layout="bshd")
    narrow = posenc.attention(q, k, v, encoding=posenc.SelfExtendEncoding(spec, group=4, window=1), layout="bshd")
    np.testing.assert_allclose(wide, rope, rtol=0, atol=2e-6)
    assert np.abs(out - rope).max() > 0.05
    assert np.abs(out - narrow).max() > 0.05
    np.testing.assert_allclose(narrow, self_extend_longlm(q, k, v, 4, 1), rtol=1e-5, atol=1e-5)


# ---- the Python class ----------------------------------------------------------------------


def test_class_api():
    spec = posenc.RopeSpec(head_dim=32)
    e = posenc.SelfExtendEncoding(spec, 8, 1024)
    assert (e.spec, e.group, e.window, e.seq_len) == (spec, 8, 1024, None)
    assert repr(e) == ("SelfExtendEncoding(RopeSpec(theta=10000.0, head_dim=32, layout='half-split'), group=8, "
                       "window=1024)")
    assert repr(posenc.SelfExtendEncoding(spec, group=np.int64(2), window=4, seq_len=64)).endswith(
        "group=2, window=4, seq_len=64)")
    copy = pickle.loads(pickle.dumps(posenc.SelfExtendEncoding(spec, 2, 4, seq_len=64)))
    assert type(copy) is posenc.SelfExtendEncoding and (copy.group, copy.window, copy.seq_len) == (2, 4, 64)
    with pytest.raises(AttributeError):
        e.group = 2
    assert posenc.SelfExtendEncoding.__module__ == "posenc.attention"
    module = sys.modules["posenc.attention"]   # posenc.attention is the function
    assert "SelfExtendEncoding" in posenc.__all__ and "SelfExtendEncoding" in module.__all__
    assert posenc.SelfExtendEncoding in module.Encoding.__args__


def raises(message: str):
    return pytest.raises(ValueError, match="^" + re.escape(message) + "$")


@pytest.mark.parametrize("run", [posenc.attention, posenc.reference.attention], ids=["kernel", "reference"])
def test_errors(run):
    spec = posenc.RopeSpec(head_dim=16)
    q = np.zeros((1, 5, 2, 16), np.float32)
    with raises("[attention] self_extend.group = 0: must be >= 1 (1: plain RoPE)"):
        run(q, q, q, encoding=posenc.SelfExtendEncoding(spec, 0, 4), layout="bshd")
    with raises("[attention] self_extend.window = 0: must be >= 1"):
        run(q, q, q, encoding=posenc.SelfExtendEncoding(spec, 2, 0), layout="bshd")
    with raises("[attention] mask.causal = false: Self-Extend is defined for causal attention"):
        run(q, q, q, encoding=posenc.SelfExtendEncoding(spec, 2, 4), causal=False, layout="bshd")
    with raises("[attention] self_extend.head_dim = 32: must equal the q/k head_dim = 16"):
        run(q, q, q, encoding=posenc.SelfExtendEncoding(posenc.RopeSpec(head_dim=32), 2, 4), layout="bshd")
    with raises("[attention] group = 2.5: must be an integer"):
        posenc.SelfExtendEncoding(spec, 2.5, 4)
    with raises("[attention] window = 9223372036854775808: must fit in a signed 64-bit integer"):
        posenc.SelfExtendEncoding(spec, 2, 2**63)
    with raises("[attention] seq_len = 0: must be > 0 (None: the call's largest position + 1)"):
        posenc.SelfExtendEncoding(spec, 2, 4, seq_len=0)
    with raises("[attention] spec = dict: must be a posenc.RopeSpec"):
        posenc.SelfExtendEncoding({}, 2, 4)


# ---- the context-extension method on a Llama model ---------------------------------------------


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory):
    pytest.importorskip("gguf")
    from random_llama_gguf import write_random_llama
    path = tmp_path_factory.mktemp("self-extend") / "random-llama.gguf"
    write_random_llama(path, tied=False, dtype="f32", seed=11)
    return path


def longlm_attention_forward(group_size_1: int, group_size_2: int):
    """LongLM's self_extend_forward for HF 4.49's LlamaAttention (no cache,
    q_len == kv_len), in the model's dtype; the rotary embedding is HF's own
    (model.model.rotary_emb), evaluated at the neighbour and grouped positions."""
    import torch

    def forward(self, hidden_states, position_embeddings=None, attention_mask=None, past_key_value=None,
                cache_position=None, position_ids=None, **kwargs):
        bsz, q_len, _ = hidden_states.size()
        shape = (bsz, q_len, -1, self.head_dim)
        query_states = self.q_proj(hidden_states).view(shape).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(shape).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(shape).transpose(1, 2)
        kv_seq_len = key_states.shape[-2]
        query_position = position_ids
        key_position = position_ids
        rotary = self._rotary

        def rotate(x, positions):
            cos, sin = rotary(value_states, positions)
            cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
            return x * cos + torch.cat((-x[..., x.shape[-1] // 2:], x[..., :x.shape[-1] // 2]), -1) * sin

        _re_group_size_2 = 0 if query_position.max() < group_size_2 else group_size_2
        group_query_position = query_position // group_size_1 + _re_group_size_2 - _re_group_size_2 // group_size_1
        group_key_position = key_position // group_size_1
        n_rep = self.num_key_value_groups
        neighbor_q, neighbor_k = rotate(query_states, query_position), rotate(key_states, key_position)
        group_q, group_k = rotate(query_states, group_query_position), rotate(key_states, group_key_position)
        neighbor_k = neighbor_k.repeat_interleave(n_rep, dim=1)
        group_k = group_k.repeat_interleave(n_rep, dim=1)
        value_states = value_states.repeat_interleave(n_rep, dim=1)
        neighbor_w = neighbor_q @ neighbor_k.transpose(2, 3) / math.sqrt(self.head_dim)
        group_w = group_q @ group_k.transpose(2, 3) / math.sqrt(self.head_dim)
        causal = torch.triu(torch.full((q_len, kv_seq_len), float("-inf"), dtype=neighbor_w.dtype), 1)
        neighbor_w, group_w = neighbor_w + causal, group_w + causal
        mask = torch.tril(torch.ones((q_len, kv_seq_len)))
        if q_len - group_size_2 > 0:
            mask[group_size_2:, :-group_size_2] -= torch.tril(torch.ones((q_len - group_size_2,
                                                                          kv_seq_len - group_size_2)))
        weights = torch.where(mask.bool(), neighbor_w, group_w).softmax(-1)
        out = (weights @ value_states).transpose(1, 2).reshape(bsz, q_len, -1)
        return self.o_proj(out), None

    return forward


@pytest.mark.parametrize("group,window,n", [(4, 16, 100), (3, 10, 77), (2, 32, 64)])
def test_llama_method_matches_hf_with_longlm_patch(tiny_path, group, window, n):
    """posenc.DecoderModel(method="self-extend:group=G,window=W") vs HF
    LlamaForCausalLM (float64) with LongLM's attention in every layer."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from test_model_hf import hf_llama

    hf = hf_llama(tiny_path).double()
    for layer in hf.model.layers:
        layer.self_attn._rotary = hf.model.rotary_emb
        layer.self_attn.forward = types.MethodType(longlm_attention_forward(group, window), layer.self_attn)
    tokens = np.random.default_rng(n).integers(0, 320, n)
    with torch.no_grad():
        expected = hf(torch.as_tensor(tokens)[None]).logits[0].numpy()
    model = posenc.DecoderModel(tiny_path)
    method = f"self-extend:group={group},window={window}"
    got = model.logits(tokens, method=method)
    plain = model.logits(tokens)
    error = float(np.abs(got - expected).max())
    scale = float(np.abs(expected).max())
    print(f"\ntiny Llama {method}, {n} tokens: max|posenc - HF+LongLM f64| = {error:.3g} (logits up to {scale:.3g}); "
          f"differs from plain RoPE by {np.abs(plain - expected).max():.3g}")
    # float32 against float64 over 2 layers (HF computes RoPE angles in float32).
    assert error <= 1e-5 * scale
    assert (got.argmax(-1) == expected.argmax(-1)).all()
    assert np.abs(plain - expected).max() > 100 * error   # the method really changes the model
    # The same method through perplexity: one window of n tokens.
    ppl = posenc.perplexity(model, tokens, context=n, method=method)
    assert ppl["method"] == f"self-extend:window={window},group={group}"   # the library's order
    assert ppl["mean_nll"] == pytest.approx(float(model.next_token_nll(tokens, method=method).mean()), rel=1e-9)


def test_method_defaults(tiny_path):
    """context_extension.h: window L_train / 2; group the smallest G with
    floor((L - 1) / G) + W - floor(W / G) <= L_train - 1 (1 within L_train)."""
    model = posenc.DecoderModel(tiny_path)
    train = model.context_length                     # 64
    for target in (40, 64, 65, 100, 200, 1000):
        window = train // 2
        group = next(g for g in range(1, target + 1) if (target - 1) // g + window - window // g <= train - 1)
        assert model.resolve_method("self-extend", target) == f"self-extend:window={window},group={group}", target
    assert model.resolve_method("self-extend:window=8", 200) == "self-extend:window=8,group=4"   # 49 + 8 - 2 <= 63
    with pytest.raises(ValueError, match=r"^\[context extension\] group = 0: must be >= 1"):
        model.resolve_method("self-extend:group=0", 100)
    with pytest.raises(ValueError, match=r"is a parameter of self-extend and self-extend-kv, not yarn"):
        model.resolve_method("yarn:group=2", 100)
