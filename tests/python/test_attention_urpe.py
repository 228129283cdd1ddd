"""posenc.UrpeEncoding against URPE as its paper writes it (no Hugging Face).

Luo et al., NeurIPS 2022, "Your Transformer May Not be as Powerful as You
Expect" (arXiv 2205.13401), URPE-based attention, per head:

    Attn(X) = (softmax(Q K^T / sqrt(d) + B) ⊙ C) V

B the relative bias and C a learnable Toeplitz matrix (C_ij = c(j - i)),
multiplied elementwise with the attention probabilities and *not*
renormalized: breaking the row-stochastic softmax is the paper's point.

The oracle below is that formula in float64 NumPy with explicit Toeplitz
matrices over exact distances. posenc reads B and C through T5's buckets; the
tests keep every distance inside T5's exact buckets (Raffel et al. 2020:
distance n < max_exact is bucket n; bidirectionally num_buckets / 2 buckets
per sign, the positive ones after the negative ones), so a bucket is a
distance and the paper's exact-distance C is what posenc is given.
"""

import numpy as np
import pytest

import posenc

HEADS, KV_HEADS, DIM = 4, 2, 8


def exact_bucket(distance: int, num_buckets: int, bidirectional: bool) -> int:
    """T5's bucket of ``distance = key - query`` where it is exact."""
    if bidirectional:
        half = num_buckets // 2
        assert abs(distance) < half // 2
        return abs(distance) + (half if distance > 0 else 0)
    assert -num_buckets // 2 < distance <= 0
    return -distance


def toeplitz(table: np.ndarray, head: int, q_pos: np.ndarray, k_pos: np.ndarray, num_buckets: int,
             bidirectional: bool, visible: np.ndarray) -> np.ndarray:
    """[q_len, kv_len]: entry (i, j) = the head's value at distance k_pos[j] - q_pos[i]."""
    out = np.zeros((len(q_pos), len(k_pos)))
    for i, p in enumerate(q_pos):
        for j, t in enumerate(k_pos):
            if visible[i, j]:
                out[i, j] = table[exact_bucket(int(t - p), num_buckets, bidirectional), head]
    return out


def urpe_oracle(q, k, v, bias, scale, *, causal: bool, renormalize: bool = False):
    """The paper's URPE attention, float64. q [q_len, HEADS, DIM], k, v
    [kv_len, KV_HEADS, DIM], the queries the last q_len positions; out
    [q_len, HEADS, DIM]. ``renormalize`` divides each row of P ⊙ C by its
    sum: what URPE is not."""
    q_len, kv_len = q.shape[0], k.shape[0]
    q_pos, k_pos = np.arange(kv_len - q_len, kv_len), np.arange(kv_len)
    visible = k_pos[None, :] <= q_pos[:, None] if causal else np.ones((q_len, kv_len), bool)
    out = np.zeros((q_len, HEADS, v.shape[2]))
    for h in range(HEADS):
        kv = h // (HEADS // KV_HEADS)
        B = toeplitz(bias, h, q_pos, k_pos, bias.shape[0], not causal, visible)
        C = toeplitz(scale, h, q_pos, k_pos, scale.shape[0], not causal, visible)
        s = q[:, h] @ k[:, kv].T / np.sqrt(DIM) + B
        s = np.where(visible, s, -np.inf)
        p = np.exp(s - s.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        weighted = p * C
        if renormalize:
            weighted /= weighted.sum(axis=1, keepdims=True)
        out[:, h] = weighted @ v[:, kv]
    return out


def inputs(rng, q_len, kv_len, num_buckets):
    q = rng.standard_normal((q_len, HEADS, DIM))
    k = rng.standard_normal((kv_len, KV_HEADS, DIM))
    v = rng.standard_normal((kv_len, KV_HEADS, DIM))
    bias = rng.standard_normal((num_buckets, HEADS))
    scale = rng.uniform(0.2, 2.0, (num_buckets, HEADS))  # far from 1 (T5's bias) and from a row sum of 1
    return q, k, v, bias, scale


# (causal, q_len, kv_len, num_buckets): a decoder prefill and decode step, an
# encoder; the distances stay in the exact buckets.
CASES = [(True, 10, 10, 24), (True, 3, 11, 24), (False, 9, 9, 40)]


@pytest.mark.parametrize("run", [posenc.attention, posenc.reference.attention], ids=["kernel", "reference"])
@pytest.mark.parametrize("causal,q_len,kv_len,num_buckets", CASES)
def test_urpe_is_the_papers_formula(rng, run, causal, q_len, kv_len, num_buckets):
    q, k, v, bias, scale = inputs(rng, q_len, kv_len, num_buckets)
    enc = posenc.UrpeEncoding(bias, scale, max_distance=128, bidirectional=not causal)
    f32 = lambda a: a[None].astype(np.float32)  # noqa: E731
    got = run(f32(q), f32(k), f32(v), encoding=enc, causal=causal, layout="bshd")[0]
    want = urpe_oracle(q, k, v, bias, scale, causal=causal)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)
    # Not the renormalized reading of the formula (the rows of P ⊙ C sum to 1 there).
    assert np.abs(urpe_oracle(q, k, v, bias, scale, causal=causal, renormalize=True) - want).max() > 0.1


