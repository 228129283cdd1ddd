"""Where llama.cpp's KV-shift Self-Extend (llamacpp_self_extend.py, its
position loop transcribed) and Self-Extend as published (Jin et al. 2024,
posenc's SelfExtendEncoding) give a query and a key different distances
(issue 51, item 5a; llama.cpp#4886). Decode one token a step, G = grp_attn_n,
W = grp_attn_w as the neighbour window. (llama.cpp's passkey example feeds
the prompt in batches and runs the loop between them; the positions then
depend on the batch size: one token a step is its generation.)
"""

from __future__ import annotations

import numpy as np
import pytest

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
