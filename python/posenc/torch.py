"""PyTorch tensors through posenc, with gradients: RoPE, attention and the
tiny trainer's position schemes.

Entry points (each one's own help has the details)::

    apply_rope(spec, q, k, offset= | offsets= | position_ids=, layout=)   rotated q, k
    attention(q, k, v, encoding=, causal=, window=, sinks=, ...)          [batch, q_len, q_heads, v_dim]
    T5BiasEncoding(weights, max_distance, bidirectional)                  T5's bias, trainable (an encoding=)
    ShawEncoding(rel_k, rel_v, max_distance, ...)                         Shaw's tables, trainable (an encoding=)
    PositionScheme(scheme, heads=, head_dim=, train_length=, ...)         a trainer scheme as an nn.Module

(help() lists the classes first, PositionScheme with every method it
inherits from nn.Module; apply_rope and attention follow under FUNCTIONS.)
For a Hugging Face model, :mod:`posenc.hf` patches its attention layers.

Import it explicitly (``import posenc.torch``); it needs PyTorch, which
``import posenc`` never imports. Same arguments as :func:`posenc.apply_rope`
and :func:`posenc.attention`, tensors in and out, with gradients:

* :func:`apply_rope`: the forward pass is posenc's RoPE kernel; the backward
  pass is the same kernel with ``direction="backward"`` (``a R(p)^T dy``: the
  inverse rotation times the attention factor), for every scaling method
  and both pair layouts.
* :func:`attention`: the forward pass is posenc's tiled kernel (no score
  matrix stored); the backward pass recomputes the attention **materialized**
  in PyTorch (``[batch, heads, q_len, kv_len]`` scores, each encoding by its
  definition, as posenc's float64 reference writes it) and differentiates
  that: memory grows as ``q_len x kv_len``, which suits training sizes (a few
  thousand tokens), not long-context inference. Gradients reach q, k, v,
  ``sink_logits`` and the trainable encoding tensors: T5's bucket biases
  (:class:`T5BiasEncoding` here takes a tensor) and Shaw's relative tables
  (:class:`ShawEncoding`). RoPE, ReRoPE, Leaky ReRoPE, Self-Extend and ALiBi
  have no trainable tensors; their gradients reach q and k through the
  rotations. URPE's two tables (:class:`posenc.UrpeEncoding`) are fixed
  here; the trainer's URPE (:class:`PositionScheme`) trains them.
* :class:`PositionScheme`: every scheme of posenc's tiny trainer (KERPLE,
  FIRE, T5, Shaw, XLNet, DeBERTa, URPE, ALiBi, RoPE, NoPE, sinusoidal,
  learned, complex order, FLOATER) as a module whose parameters are the
  scheme's tensors; what it computes from them, and the backward of that,
  is the trainer's own code.

Inputs are float32, float16 or bfloat16 tensors (the kernels' dtypes; the
backward pass computes in float32 and returns gradients in the input's
dtype), or float64, on any device. ``backend=`` chooses how a call runs:

* ``"kernel"``: posenc's CPU kernels, as above (CPU tensors, the kernels'
  dtypes);
* ``"torch"``: the same method as torch operations on the tensors' device
  (CUDA, MPS, ...): posenc computes the frequencies, the cos/sin tables (in
  float64 on the CPU), the positions, masks and biases and moves them
  there; the attention is the materialized form, in float32 (float64 for
  float64) rounded once to the input's dtype, and autograd differentiates
  it. The scores are materialized in blocks of query rows (512 MiB of
  float32 at a time); with gradients autograd keeps every block's,
  ``q_len x kv_len`` per head, as the backward above;
* None (the default): the kernel on the CPU, torch on any other device and
  for float64 (which the kernels do not take; ``torch.autograd.gradcheck``
  runs so).

Both check the arguments with posenc's own rules first (the torch backend
on zero-stride proxies of the tensors' shapes: no element is read), so a
call on a GPU is refused exactly as the same call on the CPU.

Example::

    >>> import torch, posenc, posenc.torch
    >>> spec = posenc.RopeSpec(head_dim=16)
    >>> q = torch.randn(1, 6, 4, 16, requires_grad=True)
    >>> k = torch.randn(1, 6, 2, 16, requires_grad=True)
    >>> v = torch.randn(1, 6, 2, 16, requires_grad=True)
    >>> enc = posenc.ReRopeEncoding(spec, window=3)
    >>> posenc.torch.attention(q, k, v, encoding=enc).square().sum().backward()
    >>> q.grad.shape
    torch.Size([1, 6, 4, 16])
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Optional, Sequence, Tuple

import numpy as np
import torch

from . import _args, _deprecated
from . import encodings as _encodings
from . import rope as _rope
from .attention import (AlibiEncoding, ReRopeEncoding, RopeEncoding, SelfExtendEncoding, UrpeEncoding)
from .attention import ShawEncoding as _FixedShaw
from .attention import T5BiasEncoding as _FixedT5
from .attention import attention as _kernel_attention
from . import _layout
from ._posenc import check_attention as _check_attention

__all__ = ["apply_rope", "attention", "T5BiasEncoding", "ShawEncoding", "PositionScheme"]

_KERNEL_DTYPES = (torch.float32, torch.float16, torch.bfloat16)

#: The two ways a call runs (the ``backend=`` argument): posenc's CPU kernel,
#: or torch operations on the tensors' own device (posenc's frequencies,
#: positions and masks moved there; the attention materialized).
BACKENDS = ("kernel", "torch")


def _check_tensors(op: str, names: Sequence[str], tensors: Sequence[Any]) -> torch.dtype:
    """Every tensor a 4-D torch tensor of one supported dtype, all on one
    device; that dtype."""
    for name, t in zip(names, tensors):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"[{op}] {name} = a {type(t).__name__}: must be a torch.Tensor (posenc.torch "
                             f"records gradients; posenc.{op} takes NumPy arrays)")
        if t.device != tensors[0].device:
            raise ValueError(f"[{op}] {name} = a tensor on {t.device}: must be on {names[0]}'s device, "
                             f"{tensors[0].device}")
        if t.dim() != 4:
            raise ValueError(f"[{op}] {name}.shape = {tuple(t.shape)}: must have 4 axes")
        if t.dtype not in _KERNEL_DTYPES + (torch.float64,):
            raise ValueError(f"[{op}] {name}.dtype = {t.dtype}: must be float32, float16, bfloat16 or float64")
        if t.dtype != tensors[0].dtype:
            raise ValueError(f"[{op}] {name}.dtype = {t.dtype}: must equal {names[0]}.dtype = {tensors[0].dtype}")
    return tensors[0].dtype


def _backend(op: str, backend: Optional[str], first: str, x: torch.Tensor) -> str:
    """The backend a call runs on (`x`: its first tensor, named `first`).
    By default posenc's kernel on the CPU, torch operations on any other
    device and for float64 (which the kernels do not take)."""
    if backend is None:
        return "kernel" if x.device.type == "cpu" and x.dtype in _KERNEL_DTYPES else "torch"
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ValueError(f"[{op}] backend = {backend!r}: must be None (the kernel on the CPU, torch operations "
                         f"elsewhere), \"kernel\" or \"torch\"")
    if backend == "kernel" and x.device.type != "cpu":
        raise ValueError(f"[{op}] {first} = a tensor on {x.device}: backend \"kernel\" computes on the CPU (move "
                         f"the tensors with .cpu(), or run torch operations there: backend=None or \"torch\")")
    if backend == "kernel" and x.dtype not in _KERNEL_DTYPES:
        raise ValueError(f"[{op}] {first}.dtype = {x.dtype}: backend \"kernel\" takes float32, float16 or "
                         f"bfloat16 (float64 runs as torch operations: backend=None or \"torch\")")
    return backend


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """What the torch backend computes in: float32 for every storage type
    the kernels take (as they do), float64 for float64."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _proxy(shape: Sequence[int]) -> np.ndarray:
    """A float32 array of `shape` [batch, seq, heads, dim] that holds one row
    (zero strides elsewhere): what posenc's checks read in place of a tensor
    on another device, without its memory."""
    row = np.zeros(max(int(shape[3]), 1), np.float32)
    return np.lib.stride_tricks.as_strided(row, shape=tuple(int(n) for n in shape), strides=(0, 0, 0, 4),
                                           writeable=False)


