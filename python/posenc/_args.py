"""The package's one argument checker: ints, numbers, bools and integer
array-likes, converted and checked before they reach the library.

The library takes integers as C++ ``int64_t`` (``int32_t`` for token ids,
``uint64_t`` for seeds). A Python int outside that range would make pybind11
reject the whole call with a TypeError listing signatures, and NumPy would
silently turn a list holding one into a float or object array, or wrap a
uint64 value. Every public function converts its arguments here instead, so
a bad one is a ValueError in the library's format naming the parameter, the
value and the rule::

    [attention] q_offset = 9223372036854775808: must fit in a signed 64-bit integer

The C++ bindings use these same functions (python/src/args.cc calls them),
so each rule and its message is written once, here.
"""

from __future__ import annotations

import operator
from typing import Any, Optional

import numpy as np

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
UINT64_MAX = 2**64 - 1

INT64_RULE = "must fit in a signed 64-bit integer"
UINT64_RULE = "must be in [0, 2^64 - 1] (an unsigned 64-bit integer)"


def error(op: str, name: str, value: Any, rule: str) -> ValueError:
    """A ValueError in the C++ library's format: "[op] name = value: rule"."""
    return ValueError(f"[{op}] {name} = {value}: {rule}")


def integer(op: str, name: str, value: Any, *, allow_bool: bool = True, low: int = INT64_MIN,
            high: int = INT64_MAX, rule: str = INT64_RULE) -> int:
    """``value`` (a Python int or NumPy integer, anything with ``__index__``)
    as an int in ``[low, high]``; else ValueError naming ``name``."""
    if not allow_bool and isinstance(value, (bool, np.bool_)):
        raise error(op, name, repr(value), "must be an integer")
    try:
        n = operator.index(value)
    except TypeError:
        raise error(op, name, repr(value), "must be an integer") from None
    if not low <= n <= high:
        raise error(op, name, n, rule)
    return n


def number(op: str, name: str, value: Any) -> float:
    """``value`` (an int or float, NumPy's too, never a bool) as a float;
    else ValueError naming ``name``. An int beyond float's range is
    float()'s OverflowError."""
    numeric = isinstance(value, (int, float, np.integer, np.floating))
    if isinstance(value, (bool, np.bool_)) or not numeric:
        raise error(op, name, repr(value), "must be a number")
    return float(value)


def boolean(op: str, name: str, value: Any) -> bool:
    """``value`` (True or False, ``numpy.bool_`` too) as a bool; else
    ValueError naming ``name``."""
    if not isinstance(value, (bool, np.bool_)):
        raise error(op, name, repr(value), "must be True or False")
    return bool(value)


def optional_integer(op: str, name: str, value: Any, **options: Any) -> Optional[int]:
    """:func:`integer`, with None passed through."""
    return None if value is None else integer(op, name, value, **options)


def _at(name: str, index: tuple) -> str:
    return name + ("[" + ", ".join(str(int(i)) for i in index) + "]" if index else "")


def int64_array(op: str, name: str, value: Any, *, dtype_rule: str = "must be an integer type",
                low: int = INT64_MIN, high: int = INT64_MAX, rule: str = INT64_RULE,
                low_rule: Optional[str] = None) -> np.ndarray:
    """Any integer array-like (list, tuple, NumPy array, nested) as an int64
    NumPy array of the same shape (not necessarily contiguous). A value
    outside ``[low, high]`` (within int64's range) is a ValueError naming
    its index, e.g. ``[rope] position_ids[0, 2] = 9223372036854775808: ...``,
    with ``rule`` (``low_rule`` for one below ``low``, if given); a
    non-integer dtype is ``[op] name.dtype = float64: dtype_rule``."""
    low_rule = rule if low_rule is None else low_rule
    array = np.asarray(value)
    if array.dtype.kind in "fO" and not isinstance(value, np.ndarray):
        # Python ints beyond int64 make NumPy choose float64 or object:
        # find them among the values as given.
        items = np.asarray(value, dtype=object)
        if items.shape == array.shape:
            for index, item in np.ndenumerate(items):
                if isinstance(item, (int, np.integer)) and not isinstance(item, (bool, np.bool_)):
                    if not low <= int(item) <= high:
                        raise error(op, _at(name, index), int(item), rule if item > high else low_rule)
    if array.dtype == np.bool_ or array.dtype.kind not in "iu":
        raise error(op, f"{name}.dtype", array.dtype, dtype_rule)
    if array.size and (low > INT64_MIN or high < INT64_MAX or array.dtype == np.uint64):
        # Compare in the array's own kind: uint64 against a float would round 2^63 - 1 up.
        scalar = np.uint64 if array.dtype.kind == "u" else np.int64
        bad = array > scalar(high)
        if low > 0 or array.dtype.kind == "i":
            bad |= array < scalar(max(low, 0) if array.dtype.kind == "u" else low)
        if bad.any():
            index = np.unravel_index(int(np.argmax(bad)), array.shape) if array.ndim else ()
            item = int(array[index])
            raise error(op, _at(name, index), item, rule if item > high else low_rule)
    return array.astype(np.int64, copy=False)
