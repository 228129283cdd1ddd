"""Where llama.cpp's KV-shift Self-Extend (llamacpp_self_extend.py, its
position loop transcribed) and Self-Extend as published (Jin et al. 2024,
posenc's SelfExtendEncoding) give a query and a key different distances
(llama.cpp#4886), and posenc's form="kv-shift" (the method
"self-extend-kv") held to the transcription's attention. Decode one token a step, G = grp_attn_n,
W = grp_attn_w as the neighbour window. (llama.cpp's passkey example feeds
the prompt in batches and runs the loop between them; the positions then
depend on the batch size: one token a step is its generation.)
"""

from __future__ import annotations

import numpy as np
import pytest

import posenc

from llamacpp_self_extend import llamacpp_distances, self_extend_distances

CASES = [(64, 4, 16), (200, 2, 8), (300, 8, 32), (500, 4, 64), (257, 3, 12)]


@pytest.mark.parametrize("n,group,window", CASES)
def test_same_before_the_first_compression(n, group, window):
    np.testing.assert_array_equal(llamacpp_distances(n, group, window)[:window],
                                  self_extend_distances(n, group, window)[:window])


@pytest.mark.parametrize("n,group,window", CASES)
def test_far_keys_lack_the_shift(n, group, window):
    """Past the window, llama.cpp's distance is never larger than Self-Extend's and falls short of it by up to
    W - W // G: the published method shifts the grouped query by W - W // G so the two parts join at d = W;
    llama.cpp's grouped keys join wherever the last compression left the uncompressed tail."""
    kv, exact = llamacpp_distances(n, group, window), self_extend_distances(n, group, window)
    p, j = np.arange(n)[:, None], np.arange(n)[None, :]
    far = (j <= p) & (p - j >= window)
    gap = exact[far] - kv[far]
    assert gap.min() == 0 and gap.max() == window - window // group
    assert (kv[j <= p] <= exact[j <= p]).all()


@pytest.mark.parametrize("n,group,window", CASES)
def test_neighbour_window_shrinks_after_each_compression(n, group, window):
    """Self-Extend keeps true distances for the W keys nearest every query; in llama.cpp a key's position is
    shared by every later query, so right after a compression the query's near keys are grouped too: the run of
    true distances behind a query falls to 2 keys (the query's own and its predecessor) and grows back to about W
    before the next compression."""
    kv = llamacpp_distances(n, group, window)
    p, j = np.arange(n)[:, None], np.arange(n)[None, :]
    near = (j <= p) & (p - j < window)
    assert (near & (kv != p - j)).any()
    true_run = [int((kv[t, : t + 1] == t - np.arange(t + 1)).sum()) for t in range(window, n)]
    assert min(true_run) == 2 and max(true_run) >= window


# ---- posenc's KV-shift form against the transcription ------------------------------