def _on_cpu(value: Any) -> Any:
    """A tensor argument (positions, lengths) as a CPU NumPy array, so that
    posenc's checks read it wherever it lives; anything else as it is."""
    return value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else value


def _bhsd(t: torch.Tensor, layout: str) -> torch.Tensor:
    """t in `layout` as [batch, heads, seq, dim], or back (the swap is its own inverse)."""
    return t if layout == "bhsd" else t.transpose(1, 2)


def _integers(op: str, name: str, value: Any) -> np.ndarray:
    """An int, or an integer array-like or tensor, as int64: a float is
    refused as posenc's NumPy functions refuse it, never truncated."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    if not isinstance(value, np.ndarray) and np.ndim(value) == 0:
        return np.int64(_args.integer(op, name, value))
    return _args.int64_array(op, name, value)


def _positions(op: str, batch: int, seq: int, offset: Any, positions: Any,
               names: Tuple[str, str]) -> Optional[np.ndarray]:
    """The [batch, seq] int64 positions that an offset (int or one per row)
    or explicit positions mean (``names``: the two parameters, for
    messages); None when neither is given."""
    if positions is not None:
        ids = _integers(op, names[1], positions)
        return np.broadcast_to(ids.reshape(-1, seq), (batch, seq)).copy()
    if offset is None:
        return None
    start = _integers(op, names[0], offset)
    return np.broadcast_to(start.reshape(-1, 1), (batch, 1)) + np.arange(seq, dtype=np.int64)[None, :]


def _rotate(x: torch.Tensor, positions: torch.Tensor, inv_freq: torch.Tensor, layout: str) -> torch.Tensor:
    """x [batch, heads, seq, head_dim] (any device) rotated at positions
    [batch, seq] (or broadcastable; a CPU tensor): pair k is (k, k + r/2) in
    half-split and (2k, 2k+1) in interleaved, the angle position * inv_freq[k]
    (a CPU float64 tensor) formed and its cos and sin taken in float64 on the
    CPU, then moved to x's device and dtype (a device without float64, MPS,
    gets the same tables); the dimensions past r = 2 len(inv_freq) pass
    through."""
    pairs = inv_freq.shape[0]
    r = 2 * pairs
    angle = positions.to(torch.float64)[..., None] * inv_freq  # [batch, seq, pairs]
    cos, sin = (f(angle).to(x.device, x.dtype)[:, None] for f in (torch.cos, torch.sin))
    if layout == "half-split":
        a, b = x[..., :pairs], x[..., pairs:r]
        rotated = torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)
    else:
        a, b = x[..., 0:r:2], x[..., 1:r:2]
        rotated = torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)
    return torch.cat([rotated, x[..., r:]], dim=-1)


# ---- apply_rope ---------------------------------------------------------------


class _Rope(torch.autograd.Function):
    """The kernel backend: y = a R(p) x per tensor; dx = a R(p)^T dy."""

    @staticmethod
    def forward(ctx, spec, positions: np.ndarray, frequencies, *tensors):
        ctx.spec, ctx.positions, ctx.frequencies = spec, positions, frequencies
        out = _rope.apply_rope(spec, *[t.detach() for t in tensors], position_ids=positions, frequencies=frequencies,
                               layout="bshd")
        return out if isinstance(out, tuple) else (out,)

    @staticmethod
    def backward(ctx, *grads):
        grads = [torch.zeros_like(g) if g is None else g for g in grads]
        dx = _rope.apply_rope(ctx.spec, *[g.contiguous() for g in grads], position_ids=ctx.positions,
                              frequencies=ctx.frequencies, direction="backward", layout="bshd")
        dx = dx if isinstance(dx, tuple) else (dx,)
        return (None, None, None) + tuple(dx)


def _rope_torch(spec, x: torch.Tensor, positions: np.ndarray, frequencies) -> torch.Tensor:
    """The torch backend: x [batch, seq, heads, head_dim] on any device,
    a R(p) x computed in float32 (float64 for float64) and rounded once to
    x's dtype, as the kernel does; autograd differentiates it."""
    inv_freq, factor = frequencies
    rotated = _rotate(x.to(_compute_dtype(x.dtype)).transpose(1, 2), torch.from_numpy(positions),
                      torch.as_tensor(np.asarray(inv_freq), dtype=torch.float64), spec.layout)
    r = 2 * len(inv_freq)
    scaled = torch.cat([rotated[..., :r] * factor, rotated[..., r:]], dim=-1)
    return scaled.transpose(1, 2).to(x.dtype)


