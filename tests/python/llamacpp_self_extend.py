"""llama.cpp's Self-Extend (examples/main and examples/passkey, `--grp-attn-n
G --grp-attn-w W`), transcribed: the positions it gives the keys in its KV
cache and the query of each decode step, as a float-free position
simulation (llama.cpp#4886: "not exactly the same as it applies changes
(shifts) to the KV cache instead of recomputing the RoPE").

Before each decode step llama.cpp runs

    while n_past >= ga_i + W:
        ib = (G * ga_i) // W; bd = (W // G) * (G - 1); dd = (W // G) - ib * bd - W
        seq_add(ga_i, n_past, ib * bd)                      # llama_kv_self_seq_add: pos += delta
        seq_div(ga_i + ib * bd, ga_i + ib * bd + W, G)      # llama_kv_self_seq_div: pos //= G
        seq_add(ga_i + ib * bd + W, n_past + ib * bd, dd)
        n_past -= bd; ga_i += W // G

over the cells whose position lies in [p0, p1), and the step's token (and
query) takes position n_past. A key's RoPE is not recomputed: the cache
rotates the stored key by the change of its position (the K-shift), which
in exact arithmetic equals rotating at the new position.
"""

from __future__ import annotations

import numpy as np


def llamacpp_distances(n: int, group: int, window: int) -> np.ndarray:
    """[n, n] query position - key position of decode step t (row) for key j <= t; -1 above the diagonal."""
    assert window % group == 0, "llama.cpp requires grp_attn_w % grp_attn_n == 0"
    pos = np.empty(n, dtype=np.int64)
    out = np.full((n, n), -1, dtype=np.int64)
    n_past, ga_i = 0, 0

    def add(p0, p1, delta, t):
        cells = pos[:t]
        sel = (cells >= p0) & (cells < p1)
        cells[sel] += delta

    def div(p0, p1, d, t):
        cells = pos[:t]
        sel = (cells >= p0) & (cells < p1)
        cells[sel] //= d

    for t in range(n):
        while n_past >= ga_i + window:
            ib = (group * ga_i) // window
            bd = (window // group) * (group - 1)
            dd = (window // group) - ib * bd - window
            add(ga_i, n_past, ib * bd, t)
            div(ga_i + ib * bd, ga_i + ib * bd + window, group, t)
            add(ga_i + ib * bd + window, n_past + ib * bd, dd, t)
            n_past -= bd
            ga_i += window // group
        pos[t] = n_past
        out[t, : t + 1] = n_past - pos[: t + 1]
        n_past += 1
    return out


def self_extend_distances(n: int, group: int, window: int) -> np.ndarray:
    """[n, n] Self-Extend's distances (Jin et al. 2024; posenc's SelfExtendEncoding): p - j below the window, else
    p // G - j // G + W - W // G; -1 above the diagonal."""
    p = np.arange(n)[:, None]
    j = np.arange(n)[None, :]
    d = np.where(p - j < window, p - j, p // group - j // group + window - window // group)
    return np.where(j <= p, d, -1)
