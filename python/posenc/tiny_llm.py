"""The Tiny-LLM course's ``RoPE`` class (week 1, "Positional Encodings and
RoPE"), as a drop-in over :func:`posenc.apply_rope`.

``RoPE(dims, seq_len, base=10000, traditional=False)`` and
``rope(x, offset=None)`` as the course defines them: ``x`` is
``[N, S, H, D]`` with ``D == dims``; ``offset`` is None (positions
``0 .. S-1``), one ``slice`` of length S for every row, or a list of N
slices, one per batch row. ``traditional=True`` pairs interleaved dimensions
``[x0, x1], [x2, x3], ...``; otherwise the halves ``(x_k, x_{k + dims/2})``.
Each form is one call of the kernel::

    offset=None                    apply_rope(spec, x, layout="bshd")
    offset=slice(a, a + S)         apply_rope(spec, x, offset=a, layout="bshd")
    offset=[slice(a0, ...), ...]   apply_rope(spec, x, offsets=[a0, ...], layout="bshd")

with ``spec = RopeSpec(theta=base, head_dim=dims, layout="interleaved" if
traditional else "half-split")`` and its frequencies computed once. The
course precomputes cos and sin of seq_len positions in float32 (angles
rounded to float32: off by up to 0.03 rad at position 10^6); posenc forms
each angle in float64 instead, so seq_len costs no memory and far positions
keep float32 accuracy. seq_len still bounds the positions, as the course's
table does.

``x`` is a NumPy array (float32, float16, ``ml_dtypes.bfloat16``), a PyTorch
tensor, or an MLX array, and the result is the same kind and dtype, a new
array. NumPy and PyTorch inputs are read in place and PyTorch results wrap
the kernel's output (no copies); an MLX array is read in place through
DLPack (bfloat16 through a uint16 view) and its result copied once into MLX,
which imports no outside buffer without a copy. Where the course asserts,
this raises ValueError in posenc's form::

    [rope] offset = slice(0, 5): must have length S = 4

The C++ class is ``posenc::RoPE`` (include/posenc/tiny_llm_rope.h), with the
same checks and messages.

Example::

    >>> import numpy as np, posenc
    >>> rope = posenc.RoPE(dims=8, seq_len=32)
    >>> x = np.ones((2, 4, 3, 8), np.float32)                  # [N, S, H, D]
    >>> y = rope(x, offset=[slice(0, 4), slice(10, 14)])       # row 1 at positions 10..13
    >>> bool(np.allclose(y[1], rope(x[1:], offset=slice(10, 14))[0]))
    True
"""

from __future__ import annotations

import operator
from typing import Any, Dict, Sequence, Union

import ml_dtypes
import numpy as np

from . import _args, _tensors, rope

__all__ = ["RoPE"]

_OP = "rope"
Offset = Union[None, slice, Sequence[slice]]


