"""Helpers shared by the posenc pytest files: dtype conversions, tolerances,
and a float64 NumPy RoPE written from the definition (the ground truth)."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import torch

BF16 = np.dtype(ml_dtypes.bfloat16)

# name -> (NumPy dtype, torch dtype)
DTYPES = {
    "f32": (np.dtype(np.float32), torch.float32),
    "f16": (np.dtype(np.float16), torch.float16),
    "bf16": (BF16, torch.bfloat16),
}

# Per-dtype tolerance (atol = rtol) for unit-scale (standard normal) inputs.
#  f32:  posenc rounds its float64 angle's cos/sin to float32 and rotates with
#        float32 FMAs: ~1e-7 relative; 1e-5 leaves room for the oracle's own
#        float32 arithmetic.
#  f16:  one rounding of the output (2^-11 relative) on our side; the HF
#        oracle casts cos/sin to f16 and multiplies/adds in f16 (3-4 more
#        roundings), hence 2e-3.
#  bf16: the same with 8 significant bits (2^-8 = 3.9e-3 per rounding): 2e-2.
TOLERANCE = {"f32": 1e-5, "f16": 2e-3, "bf16": 2e-2}

# One rounding of a value in [1, 2) to the dtype, at most (round to nearest): half an ulp.
UNIT = {"f64": 2.0**-53, "f32": 2.0**-24, "f16": 2.0**-11, "bf16": 2.0**-8}


def half_ulp(dtype: str, magnitude: float) -> float:
    """The largest rounding error of a value with |x| <= magnitude stored in dtype."""
    return UNIT[dtype] * 2.0 ** math.floor(math.log2(magnitude)) if magnitude > 0 else 0.0


def to_torch(x: np.ndarray) -> torch.Tensor:
    """NumPy (incl. ml_dtypes.bfloat16) -> torch, exactly."""
    if x.dtype == BF16:
        return torch.from_numpy(np.ascontiguousarray(x.astype(np.float32))).to(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(x))


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """torch -> NumPy, exactly (bf16 through float32)."""
    if t.dtype == torch.bfloat16:
        return t.float().numpy().astype(BF16)
    return t.numpy()


def f64(x) -> np.ndarray:
    return np.asarray(x).astype(np.float64)


def random_qk(rng: np.random.Generator, shape, dtype: np.dtype) -> np.ndarray:
    """Standard normal values, stored in `dtype`."""
    return rng.standard_normal(shape).astype(np.float32).astype(dtype)


def positions_grid(batch: int, seq: int, offset=0, offsets=None, position_ids=None) -> np.ndarray:
    """The [batch, seq] int64 positions that posenc's three position arguments mean."""
    if position_ids is not None:
        return np.broadcast_to(np.asarray(position_ids, np.int64).reshape(-1, seq), (batch, seq)).copy()
    starts = np.full(batch, offset, np.int64) if offsets is None else np.asarray(offsets, np.int64)
    return starts[:, None] + np.arange(seq, dtype=np.int64)[None, :]


def rope_float64(x: np.ndarray, positions: np.ndarray, inv_freq: np.ndarray, layout: str,
                 attention_factor: float = 1.0) -> np.ndarray:
    """Ground truth in float64 NumPy, written from the RoPE definition.

    x: [batch, seq, heads, head_dim]; positions: [batch, seq]; inv_freq: [r/2].
    Pair k is (k, k + r/2) in half-split and (2k, 2k+1) in interleaved; the
    dimensions past r pass through; the rotated ones are scaled by the
    attention factor.
    """
    x = f64(x)
    pairs = inv_freq.shape[0]
    r = 2 * pairs
    angle = positions.astype(np.float64)[:, :, None, None] * f64(inv_freq)[None, None, None, :]
    cos, sin = np.cos(angle), np.sin(angle)
    out = x.copy()
    if layout == "half-split":
        a, b = x[..., :pairs], x[..., pairs:r]
        out[..., :pairs] = a * cos - b * sin
        out[..., pairs:r] = a * sin + b * cos
    else:
        a, b = x[..., 0:r:2], x[..., 1:r:2]
        out[..., 0:r:2] = a * cos - b * sin
        out[..., 1:r:2] = a * sin + b * cos
    out[..., :r] *= attention_factor
    return out


def max_violation(actual, expected, tol: float) -> float:
    """max(|a - e| / (tol + tol |e|)): <= 1 means within atol = rtol = tol."""
    a, e = f64(actual), f64(expected)
    return float(np.max(np.abs(a - e) / (tol + tol * np.abs(e)), initial=0.0))


def max_abs_error(actual, expected) -> float:
    return float(np.max(np.abs(f64(actual) - f64(expected)), initial=0.0))


def hf_fp32_angle_slack(max_position: int, max_inv_freq: float = 1.0) -> float:
    """Hugging Face forms angles as float32(position) x float32(inv_freq) in
    float32: each angle carries up to ~1 ulp of itself (2^-24 relative), which
    the rotation turns into an absolute error of about |x| times that. This
    is the documented fp32 weakness (transformers#29285), not a posenc error;
    the tests add it to the tolerance when comparing with Hugging Face and
    compare posenc alone against float64 with the plain tolerance."""
    return 2.0 * max_position * max_inv_freq * 2.0**-24


# deepseek-ai/DeepSeek-V2-Lite config.json (the rotary part of MLA is
# qk_rope_head_dim = 64 wide; hidden_size / heads = 128 is *not* the RoPE width).
DEEPSEEK_V2_LITE = {
    "model_type": "deepseek_v2", "hidden_size": 2048, "num_attention_heads": 16,
    "num_key_value_heads": 16, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
    "v_head_dim": 128, "kv_lora_rank": 512, "q_lora_rank": None,
    "max_position_embeddings": 163840, "rope_theta": 10000,
    "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 0.707,
                     "mscale_all_dim": 0.707, "original_max_position_embeddings": 4096,
                     "type": "yarn"},
}
