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

import inspect
from typing import Any

import numpy as np

from ._posenc import reference as _reference
from .rope import RopeSpec, _apply
from .rope import apply_rope as fast_apply_rope

__all__ = ["apply_rope", "attention"]


def apply_rope(spec: RopeSpec, *tensors: np.ndarray, **options: Any):
    """:func:`posenc.apply_rope` on the scalar float64 reference kernel
    (single-threaded, slow). Same arguments, same results to within one
    rounding of the output dtype."""
    bound = _APPLY_ROPE_SIGNATURE.bind(spec, *tensors, **options)  # the same keywords and defaults
    bound.apply_defaults()
    a = bound.arguments
    return _apply(a["spec"], a["tensors"], a["offset"], a["offsets"], a["position_ids"], a["direction"],
                  a["inplace"], a["frequencies"], reference=True)


_APPLY_ROPE_SIGNATURE = inspect.signature(fast_apply_rope)
apply_rope.__signature__ = _APPLY_ROPE_SIGNATURE  # type: ignore[attr-defined]

#: :func:`posenc.attention` on the float64 reference (bound in C++, same signature).
attention = _reference.attention
