"""The reference implementations: plain scalar C++ code, one element pair at
a time in float64, kept readable on purpose. The fast functions in
:mod:`posenc` are tested against these; they take the same arguments.

Example::

    >>> import numpy as np, posenc
    >>> spec = posenc.RopeSpec(head_dim=32)
    >>> x = np.random.default_rng(0).standard_normal((1, 7, 4, 32), dtype=np.float32)
    >>> fast = posenc.apply_rope(spec, x, offset=100)
    >>> slow = posenc.reference.apply_rope(spec, x, offset=100)
    >>> float(np.abs(fast - slow).max()) < 1e-6
    True
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

import numpy as np

from .attention import _reference_attention as attention
from .rope import RopeSpec, _apply

__all__ = ["apply_rope", "attention"]


def apply_rope(
    spec: RopeSpec,
    *tensors: np.ndarray,
    offset: int = 0,
    offsets: Optional[Sequence[int]] = None,
    position_ids: Optional[Any] = None,
    direction: str = "forward",
    inplace: bool = False,
    frequencies: Optional[Tuple[np.ndarray, float]] = None,
):
    """:func:`posenc.apply_rope` on the scalar float64 reference kernel
    (single-threaded, slow). Same arguments, same results to within one
    rounding of the output dtype."""
    return _apply(spec, tensors, offset, offsets, position_ids, direction, inplace, frequencies,
                  reference=True)
