"""The axis order of q, k, v and their outputs: ``layout="bshd"``
``[batch, seq, heads, dim]``, posenc's own (the kernels' and llama.cpp's), or
``layout="bhsd"`` ``[batch, heads, seq, dim]``, Hugging Face's (and
``torch.nn.functional.scaled_dot_product_attention``'s). A ``bhsd`` array is
read through a swapped view of its axes, no copy (the kernels take strides),
and the results come back in the caller's layout, again as views.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

LAYOUTS = ("bshd", "bhsd")
_NOTE = """
    layout: ``"bshd"`` (the default: ``[batch, seq, heads, dim]``) or
        ``"bhsd"`` (Hugging Face's ``[batch, heads, seq, dim]``) for every
        4-D array argument and the results; ``bhsd`` arrays are read as
        strided views, no copy.
"""


def _check(op: str, layout: Any) -> None:
    if not isinstance(layout, str) or layout not in LAYOUTS:
        raise ValueError(f"[{op}] layout = {layout!r}: must be \"bshd\" ([batch, seq, heads, dim]) or \"bhsd\" "
                         f"([batch, heads, seq, dim], Hugging Face's)")


def _swap(op: str, name: str, value: Any) -> Any:
    if value is None or isinstance(value, (int, float, str)):
        return value
    a = np.asarray(value)
    if a.ndim != 4:
        raise ValueError(f"[{op}] {name}: shape {a.shape} with layout=\"bhsd\" must have 4 axes "
                         f"[batch, heads, seq, dim]")
    return np.swapaxes(a, 1, 2)


def _swap_back(value: Any) -> Any:
    if isinstance(value, np.ndarray) and value.ndim == 4:
        return np.swapaxes(value, 1, 2)
    if isinstance(value, tuple):
        return tuple(_swap_back(v) for v in value)
    return value


def with_layout(fn: Callable, op: str, array_names) -> Callable:
    """`fn` with a ``layout`` keyword: the positional arguments that
    `array_names(count)` names (None: not an array) are 4-D arrays in that
    layout, and so are the 4-D results."""

    @functools.wraps(fn)
    def call(*args, layout: str = "bshd", **kwargs):
        _check(op, layout)
        if layout == "bshd":
            return fn(*args, **kwargs)
        names = array_names(len(args))
        args = [_swap(op, names[i], a) if names[i] else a for i, a in enumerate(args)]
        return _swap_back(fn(*args, **kwargs))

    call.__doc__ = (fn.__doc__ or "") + _NOTE
    return call


def rope_arrays(count: int) -> list:
    """apply_rope(spec, *tensors): every argument after the spec."""
    return [None] + [f"tensors[{i}]" for i in range(count - 1)]


def attention_arrays(count: int) -> list:
    """attention(q, k, v)."""
    return ["q", "k", "v"][:count] + [None] * max(0, count - 3)