def apply_rope(spec, *tensors: torch.Tensor, offset: int = 0, offsets: Any = None, position_ids: Any = None,
               frequencies: Any = None, layout: Optional[str] = None, backend: Optional[str] = None):
    """:func:`posenc.apply_rope` with gradients (returns new tensors; no
    ``inplace``, which autograd cannot record on leaves).

    Args:
        spec: the :class:`posenc.RopeSpec` (any scaling method).
        *tensors: ``[batch, seq, heads, head_dim]`` tensors (``layout="bhsd"``:
            ``[batch, heads, seq, head_dim]``) of one dtype.
        offset, offsets, position_ids: as in :func:`posenc.apply_rope`.
        frequencies: ``(inv_freq, attention_factor)``; by default those of
            this call's length (largest position + 1).
        layout: ``"bshd"`` or ``"bhsd"``; required when the shapes fit both.
        backend: ``"kernel"`` (posenc's RoPE kernel; CPU tensors),
            ``"torch"`` (torch operations on the tensors' device: the
            cos/sin tables posenc's frequencies give, in float64 on the CPU,
            moved there) or None: the kernel on the CPU, torch elsewhere and
            for float64.

    Returns:
        The rotated tensor, or a tuple of them.
    """
    if not tensors:
        raise ValueError("[rope] tensors: none given; pass at least one [batch, seq, heads, head_dim] tensor")
    names = [f"tensors[{i}]" for i in range(len(tensors))]
    _check_tensors("rope", names, tensors)
    backend = _backend("rope", backend, names[0], tensors[0])
    layout = _layout.resolve("apply_rope", layout, _layout.rope_fits, tensors, {"position_ids": position_ids})
    views = [t if layout == "bshd" else t.transpose(1, 2) for t in tensors]
    batch, seq = views[0].shape[0], views[0].shape[1]
    given = sum(x is not None for x in (offsets, position_ids)) + (offset != 0)
    if given > 1:
        raise ValueError("[rope] offset, offsets, position_ids: more than one given; give at most one")
    positions = _positions("rope", batch, seq, offsets if offsets is not None else offset, position_ids,
                           ("offsets" if offsets is not None else "offset", "position_ids"))
    if frequencies is None:
        frequencies = spec.frequencies(int(positions.max()) + 1 if positions.size else 1)
    if backend == "kernel":
        out = _Rope.apply(spec, positions, frequencies, *views)
    else:  # posenc's checks on one head of each tensor (the heads are alike to them), then torch
        _rope.apply_rope(spec, *[_proxy((*v.shape[:2], 1, v.shape[3])) for v in views], position_ids=positions,
                         frequencies=frequencies, layout="bshd")
        out = tuple(_rope_torch(spec, v, positions, frequencies) for v in views)
    out = tuple(o if layout == "bshd" else o.transpose(1, 2) for o in out)
    return out[0] if len(out) == 1 else out


