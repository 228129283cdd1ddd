"""Tensors in, tensors out: every posenc function that takes arrays also takes
any CPU tensor that speaks DLPack (PyTorch, JAX, ...) and gives its results
back as the caller's kind.

* An input is viewed as a NumPy array without a copy: ``Tensor.numpy()`` for
  PyTorch (``bfloat16`` through an ``int16`` view of the same bytes, read as
  ``ml_dtypes.bfloat16``), ``numpy.from_dlpack`` for any other
  ``__dlpack__`` object. So ``inplace=True`` writes the caller's tensor, and
  a strided input (a slice of a fused QKV projection, a transpose) keeps its
  strides; the kernels take any strides with a contiguous last axis and copy
  the others once, as they do NumPy arrays.
* Results come back as the kind of the first tensor argument, again without
  a copy: ``torch.from_numpy`` (``bfloat16`` through ``int16``) for PyTorch,
  the input's array namespace (``__array_namespace__().from_dlpack``) for
  other array-API libraries, NumPy otherwise. A result that is an input
  (``inplace=True``) comes back as the caller's own tensor object.
* A tensor on another device (CUDA, MPS, ...) is a ValueError that names the
  argument and the device: these functions compute on the CPU.
  :mod:`posenc.torch` runs PyTorch tensors on any device (its torch
  backend) and :mod:`posenc.hf` a model on any device.
* A PyTorch tensor that requires grad is read through ``detach()``, with a
  warning: these functions record no gradients; ``posenc.torch`` has the
  ones that do (``apply_rope``, ``attention``).
"""

from __future__ import annotations

import functools
import inspect
import warnings
from typing import Any, Callable, Dict, Optional

import ml_dtypes
import numpy as np

_DLPACK_CPU = 1  # DLDeviceType kDLCPU
_DLPACK_DEVICES = {2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal", 9: "vpi", 10: "rocm",
                   13: "cuda_managed", 14: "oneapi"}


def _is_torch(x: Any) -> bool:
    return type(x).__module__.split(".")[0] == "torch" and hasattr(x, "numpy")


def is_tensor(x: Any) -> bool:
    """A DLPack-capable array that is not a NumPy array."""
    return hasattr(x, "__dlpack__") and not isinstance(x, np.ndarray)


def _device_name(x: Any) -> str:
    if _is_torch(x):
        return str(x.device)
    kind, index = x.__dlpack_device__()
    return f"{_DLPACK_DEVICES.get(int(kind), f'DLPack device type {int(kind)}')}:{index}"


def to_numpy(x: Any, op: str, name: str) -> np.ndarray:
    """A NumPy view of tensor `x` (the argument `name` of `op`), no copy."""
    on_cpu = x.device.type == "cpu" if _is_torch(x) else int(x.__dlpack_device__()[0]) == _DLPACK_CPU
    if not on_cpu:
        raise ValueError(f"[{op}] {name} = a tensor on {_device_name(x)}: must be on the CPU (posenc's array "
                         f"functions compute there; move it with .cpu() or its library's equivalent, or run "
                         f"PyTorch tensors on their device through posenc.torch.attention / apply_rope)")
    if not _is_torch(x):
        return np.from_dlpack(x)
    import torch
    if x.requires_grad:
        warnings.warn(f"[{op}] {name} requires grad: posenc.{op} records no gradients (posenc.torch.{op} does, "
                      f"where it exists); its result is computed "
                      f"from {name}.detach()", stacklevel=4)
        x = x.detach()
    if x.dtype == torch.bfloat16:
        return x.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return x.numpy()


def from_numpy(a: np.ndarray, like: Any) -> Any:
    """`a` as the kind of tensor `like` (no copy where the library allows)."""
    if _is_torch(like):
        import torch
        if a.dtype == ml_dtypes.bfloat16:
            return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(a)
    namespace = getattr(like, "__array_namespace__", None)
    return namespace().from_dlpack(a) if namespace is not None else a