def test_unit_scale_is_t5s_bias(rng):
    """C = 1 leaves the softmax rows as they are: T5's relative bias."""
    q, k, v, bias, _ = inputs(rng, 8, 8, 24)
    f32 = lambda a: a[None].astype(np.float32)  # noqa: E731
    urpe = posenc.attention(f32(q), f32(k), f32(v), layout="bshd",
                            encoding=posenc.UrpeEncoding(bias, np.ones_like(bias), max_distance=128,
                                                         bidirectional=False))
    t5 = posenc.attention(f32(q), f32(k), f32(v), layout="bshd",
                          encoding=posenc.T5BiasEncoding(bias, max_distance=128, bidirectional=False))
    np.testing.assert_array_equal(urpe, t5)


def test_value_class():
    bias, scale = np.zeros((8, 2)), np.ones((8, 2))
    enc = posenc.UrpeEncoding(bias, scale, max_distance=16, bidirectional=False)
    assert repr(enc) == ("UrpeEncoding(bias=<8 buckets x 2 heads>, scale=<8 buckets x 2 heads>, max_distance=16, "
                         "bidirectional=False)")
    assert (enc.num_buckets, enc.max_distance, enc.bidirectional) == (8, 16, False)
    np.testing.assert_array_equal(enc.scale, scale)
    assert enc == posenc.UrpeEncoding(bias, scale, max_distance=16, bidirectional=False)
    assert enc != posenc.UrpeEncoding(bias, 2 * scale, max_distance=16, bidirectional=False)
    import pickle
    assert pickle.loads(pickle.dumps(enc)) == enc


def test_errors():
    q = np.ones((1, 4, 2, 8), np.float32)
    with pytest.raises(ValueError, match=r"^\[attention\] scale\.shape = \(8, 3\): must equal bias\.shape = \(8, 2\)$"):
        posenc.UrpeEncoding(np.zeros((8, 2)), np.ones((8, 3)))
    with pytest.raises(ValueError, match=r"^\[attention\] bias\.shape = \(8,\): must be \(num_buckets, q_heads\)$"):
        posenc.UrpeEncoding(np.zeros(8), np.ones(8))
    enc = posenc.UrpeEncoding(np.zeros((8, 3)), np.ones((8, 3)))
    with pytest.raises(ValueError, match=r"^\[attention\] urpe\.bias\.shape\[1\] = 3: must equal q_heads = 2"):
        posenc.attention(q, q, q, encoding=enc, layout="bshd")