# ---- trainable encodings ------------------------------------------------------------


@dataclass
class T5BiasEncoding:
    """:class:`posenc.T5BiasEncoding` whose ``weights [num_buckets, q_heads]``
    are a tensor that receives gradients (``relative_attention_bias.weight``)."""

    weights: torch.Tensor
    max_distance: int = 128
    bidirectional: bool = True

    def tensors(self) -> Tuple[torch.Tensor, ...]:
        return (self.weights,)

    def kernel_encoding(self):
        return _FixedT5(self.weights.detach().cpu().double().numpy(), self.max_distance,
                                          self.bidirectional)


@dataclass
class ShawEncoding:
    """:class:`posenc.ShawEncoding` whose tables ``rel_k [2K+1, head_dim]`` and
    ``rel_v [2K+1, v_dim]`` are tensors that receive gradients."""

    rel_k: Optional[torch.Tensor]
    rel_v: Optional[torch.Tensor] = None
    max_distance: int = 0
    query_minus_key: bool = False
    key_term: bool = True
    query_term: bool = False

    def tensors(self) -> Tuple[torch.Tensor, ...]:
        return tuple(t for t in (self.rel_k, self.rel_v) if t is not None)

    def kernel_encoding(self):
        table = lambda t: None if t is None else t.detach().cpu().double().numpy()  # noqa: E731
        return _FixedShaw(table(self.rel_k), table(self.rel_v), max_distance=self.max_distance,
                                        query_minus_key=self.query_minus_key, key_term=self.key_term,
                                        query_term=self.query_term)


def _kernel_encoding(encoding):
    return encoding.kernel_encoding() if isinstance(encoding, (T5BiasEncoding, ShawEncoding)) else encoding


# ---- the materialized attention ------------------------------------------------------


@dataclass
class _Call:
    """One attention call: what the materialized form needs besides tensors."""

    encoding: Any
    kernel_kwargs: dict  # posenc.attention's keyword arguments, as the caller gave them
    q_positions: np.ndarray  # [batch, q_len] int64
    k_positions: np.ndarray  # [batch, kv_len]
    kv_lengths: Optional[np.ndarray]  # [batch] or None
    length: int  # the whole call's largest position + 1: the frequencies' length (dynamic NTK, LongRoPE)
    # The rotated keys of each key-position set (exact, Leaky ReRoPE's, Self-Extend's grouped), shared by
    # the query blocks of one torch-backend call; None: none kept (the kernel backend's backward).
    keys: Optional[dict] = None