class _Conversion:
    """The tensors of one call: their NumPy views, and the kind to give back."""

    def __init__(self, op: str):
        self.op = op
        self.like: Optional[Any] = None
        self.originals: Dict[int, Any] = {}  # id(view) -> the caller's tensor

    def arg(self, value: Any, name: str) -> Any:
        if is_tensor(value):
            view = to_numpy(value, self.op, name)
            self.originals[id(view)] = (view, value)
            if self.like is None:
                self.like = value
            return view
        if isinstance(value, (list, tuple)) and any(is_tensor(v) for v in value):
            return type(value)(self.arg(v, f"{name}[{i}]") for i, v in enumerate(value))
        if isinstance(value, dict) and any(is_tensor(v) for v in value.values()):
            return {k: self.arg(v, f"{name}[{k!r}]") for k, v in value.items()}
        return value

    def result(self, value: Any) -> Any:
        if self.like is None:
            return value
        if isinstance(value, np.ndarray):
            kept = self.originals.get(id(value))
            if kept is not None and kept[0] is value:
                return kept[1]  # written in place: the caller's own tensor
            return from_numpy(value, self.like)
        if isinstance(value, tuple):
            return type(value)(*map(self.result, value)) if hasattr(value, "_fields") else tuple(
                map(self.result, value))
        if isinstance(value, list):
            return [self.result(v) for v in value]
        if isinstance(value, dict):
            return {k: self.result(v) for k, v in value.items()}
        return value


def _parameter_names(fn: Callable) -> list:
    """The names of `fn`'s positional parameters, for messages; a variadic
    one ends the list ("*args" then names each extra "tensors[i]")."""
    try:
        parameters = inspect.signature(fn).parameters.values()
        return [p.name if p.kind != p.VAR_POSITIONAL else "*" for p in parameters
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
    except (TypeError, ValueError):  # pybind11: the signature is the docstring's first line
        line = (fn.__doc__ or "").split("\n", 1)[0]
        inside = line[line.find("(") + 1:]
        names, depth, current = [], 0, ""
        for ch in inside:
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                if depth == 0:
                    break
                depth -= 1
            if ch == "," and depth == 0:
                names.append(current)
                current = ""
            else:
                current += ch
        names.append(current)
        out = []
        for n in (n.strip().split(":")[0].split("=")[0].strip() for n in names):
            if n == "*":
                break  # keyword-only from here
            out.append("*" if n.startswith("*") else n)
            if n.startswith("*"):
                break
        return out


def _name(names: list, i: int) -> str:
    if "*" in names and i >= names.index("*"):
        return f"tensors[{i - names.index('*')}]"
    return names[i] if i < len(names) else f"argument {i + 1}"


def accepts_tensors(fn: Callable, op: Optional[str] = None) -> Callable:
    """`fn` taking tensors wherever it takes arrays, returning the caller's kind."""
    op = op or fn.__name__
    names = _parameter_names(fn)

    @functools.wraps(fn)
    def call(*args, **kwargs):
        if not any(is_tensor(a) or isinstance(a, (list, tuple, dict)) for a in args) and not any(
                is_tensor(v) or isinstance(v, (list, tuple, dict)) for v in kwargs.values()):
            return fn(*args, **kwargs)  # NumPy and scalars only: nothing to convert
        conversion = _Conversion(op)
        args = [conversion.arg(a, _name(names, i)) for i, a in enumerate(args)]
        kwargs = {k: conversion.arg(v, k) for k, v in kwargs.items()}
        return conversion.result(fn(*args, **kwargs))

    call._accepts_tensors = True
    return call


def wrap_functions(namespace: Dict[str, Any], names) -> None:
    """Replaces the functions `names` of a module's namespace by their
    tensor-accepting form (classes and already wrapped functions stay)."""
    for name in names:
        value = namespace[name]
        if inspect.isclass(value) or not callable(value) or getattr(value, "_accepts_tensors", False):
            continue
        namespace[name] = accepts_tensors(value, name)


def wrap_methods(cls: type, names) -> type:
    """The methods `names` of `cls` taking tensors (op: the method's name)."""
    for name in names:
        setattr(cls, name, accepts_tensors(getattr(cls, name), name))
    return cls
