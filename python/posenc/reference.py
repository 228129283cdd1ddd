"""The reference implementations: plain scalar C++ code, one element pair at
a time in float64, kept readable on purpose. The fast functions in
:mod:`posenc` are tested against these; they take the same arguments.

Example::

    >>> import numpy as np, posenc
    >>> spec = posenc.RopeSpec(head_dim=32)
    >>> x = np.random.default_rng(0).standard_normal((1, 7, 4, 32), dtype=np.float32)
    >>> fast = posenc.apply_rope(spec, x, offset=100, layout="bshd")
    >>> slow = posenc.reference.apply_rope(spec, x, offset=100, layout="bshd")
    >>> float(np.abs(fast - slow).max()) < 1e-6
    True
"""

from ._posenc import reference as _reference
from . import _layout, _tensors

__all__ = ["apply_rope", "attention"]

#: :func:`posenc.apply_rope` on the scalar float64 reference kernel (bound in C++, same signature).
apply_rope = _reference.apply_rope
#: :func:`posenc.attention` on the float64 reference (bound in C++, same signature).
attention = _reference.attention

# The layout keyword (_layout.py); tensors (PyTorch, any DLPack array) in,
# the caller's kind out (_tensors.py).
apply_rope = _layout.with_layout(apply_rope, "apply_rope", 1, _layout.rope_fits)
attention = _layout.with_layout(attention, "attention", 0, _layout.attention_fits, count=3)
_tensors.wrap_functions(globals(), __all__)