def kv_shift_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, group: int, window: int,
                       theta: float = 10000.0) -> np.ndarray:
    """llama.cpp's Self-Extend in float64, one decode step a query: step t's query (position n_past) scores key j
    (its cache position) with HF Llama's RoPE (``x * cos + rotate_half(x) * sin``, half-split layout); RoPE is
    relative, so that is q rotated by the distance ``llamacpp_distances`` gives and k unrotated. q [n, heads, d],
    k and v [n, kv_heads, d]; returns [n, heads, d_v]."""
    n, heads, d = q.shape
    rep = heads // k.shape[1]
    distance = llamacpp_distances(n, group, window)
    inv_freq = 1.0 / theta ** (np.arange(0, d, 2, dtype=np.float64) / d)
    out = np.empty((n, heads, v.shape[-1]))
    for t in range(n):
        angle = distance[t, : t + 1, None].astype(np.float64) * inv_freq  # [t + 1, d / 2]
        cos, sin = (np.concatenate([f(angle)] * 2, axis=-1) for f in (np.cos, np.sin))
        for h in range(heads):
            x = np.broadcast_to(q[t, h], (t + 1, d))
            rotated = x * cos + np.concatenate([-x[:, d // 2:], x[:, : d // 2]], axis=-1) * sin
            logits = (rotated * k[: t + 1, h // rep]).sum(-1) / np.sqrt(d)
            p = np.exp(logits - logits.max())
            out[t, h] = (p / p.sum()) @ v[: t + 1, h // rep]
    return out


@pytest.mark.parametrize("n,group,window", [(70, 4, 16), (53, 2, 8), (40, 3, 9), (30, 1, 8), (45, 4, 64)])
def test_kv_shift_form_is_llamacpps_attention(n, group, window):
    """posenc.SelfExtendEncoding(form="kv-shift") (the float32 kernel, and the float64 reference) against
    llama.cpp's position loop run step by step: 1e-5 and 1e-12. A test that fails if the form were the published
    one: the published form differs from the transcription past the first block."""
    rng = np.random.default_rng(n * 7 + group)
    q, k, v = (rng.standard_normal(shape).astype(np.float32) for shape in ((n, 4, 16), (n, 2, 16), (n, 2, 16)))
    expected = kv_shift_attention(q.astype(np.float64), k.astype(np.float64), v.astype(np.float64), group, window)
    spec = posenc.RopeSpec(head_dim=16)
    kv_shift = posenc.SelfExtendEncoding(spec, group, window, form="kv-shift")
    assert kv_shift.form == "kv-shift" and "form='kv-shift'" in repr(kv_shift)
    got = posenc.attention(q[None], k[None], v[None], encoding=kv_shift, layout="bshd")[0]
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0)
    # float64 inside, rounded once to float32
    reference = posenc.reference.attention(q[None], k[None], v[None], encoding=kv_shift, layout="bshd")[0]
    np.testing.assert_allclose(reference, expected, atol=1e-6, rtol=0)
    if group > 1 and n > window:
        published = posenc.attention(q[None], k[None], v[None], encoding=posenc.SelfExtendEncoding(spec, group, window),
                                     layout="bshd")[0]
        assert np.abs(published - expected).max() > 1e-3


def test_kv_shift_form_needs_a_window_that_the_group_divides():
    spec = posenc.RopeSpec(head_dim=16)
    x = np.zeros((1, 4, 2, 16), np.float32)
    with pytest.raises(ValueError, match=r"self_extend.window = 9: must be a multiple of group = 2 .*grp_attn_w"):
        posenc.attention(x, x, x, encoding=posenc.SelfExtendEncoding(spec, 2, 9, form="kv-shift"), layout="bshd")
    with pytest.raises(ValueError, match=r"form = 'llama': must be \"published\" or \"kv-shift\""):
        posenc.SelfExtendEncoding(spec, 2, 8, form="llama")
    assert posenc.SelfExtendEncoding(spec, 2, 8).form == "published"
    assert "form" not in repr(posenc.SelfExtendEncoding(spec, 2, 8))


@pytest.mark.parametrize("target", [64, 65, 96, 97, 100, 200, 400])
def test_kv_shift_method_defaults_keep_every_distance_trained(target):
    """The method's default group (the smallest divisor of the window keeping every distance of llama.cpp's
    position loop below the training length) checked on the transcription itself, for a model trained on 64
    tokens: the chosen group's longest distance fits, each smaller divisor's does not."""
    kw = posenc.extension_attention("self-extend-kv", posenc.RopeSpec(head_dim=8), train_length=64,
                                    target_length=target)
    enc = kw["encoding"]
    assert isinstance(enc, posenc.SelfExtendEncoding) and enc.form == "kv-shift"
    assert enc.window == 32 and 32 % enc.group == 0
    assert (enc.group > 1) == (target > 64)  # grouping starts past the training length, not before
    assert llamacpp_distances(target, enc.group, enc.window).max() <= 63
    for smaller in (g for g in range(1, enc.group) if 32 % g == 0):
        assert llamacpp_distances(target, smaller, enc.window).max() > 63
