"""Rotary position embeddings (RoPE) on NumPy arrays.

Tensors are ``[batch, seq, heads, head_dim]`` arrays of float32, float16 or
bfloat16 (``ml_dtypes.bfloat16``). Any strides are accepted as long as the last
axis is contiguous, so slices of a fused QKV projection need no copy. Angles
are formed in float64 and reduced there to a quarter turn; the sine and cosine
of the remainder come from float32 polynomials, so results stay accurate at
positions of 10^6; f16/bf16 values are computed in float32 and rounded once.

Example::

    >>> import numpy as np, posenc
    >>> spec = posenc.RopeSpec(theta=10000.0, head_dim=64)
    >>> q = np.random.default_rng(0).standard_normal((2, 5, 8, 64), dtype=np.float32)
    >>> k = q[:, :, :2]                      # GQA: 2 key heads, a strided view
    >>> q_rot, k_rot = posenc.apply_rope(spec, q, k, offset=3)
    >>> q_rot.shape, k_rot.shape
    ((2, 5, 8, 64), (2, 5, 2, 64))
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from . import _args, _posenc
from . import _layout, _tensors

# RopeSpec and apply_rope are bound in C++ (python/src/bind_rope_spec.cc,
# bind_rope.cc) with their signatures and docstrings, their arguments
# converted and checked there and by the library; this module is their home.
from ._posenc import RopeSpec, apply_mrope, apply_rope

__all__ = ["RopeSpec", "apply_mrope", "apply_rope", "permute_qk_weights"]


def permute_qk_weights(w, heads: int, head_dim: int, rotary_dim: Optional[int] = None,
                       to: str = "half-split") -> np.ndarray:
    """Permutes the output rows of a Q or K projection between pair layouts.

    Meta's Llama checkpoints rotate interleaved pairs; Hugging Face permutes
    ``W_q`` and ``W_k`` so that half-split RoPE gives the same attention. With
    ``to="half-split"`` the rows of each head go from interleaved to half-split
    order (what Hugging Face's conversion script does); ``to="interleaved"``
    undoes it. Rows past ``rotary_dim`` in each head stay in place.

    Args:
        w: ``[heads * head_dim, ...]`` weight (or ``[heads * head_dim]`` bias),
            any dtype. Not modified.
        heads, head_dim: the layout of the rows.
        rotary_dim: rotated dimensions per head (default ``head_dim``).
        to: ``"half-split"`` or ``"interleaved"``.

    Returns:
        A new C-contiguous array.

    Example::

        >>> w = np.arange(8, dtype=np.float32)[:, None]      # 1 head of 8 rows
        >>> posenc.permute_qk_weights(w, heads=1, head_dim=8)[:, 0]
        array([0., 2., 4., 6., 1., 3., 5., 7.], dtype=float32)
    """
    out = np.array(w, order="C", copy=True)
    heads = _args.integer("permute", "heads", heads)
    head_dim = _args.integer("permute", "head_dim", head_dim)
    rotary = 0 if rotary_dim is None else _args.integer("permute", "rotary_dim", rotary_dim)
    if rotary_dim is not None and rotary <= 0:
        raise ValueError(f"[permute] rotary_dim = {rotary}: must be > 0 (None means head_dim)")
    _posenc.permute_qk_rows(out, heads, head_dim, rotary, str(to))
    return out

# The layout keyword (_layout.py); tensors (PyTorch, any DLPack array) in,
# the caller's kind out (_tensors.py).
apply_rope = _layout.with_layout(apply_rope, "apply_rope", 1, _layout.rope_fits)
_tensors.wrap_functions(globals(), ["apply_rope", "permute_qk_weights"])