def _rope_spec(encoding):
    if isinstance(encoding, _rope.RopeSpec):
        return encoding
    if isinstance(encoding, (RopeEncoding, ReRopeEncoding, SelfExtendEncoding)):
        return encoding.spec
    return None


def _scores(call: _Call, q: torch.Tensor, k: torch.Tensor, tables: Sequence[torch.Tensor]):
    """The q.k term of each pair before scaling [batch, heads, q_len, kv_len],
    and the logit factor of the RoPE family (its attention factor squared)."""
    enc = call.encoding
    spec = _rope_spec(enc)
    if spec is None:
        scores = q @ k.transpose(-1, -2)
        if isinstance(enc, ShawEncoding) and enc.rel_k is not None:
            a = tables[0][_shaw_rows(call, enc).to(tables[0].device)]  # [batch, q_len, kv_len, head_dim]
            if enc.key_term:
                scores = scores + torch.einsum("bhid,bijd->bhij", q, a)
            if enc.query_term:
                scores = scores + torch.einsum("bhjd,bijd->bhij", k, a)
        return scores, 1.0
    seq_len = getattr(enc, "seq_len", None)
    inv_freq, factor = spec.frequencies(call.length if seq_len is None else seq_len)
    inv_freq = torch.as_tensor(inv_freq, dtype=torch.float64)
    p = torch.from_numpy(call.q_positions).to(torch.float64)
    j = torch.from_numpy(call.k_positions).to(torch.float64)

    def dot(q_at, k_at, keys: str):
        """q rotated at q_at times k rotated at k_at (the set named `keys`,
        rotated once per call when the call keeps them)."""
        rotated = call.keys.get(keys) if call.keys is not None else None
        if rotated is None:
            rotated = _rotate(k, k_at, inv_freq, spec.layout)
            if call.keys is not None:
                call.keys[keys] = rotated
        return _rotate(q, q_at, inv_freq, spec.layout) @ rotated.transpose(-1, -2)

    exact = dot(p, j, "exact")
    if isinstance(enc, (_rope.RopeSpec, RopeEncoding)):
        return exact, factor * factor
    on_device = [torch.from_numpy(x).to(q.device) for x in (call.q_positions, call.k_positions)]
    distance = (on_device[0][:, :, None] - on_device[1][:, None, :])[:, None]  # [batch, 1, q_len, kv_len]
    if isinstance(enc, ReRopeEncoding):
        w = float(enc.window)
        if enc.leak is None:  # the distance reads as w
            far = _rotate(q, torch.full_like(p, w), inv_freq, spec.layout) @ k.transpose(-1, -2)
        else:  # q at p/leak + w(1 - 1/leak), k at j/leak
            far = dot(p / enc.leak + w * (1 - 1 / enc.leak), j / enc.leak, "leaky")
        return torch.where(distance < w, exact, far), factor * factor
    group, window = enc.group, enc.window  # Self-Extend: grouped keys at j // group
    grouped_keys = torch.div(j, group, rounding_mode="floor")
    if enc.form == "kv-shift":  # llama.cpp: c = p // window compressions behind the query; its block stays exact
        blocks = torch.div(p, window, rounding_mode="floor")
        far = dot(p - blocks * (window - window // group), grouped_keys, "grouped")
        block_start = torch.div(on_device[0], window, rounding_mode="floor") * window  # [batch, q_len]
        near = on_device[1][:, None, :] >= block_start[:, :, None]
        return torch.where(near[:, None], exact, far), factor * factor
    far = dot(torch.div(p, group, rounding_mode="floor") + window - window // group, grouped_keys, "grouped")
    return torch.where(distance < window, exact, far), factor * factor


def _shaw_rows(call: _Call, enc: ShawEncoding) -> torch.Tensor:
    """[batch, q_len, kv_len] table rows: the distance clipped to [-K, K], + K."""
    p, j = call.q_positions[:, :, None], call.k_positions[:, None, :]
    d = p - j if enc.query_minus_key else j - p
    return torch.from_numpy(np.clip(d, -enc.max_distance, enc.max_distance) + enc.max_distance)


def _bias(call: _Call, tables: Sequence[torch.Tensor], dtype: torch.dtype, device: torch.device):
    """The additive bias [batch or 1, heads, q_len, kv_len] on `device`, or None."""
    enc = call.encoding
    p = torch.from_numpy(call.q_positions)[:, None, :, None].to(device, dtype)
    j = torch.from_numpy(call.k_positions)[:, None, None, :].to(device, dtype)
    if isinstance(enc, AlibiEncoding):
        slopes = torch.as_tensor(np.asarray(enc.slopes), dtype=dtype, device=device)[None, :, None, None]
        return -slopes * (p - j).abs() if enc.form == "distance" else slopes * j
    if isinstance(enc, T5BiasEncoding):
        return _bucketed(call, tables[0], enc, device)
    if isinstance(enc, UrpeEncoding):
        return _bucketed(call, torch.tensor(np.asarray(enc.bias), dtype=dtype), enc, device)
    return None


def _bucketed(call: _Call, table: torch.Tensor, enc, device: torch.device) -> torch.Tensor:
    """A [num_buckets, heads] table (T5's bias, URPE's B or C) read by the T5
    bucket of key - query position: [batch, heads, q_len, kv_len] on `device`."""
    relative = call.k_positions[:, None, :] - call.q_positions[:, :, None]
    buckets = _encodings.t5_relative_bucket(relative, num_buckets=table.shape[0], max_distance=enc.max_distance,
                                            bidirectional=enc.bidirectional)
    return table.to(device)[torch.from_numpy(buckets).to(device)].permute(0, 3, 1, 2)


def _visible(call: _Call, causal: bool, window: int, sinks: int, device: torch.device) -> torch.Tensor:
    """[batch, 1, q_len, kv_len] on `device` (formed there from the
    positions): which keys each query sees (the mask, the Λ mask's sinks,
    the valid lengths)."""
    p = torch.from_numpy(call.q_positions).to(device)[:, :, None]
    j = torch.from_numpy(call.k_positions).to(device)[:, None, :]
    visible = torch.ones(p.shape[0], p.shape[1], j.shape[2], dtype=torch.bool, device=device)
    if causal:
        visible &= j <= p
    if window > 0:
        distance = p - j if causal else (p - j).abs()
        visible &= (j < sinks) | (distance < window)
    if call.kv_lengths is not None:
        lengths = torch.from_numpy(call.kv_lengths).to(device)
        visible &= torch.arange(j.shape[-1], device=device)[None, None, :] < lengths[:, None, None]
    return visible[:, None]


def _materialized(call: _Call, q, k, v, sink_logits, tables):
    """softmax(logits) v in bhsd: q [b, Hq, Sq, d], k [b, Hk, Sk, d],
    v [b, Hk, Sk, dv] -> [b, Hq, Sq, dv], as posenc's float64 reference
    defines it (reference/attention_reference.cc)."""
    kw = call.kernel_kwargs
    tables = [t.to(q.dtype) for t in tables]
    heads, head_dim = q.shape[1], q.shape[3]
    group = heads // k.shape[1]
    # q head h reads kv head h // group (repeat_interleave, written as expand: meta tensors take it)
    k, v = (x[:, :, None].expand(x.shape[0], x.shape[1], group, *x.shape[2:]).flatten(1, 2) for x in (k, v))
    scores, factor_squared = _scores(call, q, k, tables)
    scale = kw["softmax_scale"] if kw["softmax_scale"] is not None else 1.0 / math.sqrt(head_dim)
    q_scale = torch.full(call.q_positions.shape, scale * factor_squared, dtype=torch.float64)
    if kw["logn_train_length"] > 0:
        logn = np.log(call.q_positions + 1.0) / math.log(kw["logn_train_length"])
        q_scale = q_scale * torch.from_numpy(np.maximum(1.0, logn))
    logits = q_scale.to(q.device, q.dtype)[:, None, :, None] * scores
    bias = _bias(call, tables, q.dtype, q.device)
    if bias is not None:
        logits = logits + bias
    if kw["softcap"] > 0:
        logits = kw["softcap"] * torch.tanh(logits / kw["softcap"])
    visible = _visible(call, kw["causal"], kw["window"], kw["sinks"], q.device).expand_as(logits)
    logits = logits.masked_fill(~visible, -math.inf)
    if sink_logits is not None:  # a virtual key with a zero value in every softmax of its head
        sink = sink_logits.to(q.dtype)[None, :, None, None].expand(*logits.shape[:3], 1)
        probs = torch.softmax(torch.cat([logits, sink], dim=-1), dim=-1)[..., :-1]
    else:  # a row that sees no key is 0 (softmax of zeros, then dropped)
        empty = ~visible.any(dim=-1, keepdim=True)
        probs = torch.softmax(logits.masked_fill(empty, 0.0), dim=-1).masked_fill(empty, 0.0)
    enc = call.encoding
    if isinstance(enc, UrpeEncoding):  # C weighs each probability, on the value side: no renormalization
        probs = probs * _bucketed(call, torch.tensor(np.asarray(enc.scale), dtype=q.dtype), enc, q.device)
    out = probs @ v
    if isinstance(enc, ShawEncoding) and enc.rel_v is not None:
        out = out + torch.einsum("bhij,bijd->bhid", probs, tables[-1][_shaw_rows(call, enc).to(q.device)])
    return out


# The torch backend materializes the scores of this many (batch, head, query,
# key) elements at a time at most (512 MiB in float32): longer calls run in
# blocks of query rows, each row's softmax whole, so that a long prefill on a
# GPU needs memory for one block's scores, not q_len x kv_len (with
# gradients, autograd still keeps every block's).
_SCORE_ELEMENTS = 1 << 27


def _torch_attention(call: _Call, layout: str, q, k, v, sink_logits, tables) -> torch.Tensor:
    """The torch backend: the materialized form on q's device, in float32
    (float64 for float64) and rounded once to q's dtype, as the kernel
    computes, in blocks of query rows; autograd differentiates it."""
    compute = _compute_dtype(q.dtype)
    q32, k32, v32 = (_bhsd(t.to(compute), layout) for t in (q, k, v))
    sink = None if sink_logits is None else sink_logits.to(q.device, compute)
    tables = [t.to(q.device, compute) for t in tables]
    batch, heads, q_len, kv_len = q32.shape[0], q32.shape[1], q32.shape[2], k32.shape[2]
    rows = max(1, _SCORE_ELEMENTS // max(1, batch * heads * kv_len))
    keys: dict = {}  # the rotated keys, formed by the first block for all
    blocks = [_materialized(replace(call, q_positions=call.q_positions[:, start:start + rows], keys=keys),
                            q32[:, :, start:start + rows], k32, v32, sink, tables)
              for start in range(0, max(q_len, 1), rows)]
    out = blocks[0] if len(blocks) == 1 else torch.cat(blocks, dim=2)
    return _bhsd(out, layout).to(q.dtype)


class _Attention(torch.autograd.Function):
    """The kernel backend. Forward: posenc's kernel. Backward: the
    materialized form, differentiated."""

    @staticmethod
    def forward(ctx, call: _Call, layout: str, q, k, v, sink_logits, *tables):
        ctx.call, ctx.layout = call, layout
        ctx.save_for_backward(q, k, v, sink_logits, *tables)
        kw = dict(call.kernel_kwargs)
        if sink_logits is not None:
            kw["sink_logits"] = sink_logits.detach().cpu().double().numpy()
        return _kernel_attention(q.detach(), k.detach(), v.detach(), encoding=_kernel_encoding(call.encoding),
                                    layout=layout, **kw)

    @staticmethod
    def backward(ctx, grad):
        saved = ctx.saved_tensors
        compute = torch.float32
        leaves = [None if t is None else t.detach().to(compute).requires_grad_(ctx.needs_input_grad[2 + i])
                  for i, t in enumerate(saved)]
        q, k, v, sink, *tables = leaves
        with torch.enable_grad():
            out = _materialized(ctx.call, _bhsd(q, ctx.layout), _bhsd(k, ctx.layout), _bhsd(v, ctx.layout), sink,
                                tables)
            wanted = [t for t in leaves if t is not None and t.requires_grad]
            grads = iter(torch.autograd.grad(_bhsd(out, ctx.layout), wanted, grad.to(compute)) if wanted
                         else ())
        result = [next(grads).to(t.dtype) if leaf is not None and leaf.requires_grad else None
                  for t, leaf in zip(saved, leaves)]
        return (None, None) + tuple(result)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, encoding: Any = None, causal: bool = True,
              window: int = 0, sinks: int = 0, softmax_scale: Optional[float] = None, logn_train_length: int = 0,
              sink_logits: Optional[torch.Tensor] = None, softcap: float = 0.0, q_offset: Any = None,
              q_positions: Any = None, k_offset: Any = None, k_positions: Any = None, kv_lengths: Any = None,
              layout: Optional[str] = None, backend: Optional[str] = None) -> torch.Tensor:
    """:func:`posenc.attention` with gradients (same arguments and rules).

    ``encoding`` is any of posenc's encodings (None, a :class:`RopeSpec`,
    :class:`posenc.RopeEncoding`, :class:`posenc.ReRopeEncoding`,
    :class:`posenc.SelfExtendEncoding`, :class:`posenc.AlibiEncoding`,
    :class:`posenc.UrpeEncoding` with its tables fixed) or
    one with trainable tensors from this module (:class:`T5BiasEncoding`,
    :class:`ShawEncoding`; posenc's own classes of those are accepted too,
    their tables then fixed). ``sink_logits`` ``[q_heads]`` may require
    grad (gpt-oss's learned sinks).

    ``backend``: ``"kernel"`` (posenc's tiled kernel forward, the
    materialized backward; CPU tensors of the kernels' dtypes),
    ``"torch"`` (the materialized form as torch operations on the tensors'
    device, forward and backward: posenc computes the frequencies,
    positions, masks and biases on the CPU and moves them there; memory
    ``q_len x kv_len`` per head) or None: the kernel on the CPU, torch on
    any other device and for float64. Both check the arguments with
    posenc's own rules (the torch backend without touching the tensors'
    memory) and compute in float32 (float64 for float64).

    Returns:
        ``[batch, q_len, q_heads, v_dim]`` (``layout="bhsd"``:
        ``[batch, q_heads, q_len, v_dim]``) in q's dtype.
    """
    _check_tensors("attention", ["q", "k", "v"], [q, k, v])
    backend = _backend("attention", backend, "q", q)
    tables = encoding.tensors() if isinstance(encoding, (T5BiasEncoding, ShawEncoding)) else ()
    for name, t in zip(("sink_logits",) + tuple(f"encoding tensor {i}" for i in range(len(tables))),
                       (sink_logits,) + tables):
        if t is not None and not isinstance(t, torch.Tensor):
            raise ValueError(f"[attention] {name} = a {type(t).__name__}: must be a torch.Tensor")
    kernel_kwargs = dict(causal=causal, window=window, sinks=sinks, softmax_scale=softmax_scale,
                         logn_train_length=logn_train_length, softcap=softcap, q_offset=q_offset,
                         q_positions=q_positions, k_offset=k_offset, k_positions=k_positions, kv_lengths=kv_lengths)
    layout = _layout.resolve("attention", layout, _layout.attention_fits, (q, k, v), kernel_kwargs)
    if backend == "torch":  # posenc's checks, on proxies of the tensors' shapes
        kernel_kwargs = {name: _on_cpu(value) for name, value in kernel_kwargs.items()}
        bshd = [t.shape if layout == "bshd" else t.transpose(1, 2).shape for t in (q, k, v)]
        _check_attention(*map(_proxy, bshd), encoding=_kernel_encoding(encoding),
                         sink_logits=None if sink_logits is None else _on_cpu(sink_logits.double()),
                         **kernel_kwargs)
    qv, kv = _bhsd(q, layout), _bhsd(k, layout)
    batch, q_len, kv_len = qv.shape[0], qv.shape[2], kv.shape[2]
    lengths = None if kv_lengths is None else np.asarray(_on_cpu(kv_lengths), np.int64).reshape(batch)
    k_grid = _positions("attention", batch, kv_len, 0 if k_offset is None else k_offset, k_positions,
                        ("k_offset", "k_positions"))
    q_grid = _positions("attention", batch, q_len, q_offset, q_positions, ("q_offset", "q_positions"))
    if q_grid is None:  # posenc's default: the queries are the last q_len of the (valid) keys
        keys = np.full(batch, kv_len, np.int64) if lengths is None else lengths
        q_grid = (keys - q_len)[:, None] + np.arange(q_len, dtype=np.int64)[None, :]
    longest = int(max(q_grid.max(initial=0), k_grid.max(initial=0))) + 1
    call = _Call(encoding if encoding is not None else None, kernel_kwargs, q_grid, k_grid, lengths, longest)
    if isinstance(encoding, _FixedT5):  # fixed tables: the trainable form, without gradients
        call.encoding = T5BiasEncoding(torch.from_numpy(np.asarray(encoding.weights)), encoding.max_distance,
                                        encoding.bidirectional)
        tables = call.encoding.tensors()
    if isinstance(encoding, _FixedShaw):
        table = lambda t: None if t is None else torch.from_numpy(np.asarray(t))  # noqa: E731
        call.encoding = ShawEncoding(table(encoding.rel_k), table(encoding.rel_v), encoding.max_distance,
                                      encoding.query_minus_key, encoding.key_term, encoding.query_term)
        tables = call.encoding.tensors()
    if backend == "torch":
        return _torch_attention(call, layout, q, k, v, sink_logits, tables)
    return _Attention.apply(call, layout, q, k, v, sink_logits, *tables)


from ._torch_schemes import PositionScheme  # noqa: E402  (it imports apply_rope from here when it runs)

# The trainable classes took the C++ names with posenc's own (issue 50), one release more.
__getattr__ = _deprecated.renamed(__name__, {"T5BiasAttention": "posenc.torch.T5BiasEncoding",
                                             "ShawAttention": "posenc.torch.ShawEncoding"})