class RoPE:
    """Rotary position embedding with the Tiny-LLM course's API (see the module)."""

    def __init__(self, dims: int, seq_len: int, base: float = 10000, traditional: bool = False):
        self.dims = _args.integer(_OP, "dims", dims)
        if self.dims <= 0 or self.dims % 2:
            raise _args.error(_OP, "dims", self.dims, "must be even and > 0 (dimensions rotate in pairs)")
        self.seq_len = _args.integer(_OP, "seq_len", seq_len, low=1, rule="must be >= 1")
        self.base = _args.number(_OP, "base", base)
        if not (np.isfinite(self.base) and self.base > 1):
            raise _args.error(_OP, "base", self.base, "must be a finite number > 1")
        self.traditional = _args.boolean(_OP, "traditional", traditional)
        self.spec = rope.RopeSpec(theta=self.base, head_dim=self.dims,
                                  layout="interleaved" if self.traditional else "half-split")
        self._frequencies = self.spec.frequencies()  # the course's precomputed table, as inv_freq

    def __repr__(self) -> str:
        return f"RoPE(dims={self.dims}, seq_len={self.seq_len}, base={self.base:g}, traditional={self.traditional})"

    def __call__(self, x: Any, offset: Offset = None) -> Any:
        """``x`` ``[N, S, H, dims]`` rotated by the positions ``offset`` names."""
        view = _mlx_to_numpy(x) if _is_mlx(x) else _tensors.to_numpy(x, _OP, "x") if _tensors.is_tensor(x) \
            else np.asarray(x)
        if view.ndim != 4:
            raise _args.error(_OP, "x.shape", tuple(view.shape), "must be [N, S, H, D] (4 axes)")
        if view.shape[3] != self.dims:
            raise _args.error(_OP, "x.shape[3]", view.shape[3], f"must equal dims = {self.dims}")
        out = rope.apply_rope(self.spec, view, frequencies=self._frequencies, layout="bshd",
                              **self._positions(offset, view.shape[0], view.shape[1]))
        if _is_mlx(x):
            return _numpy_to_mlx(out)
        return _tensors.from_numpy(out, x) if _tensors.is_tensor(x) else out

    def _positions(self, offset: Offset, batch: int, seq: int) -> Dict[str, Any]:
        """apply_rope's positions for the course's offset forms, checked as the course asserts."""
        if offset is None:
            if seq > self.seq_len:
                raise _args.error(_OP, "x.shape[1]", seq,
                                  f"must be at most seq_len = {self.seq_len} (offset None: positions 0 to S - 1)")
            return {}
        if isinstance(offset, slice):
            return {"offset": self._start(offset, "offset", seq)}
        if isinstance(offset, (list, tuple)):
            if len(offset) != batch:
                raise _args.error(_OP, "offset", f"a list of {len(offset)} slices",
                                  f"must have one slice per batch row, N = {batch}")
            return {"offsets": [self._start(s, f"offset[{b}]", seq) for b, s in enumerate(offset)]}
        raise _args.error(_OP, "offset", _text(offset), "must be None, a slice or a list of N slices (one per row)")

    def _start(self, s: Any, name: str, seq: int) -> int:
        """The start of slice `s` once it has length S and lies in [0, seq_len)."""
        if not isinstance(s, slice):
            raise _args.error(_OP, name, _text(s), "must be a slice")
        text = _text(s)
        if s.step not in (None, 1):
            raise _args.error(_OP, name, text, "must have step 1 (consecutive positions)")
        if s.start is None or s.stop is None:
            raise _args.error(_OP, name, text, "must give its start and stop")
        start = _args.integer(_OP, f"{name}.start", s.start)
        stop = _args.integer(_OP, f"{name}.stop", s.stop)
        if stop - start != seq:
            raise _args.error(_OP, name, text, f"must have length S = {seq}")
        if start < 0:
            raise _args.error(_OP, name, text, "must start at position 0 or later")
        if stop > self.seq_len:
            raise _args.error(_OP, name, text, f"must end at or before seq_len = {self.seq_len} "
                                               f"(the positions this RoPE was built for)")
        return start


def _text(value: Any) -> str:
    """A slice as the course writes it, slice(0, 5); anything else as repr."""
    if isinstance(value, slice):
        parts = [value.start, value.stop] + ([value.step] if value.step is not None else [])
        return f"slice({', '.join(map(_part, parts))})"
    text = repr(value)
    return text if len(text) <= 60 else f"a {type(value).__name__}"


def _part(value: Any) -> str:
    """An integer (NumPy's too) as its digits, anything else as repr."""
    try:
        return str(operator.index(value))
    except TypeError:
        return repr(value)


def _is_mlx(x: Any) -> bool:
    return type(x).__module__ == "mlx.core"


def _mlx_to_numpy(x: Any) -> np.ndarray:
    """A NumPy view of MLX array `x` (DLPack, no copy); NumPy's DLPack has no
    bfloat16, so that goes through a uint16 view of the same bytes."""
    import mlx.core as mx
    if x.dtype == mx.bfloat16:
        return np.from_dlpack(mx.view(x, mx.uint16)).view(ml_dtypes.bfloat16)
    return np.from_dlpack(x)


def _numpy_to_mlx(a: np.ndarray) -> Any:
    """`a` as an MLX array: one copy (mx.from_dlpack(copy=False) refuses a CPU
    buffer MLX did not allocate)."""
    import mlx.core as mx
    if a.dtype == ml_dtypes.bfloat16:
        return mx.view(mx.array(a.view(np.uint16)), mx.bfloat16)
    return mx.array(a)
