"""The axis order of q, k, v and their outputs: ``layout="bshd"``
``[batch, seq, heads, dim]`` (the kernels' and llama.cpp's) or
``layout="bhsd"`` ``[batch, heads, seq, dim]`` (Hugging Face's, and
``torch.nn.functional.scaled_dot_product_attention``'s). An array in the
other order than the function's own is read through a swapped view of its
axes, no copy (the kernels take strides), and the results come back in the
caller's layout, again as views.

No layout is assumed: without ``layout=`` the shapes must fit exactly one
of the two (GQA head counts that divide only one way, q and k of different
lengths, positions whose length names the sequence axis), else the call is a
ValueError asking for it. A tensor passed in the wrong order is never read
silently as the other.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Optional, Sequence, Tuple

import numpy as np

LAYOUTS = ("bshd", "bhsd")
_NOTE = """
    layout: ``"bshd"`` (``[batch, seq, heads, dim]``) or ``"bhsd"``
        (Hugging Face's ``[batch, heads, seq, dim]``) for every 4-D array
        argument and the results; arrays in the other order than the
        kernel's are read as strided views, no copy. Required when the
        shapes fit both.
"""


def check(op: str, layout: Any) -> None:
    if not isinstance(layout, str) or layout not in LAYOUTS:
        raise ValueError(f"[{op}] layout = {layout!r}: must be \"bshd\" ([batch, seq, heads, dim]) or \"bhsd\" "
                         f"([batch, heads, seq, dim], Hugging Face's)")


def _shape(x: Any) -> Tuple[int, ...]:
    shape = getattr(x, "shape", None)
    return tuple(int(n) for n in (shape if shape is not None else np.shape(x)))


def _axes(layout: str) -> Tuple[int, int]:
    """(seq axis, heads axis)."""
    return (1, 2) if layout == "bshd" else (2, 1)


def attention_fits(layout: str, arrays: Sequence[Any], kwargs: dict) -> bool:
    """Whether q, k (, v) can be `layout`: q's heads a multiple of k's and, when
    nothing places the queries, no more queries than keys (the default puts
    them at the end of the keys)."""
    q, k = _shape(arrays[0]), _shape(arrays[1])
    if len(q) != 4 or len(k) != 4:
        return True  # the function's own checks report it
    seq, heads = _axes(layout)
    if k[heads] == 0 or q[heads] % k[heads] != 0:
        return False
    placed = any(kwargs.get(name) is not None for name in ("q_offset", "q_positions", "kv_lengths", "query_offset"))
    return placed or q[seq] <= k[seq]


def rope_fits(layout: str, arrays: Sequence[Any], kwargs: dict) -> bool:
    """Whether the tensors can be `layout`: one sequence length on the seq
    axis, and it is the length of ``position_ids`` when given."""
    shapes = [_shape(a) for a in arrays]
    if any(len(s) != 4 for s in shapes):
        return True
    seq, _ = _axes(layout)
    if len({s[seq] for s in shapes}) != 1:
        return False
    ids = kwargs.get("position_ids")
    return ids is None or _shape(ids)[-1:] == (shapes[0][seq],)


def resolve(op: str, layout: Optional[str], fits: Callable, arrays: Sequence[Any], kwargs: dict) -> str:
    """`layout` checked, or the one layout the shapes fit."""
    if layout is not None:
        check(op, layout)
        return layout
    fitting = [name for name in LAYOUTS if fits(name, arrays, kwargs)]
    if len(fitting) == 1:
        return fitting[0]
    if not fitting:
        return "bshd"  # neither: the function's own checks name what is wrong
    shapes = ", ".join(str(_shape(a)) for a in arrays)
    raise ValueError(f"[{op}] layout = None: the shapes {shapes} fit both \"bshd\" ([batch, seq, heads, dim]) and "
                     f"\"bhsd\" ([batch, heads, seq, dim], Hugging Face's); pass layout=\"bshd\" or layout=\"bhsd\"")


def swap(op: str, name: str, value: Any) -> Any:
    if value is None or isinstance(value, (int, float, str)):
        return value
    a = np.asarray(value)
    if a.ndim != 4:
        raise ValueError(f"[{op}] {name}: shape {a.shape} must have 4 axes [batch, seq, heads, dim] or "
                         f"[batch, heads, seq, dim]")
    return np.swapaxes(a, 1, 2)


def _swap_back(value: Any) -> Any:
    if isinstance(value, np.ndarray) and value.ndim == 4:
        return np.swapaxes(value, 1, 2)
    if hasattr(value, "_replace") and hasattr(value, "output"):  # RelativeAttentionResult: only the output is q-shaped
        return value._replace(output=_swap_back(value.output))
    if isinstance(value, tuple):
        return tuple(_swap_back(v) for v in value)
    return value


def with_layout(fn: Callable, op: str, first: int, fits: Callable, count: Optional[int] = None,
                native: str = "bshd") -> Callable:
    """`fn` with a ``layout`` keyword: its positional arguments from index
    `first` on (`count` of them, or all) are 4-D arrays in that layout
    (`fits` says which layouts their shapes allow), and so are the 4-D
    results; `native` is the layout `fn` itself takes."""

    @functools.wraps(fn)
    def call(*args, layout: Optional[str] = None, **kwargs):
        end = len(args) if count is None else first + count
        arrays = args[first:end]
        layout = resolve(op, layout, fits, arrays, kwargs)
        if layout == native:
            return fn(*args, **kwargs)
        names = [f"tensors[{i}]" for i in range(len(arrays))] if fits is rope_fits else ["q", "k", "v"]
        args = list(args[:first]) + [swap(op, names[i], a) for i, a in enumerate(arrays)] + list(args[end:])
        return _swap_back(fn(*args, **kwargs))

    call.__doc__ = (fn.__doc__ or "") + _NOTE
    return call
