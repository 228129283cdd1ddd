"""Helpers for the attention tests: a float64 NumPy attention written from
the definition, dtype rounding, and the table of observed errors that
test_attention_*.py print at the end (run pytest with -s)."""

from __future__ import annotations

from typing import Dict, Optional, Tuple

import numpy as np

from rope_oracles import DTYPES, TOLERANCE, f64, max_abs_error, max_violation  # noqa: F401

Observed = Dict[Tuple[str, str], float]


def record(observed: Observed, oracle: str, dtype: str, actual, expected, tol: Optional[float] = None) -> float:
    """Asserts max_violation <= 1 with the dtype's tolerance (atol = rtol =
    tol) and keeps the max abs error in `observed[(oracle, dtype)]` (each
    test file has one such dict and prints it last)."""
    error = max_abs_error(actual, expected)
    observed[(oracle, dtype)] = max(observed.get((oracle, dtype), 0.0), error)
    tol = TOLERANCE[dtype] if tol is None else tol
    violation = max_violation(actual, expected, tol)
    assert violation <= 1.0, f"{oracle} [{dtype}]: max abs error {error:.3g}, {violation:.3g} x tolerance {tol}"
    return error


def print_observed(title: str, observed: Observed) -> None:
    print(f"\n{title}: max |posenc - oracle|")
    for (oracle, dtype), error in sorted(observed.items()):
        print(f"  {oracle:<52} {dtype:<5} {error:.3g}")


def rounded(x: np.ndarray, dtype: str) -> np.ndarray:
    """x stored in the test dtype (float32, float16 or bfloat16)."""
    return np.asarray(x, np.float32).astype(DTYPES[dtype][0])


def repeat_kv(x: np.ndarray, q_heads: int) -> np.ndarray:
    """[b, s, kv_heads, d] -> [b, s, q_heads, d]: query head h reads kv head h // group."""
    return np.repeat(x, q_heads // x.shape[2], axis=2)


def softmax_attention(scores: np.ndarray, visible: np.ndarray, v: np.ndarray) -> np.ndarray:
    """scores [b, h, q, k] (float64), visible broadcastable to it (bool),
    v [b, k, h, dv] -> out [b, q, h, dv]. Rows that see nothing give zeros."""
    s = np.where(visible, scores, -np.inf)
    peak = np.max(s, axis=-1, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0.0)
    w = np.where(visible, np.exp(s - peak), 0.0)
    total = w.sum(axis=-1, keepdims=True)
    w = np.divide(w, total, out=np.zeros_like(w), where=total > 0)
    return np.einsum("bhqk,bkhd->bqhd", w, f64(v))


def dot_scores(q: np.ndarray, k: np.ndarray) -> np.ndarray:
    """[b, q, h, d] . [b, k, h, d] -> [b, h, q, k] in float64 (k already repeated to q's heads)."""
    return np.einsum("bqhd,bkhd->bhqk", f64(q), f64(k))


def rotate(x: np.ndarray, positions: np.ndarray, inv_freq: np.ndarray, layout: str = "half-split") -> np.ndarray:
    """RoPE in float64: x [b, s, h, d] rotated by angle positions[b, s] * inv_freq[k]
    per pair (positions may be fractional: Leaky ReRoPE's far part)."""
    x = f64(x)
    pairs = inv_freq.shape[0]
    angle = f64(positions)[:, :, None, None] * f64(inv_freq)[None, None, None, :]
    cos, sin = np.cos(angle), np.sin(angle)
    out = x.copy()
    if layout == "half-split":
        a, b = x[..., :pairs], x[..., pairs:2 * pairs]
        out[..., :pairs] = a * cos - b * sin
        out[..., pairs:2 * pairs] = a * sin + b * cos
    else:
        a, b = x[..., 0:2 * pairs:2], x[..., 1:2 * pairs:2]
        out[..., 0:2 * pairs:2] = a * cos - b * sin
        out[..., 1:2 * pairs:2] = a * sin + b * cos
    return out


def positions_of(batch: int, seq: int, offset: int = 0) -> np.ndarray:
    return np.broadcast_to(offset + np.arange(seq, dtype=np.int64), (batch, seq)).copy()


def causal(qp: np.ndarray, kp: np.ndarray) -> np.ndarray:
    """[b, 1, q, k]: key position <= query position."""
    return (kp[:, None, None, :] <= qp[:, None, :, None])

