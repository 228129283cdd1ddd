"""Attention with positional encodings, on NumPy arrays.

One call computes ``softmax(scale * q.k + bias) v`` over every query and
head with the C++ tiled kernel (online softmax: no ``q_len x kv_len`` matrix
is ever stored, SIMD, multithreaded, GIL released)::

    q    [batch, q_len,  q_heads,  head_dim]
    k    [batch, kv_len, kv_heads, head_dim]     q_heads a multiple of kv_heads (GQA, MQA)
    v    [batch, kv_len, kv_heads, v_dim]
    out  [batch, q_len,  q_heads,  v_dim]        (returned, q's dtype)

float32, float16 or ``ml_dtypes.bfloat16``; any strides with a contiguous
last axis (slices of a fused QKV projection need no copy). Arithmetic is
float32 whatever the storage type.

The positional encoding is one of the classes below (``encoding=None`` is
NoPE); masks, log-n scaling, sink logits and soft-capping combine with any
of them:

* :class:`RopeAttention` rotates q and k by their positions inside the call
  (pass them unrotated).
* :class:`ReRopeAttention`: ReRoPE / Leaky ReRoPE (Su Jianlin 2023).
* :class:`AlibiAttention`: ALiBi slopes per query head.
* :class:`T5BiasAttention`: T5's bucketed relative bias.

Positions are absolute token positions: key t of row b is at
``k_offset + t`` (or ``k_positions[b, t]``); by default the queries are the
last ``q_len`` tokens of the keys (self-attention when ``q_len == kv_len``,
a decode step otherwise). Masks and relative encodings read positions,
never array indices.

Example (Llama-3-8B-shaped GQA with RoPE, one decode step after 9 tokens)::

    >>> import numpy as np, posenc
    >>> spec = posenc.RopeSpec(theta=500000.0, head_dim=128)
    >>> rng = np.random.default_rng(0)
    >>> q = rng.standard_normal((1, 1, 32, 128), dtype=np.float32)
    >>> k = rng.standard_normal((1, 10, 8, 128), dtype=np.float32)
    >>> v = rng.standard_normal((1, 10, 8, 128), dtype=np.float32)
    >>> out = posenc.attention(q, k, v, encoding=posenc.RopeAttention(spec))   # query at position 9
    >>> out.shape
    (1, 1, 32, 128)
    >>> ref = posenc.reference.attention(q, k, v, encoding=posenc.RopeAttention(spec))
    >>> bool(np.abs(out - ref).max() < 1e-5)
    True
"""

from __future__ import annotations

import inspect
from typing import Any, Optional, Sequence, Union

import numpy as np

from . import _args, _posenc
from .rope import RopeSpec

__all__ = [
    "AlibiAttention",
    "ReRopeAttention",
    "RopeAttention",
    "T5BiasAttention",
    "ShawAttention",
    "attention",
]


def _error(parameter: str, value: Any, rule: str) -> ValueError:
    """A ValueError in the C++ library's format: "[attention] parameter = value: rule"."""
    return ValueError(f"[attention] {parameter} = {value}: {rule}")


def _index(name: str, value: Any) -> int:
    return _args.integer("attention", name, value)


def _number(name: str, value: Any) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise _error(name, repr(value), "must be a number")
    return float(value)


def _spec(value: Any) -> RopeSpec:
    if not isinstance(value, RopeSpec):
        raise _error("spec", type(value).__name__, "must be a posenc.RopeSpec")
    return value


def _seq_len(value: Optional[int]) -> int:
    if value is None:
        return 0
    n = _index("seq_len", value)
    if n <= 0:
        raise _error("seq_len", n, "must be > 0 (None: the call's largest position + 1)")
    return n


class RopeAttention:
    """RoPE inside attention: q at position p and k at position j are rotated
    by ``spec``'s frequencies (any scaling method, either pair layout, partial
    rotary), so the score depends on ``p - j`` only. YaRN's and LongRoPE's
    attention factor scales q and k (logits by its square), as in Hugging Face.

    Args:
        spec: the :class:`RopeSpec`.
        seq_len: the length the frequency table is built for (it matters for
            dynamic NTK and LongRoPE only). ``None``: the call's largest
            position + 1, which is what Hugging Face does for a forward pass.
    """

    __slots__ = ("spec", "seq_len")

    def __init__(self, spec: RopeSpec, seq_len: Optional[int] = None):
        self.spec = _spec(spec)
        self.seq_len = None if seq_len is None else _seq_len(seq_len)

    def _core(self) -> tuple:
        return ("rope", self.spec._spec, _seq_len(self.seq_len))

    def __repr__(self) -> str:
        extra = "" if self.seq_len is None else f", seq_len={self.seq_len}"
        return f"RopeAttention({self.spec!r}{extra})"


class ReRopeAttention:
    """ReRoPE and Leaky ReRoPE (Su Jianlin 2023, "Rectified Rotary Position
    Embeddings", github.com/bojone/rerope): relative distances ``d = p - j``
    below ``window`` use RoPE as usual; beyond it the distance reads as
    ``window`` (ReRoPE) or grows by ``1/leak`` (Leaky ReRoPE:
    ``window + (d - window) / leak``). Causal attention only. ReRoPE is
    Self-Extend with an infinite group size and neighbour window ``window``.

    Args:
        spec: the :class:`RopeSpec`.
        window: the distance below which RoPE is exact, > 0 (Su used 512 for
            a 4096-token model).
        leak: ``None`` for ReRoPE, or k > 1 for Leaky ReRoPE.
        seq_len: as in :class:`RopeAttention`.
    """

    __slots__ = ("spec", "window", "leak", "seq_len")

    def __init__(self, spec: RopeSpec, window: int, leak: Optional[float] = None, seq_len: Optional[int] = None):
        self.spec = _spec(spec)
        self.window = _index("window", window)
        self.leak = None if leak is None else _number("leak", leak)
        self.seq_len = None if seq_len is None else _seq_len(seq_len)

    def _core(self) -> tuple:
        return ("rerope", self.spec._spec, _seq_len(self.seq_len), _index("window", self.window), self.leak)

    def __repr__(self) -> str:
        extra = "" if self.leak is None else f", leak={self.leak!r}"
        extra += "" if self.seq_len is None else f", seq_len={self.seq_len}"
        return f"ReRopeAttention({self.spec!r}, window={self.window}{extra})"


_ALIBI_FORMS = ("distance", "key-position")


class AlibiAttention:
    """ALiBi (Press et al. 2021): head h adds a linear bias to its logits
    (after the softmax scale), by ``form``:

    * ``"distance"``: ``-slopes[h] * |p - j|``, the paper's symmetric form
      (also right for encoders, ``causal=False``);
    * ``"key-position"``: ``+slopes[h] * j``, BLOOM's ``build_alibi_tensor``.
      On causal rows it differs from "distance" by a constant per row, so the
      attention is the same.

    Args:
        slopes: one slope per query head, in head order (never sorted), e.g.
            ``2 ** (-8 * (h + 1) / heads)`` for a power-of-two head count.
        form: ``"distance"`` or ``"key-position"``.
    """

    __slots__ = ("slopes", "form")

    def __init__(self, slopes: Sequence[float], form: str = "distance"):
        array = np.asarray(slopes, dtype=np.float64)
        if array.ndim != 1:
            raise _error("slopes.shape", array.shape, "must be (q_heads,): one slope per query head")
        if form not in _ALIBI_FORMS:
            raise _error("form", repr(form), 'must be "distance" or "key-position"')
        self.slopes = tuple(float(s) for s in array)
        self.form = form

    def _core(self) -> tuple:
        return ("alibi", np.asarray(self.slopes, dtype=np.float64), self.form)

    def __repr__(self) -> str:
        return f"AlibiAttention(slopes={list(self.slopes)!r}, form={self.form!r})"


class T5BiasAttention:
    """T5's relative position bias (Raffel et al. 2020): a learned scalar per
    (bucket, head) added to the logits, the bucket of ``j - p`` as Hugging
    Face's ``T5Attention._relative_position_bucket``. T5 does not scale its
    logits: pass ``softmax_scale=1.0`` for T5 models.

    Args:
        weights: ``[num_buckets, q_heads]``, laid out as Hugging Face's
            ``relative_attention_bias.weight``.
        max_distance: distances from ``num_buckets/2`` (per side) up to this
            share buckets logarithmically (T5: 128).
        bidirectional: True for the encoder (half the buckets per sign),
            False for decoder self-attention (future keys map to bucket 0).
    """

    __slots__ = ("weights", "max_distance", "bidirectional")

    def __init__(self, weights: Any, max_distance: int = 128, bidirectional: bool = True):
        array = np.array(weights, dtype=np.float64, order="C", copy=True)
        if array.ndim != 2:
            raise _error("weights.shape", array.shape, "must be (num_buckets, q_heads)")
        array.setflags(write=False)
        if not isinstance(bidirectional, (bool, np.bool_)):
            raise _error("bidirectional", repr(bidirectional), "must be True or False")
        self.weights = array
        self.max_distance = _index("max_distance", max_distance)
        self.bidirectional = bool(bidirectional)

    @property
    def num_buckets(self) -> int:
        return self.weights.shape[0]

    def _core(self) -> tuple:
        return ("t5", self.weights, _index("max_distance", self.max_distance), self.bidirectional)

    def __repr__(self) -> str:
        return (f"T5BiasAttention(weights=<{self.weights.shape[0]} buckets x {self.weights.shape[1]} heads>, "
                f"max_distance={self.max_distance}, bidirectional={self.bidirectional})")


class ShawAttention:
    """Shaw et al. (2018) relative position representations, and BERT's
    ``relative_key`` / ``relative_key_query``: learned vectors per relative
    distance clipped to ``[-K, K]``, shared by all heads.

    Args:
        rel_k: ``[2K+1, head_dim]`` added to the keys inside the score
            (``q . a^K``), or None when only values are used.
        rel_v: ``[2K+1, v_dim]`` added to the values in the output, or None.
        max_distance: K.
        query_minus_key: BERT's distance ``i - j`` instead of Shaw's ``j - i``.
        key_term: the ``q . a^K`` term (Shaw; BERT relative_key and
            relative_key_query).
        query_term: the ``k . a^K`` term (BERT relative_key_query).

    Example:
        >>> import numpy as np, posenc
        >>> q = k = v = np.ones((1, 4, 2, 8), np.float32)
        >>> enc = posenc.ShawAttention(np.zeros((5, 8)), None, max_distance=2)
        >>> posenc.attention(q, k, v, encoding=enc, causal=False).shape
        (1, 4, 2, 8)
    """

    __slots__ = ("rel_k", "rel_v", "max_distance", "query_minus_key", "key_term", "query_term")

    def __init__(self, rel_k: Any, rel_v: Any = None, *, max_distance: int, query_minus_key: bool = False,
                 key_term: bool = True, query_term: bool = False):
        self.max_distance = _index("max_distance", max_distance)
        rows = 2 * self.max_distance + 1
        tables = []
        for name, table in (("rel_k", rel_k), ("rel_v", rel_v)):
            if table is None:
                tables.append(None)
                continue
            array = np.array(table, dtype=np.float64, order="C", copy=True)
            if array.ndim != 2 or array.shape[0] != rows:
                raise _error(f"{name}.shape", array.shape, f"must be (2K+1 = {rows}, dim)")
            array.setflags(write=False)
            tables.append(array)
        self.rel_k, self.rel_v = tables
        if (key_term or query_term) and self.rel_k is None:
            raise _error("rel_k", None, "is needed for the key or query term")
        self.query_minus_key = bool(query_minus_key)
        self.key_term = bool(key_term)
        self.query_term = bool(query_term)

    def _core(self) -> tuple:
        return ("shaw", _index("max_distance", self.max_distance), self.query_minus_key, self.key_term, self.query_term,
                None if self.rel_k is None else self.rel_k.ravel(),
                None if self.rel_v is None else self.rel_v.ravel())

    def __repr__(self) -> str:
        return (f"ShawAttention(max_distance={self.max_distance}, query_minus_key={self.query_minus_key}, "
                f"key_term={self.key_term}, query_term={self.query_term}, value_term={self.rel_v is not None})")


Encoding = Union[None, RopeSpec, RopeAttention, ReRopeAttention, AlibiAttention, T5BiasAttention, ShawAttention]


def _encoding_core(encoding: Encoding) -> tuple:
    if encoding is None:
        return ("none",)
    if isinstance(encoding, RopeSpec):
        return RopeAttention(encoding)._core()
    if isinstance(encoding, (RopeAttention, ReRopeAttention, AlibiAttention, T5BiasAttention, ShawAttention)):
        return encoding._core()
    raise _error("encoding", type(encoding).__name__,
                 "must be None, a RopeSpec, RopeAttention, ReRopeAttention, AlibiAttention, T5BiasAttention "
                 "or ShawAttention")


def _int64_array(name: str, value: Any) -> np.ndarray:
    array = _args.int64_array("attention", name, value, dtype_rule="must be an integer type (token positions)")
    return np.ascontiguousarray(array)


def _side_positions(side: str, offset: Any, positions: Any, default_offset: Optional[int]):
    """(offset, offsets, ids) for the binding from one side's arguments."""
    if offset is not None and positions is not None:
        raise _error(f"{side}_positions", "given", f"give {side}_offset or {side}_positions, not both")
    if positions is not None:
        return None if default_offset is None else 0, None, _int64_array(f"{side}_positions", positions)
    if offset is None:
        return default_offset, None, None
    if np.ndim(offset) == 0:
        return _index(f"{side}_offset", offset), None, None
    offsets = _int64_array(f"{side}_offset", offset)
    if offsets.ndim != 1:
        raise _error(f"{side}_offset.shape", offsets.shape, "must be an integer or (batch,): one start per row")
    return None if default_offset is None else 0, offsets, None


def _optional_float64(name: str, value: Any) -> Optional[np.ndarray]:
    if value is None:
        return None
    array = np.asarray(value)
    if array.dtype.kind not in "iuf":
        raise _error(f"{name}.dtype", array.dtype, "must be numbers")
    return np.ascontiguousarray(array, dtype=np.float64)


def _call(reference: bool, q, k, v, encoding, causal, window, sinks, softmax_scale, logn_train_length,
          sink_logits, softcap, q_offset, q_positions, k_offset, k_positions, kv_lengths) -> np.ndarray:
    core = _encoding_core(encoding)
    if not isinstance(causal, (bool, np.bool_)):
        raise _error("causal", repr(causal), "must be True or False")
    q_args = _side_positions("q", q_offset, q_positions, None)
    k_args = _side_positions("k", k_offset, k_positions, 0)
    lengths = None if kv_lengths is None else _int64_array("kv_lengths", kv_lengths)
    scale = None if softmax_scale is None else _number("softmax_scale", softmax_scale)
    return _posenc.attention(
        np.asarray(q), np.asarray(k), np.asarray(v), core, bool(causal), _index("window", window),
        _index("sinks", sinks), scale, _index("logn_train_length", logn_train_length),
        _optional_float64("sink_logits", sink_logits), _number("softcap", softcap),
        q_args[0], q_args[1], q_args[2], k_args[0], k_args[1], k_args[2], lengths, bool(reference))


def attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    *,
    encoding: Encoding = None,
    causal: bool = True,
    window: int = 0,
    sinks: int = 0,
    softmax_scale: Optional[float] = None,
    logn_train_length: int = 0,
    sink_logits: Optional[Sequence[float]] = None,
    softcap: float = 0.0,
    q_offset: Union[None, int, Sequence[int]] = None,
    q_positions: Optional[Any] = None,
    k_offset: Union[None, int, Sequence[int]] = None,
    k_positions: Optional[Any] = None,
    kv_lengths: Optional[Sequence[int]] = None,
) -> np.ndarray:
    """Attention of q over k and v with a positional encoding and a mask.

    Args:
        q, k, v: ``[batch, q_len, q_heads, head_dim]``,
            ``[batch, kv_len, kv_heads, head_dim]``, ``[batch, kv_len, kv_heads, v_dim]``
            of one dtype (float32, float16, ``ml_dtypes.bfloat16``).
        encoding: ``None`` (NoPE), a :class:`RopeSpec` (shorthand for
            ``RopeAttention(spec)``), :class:`RopeAttention`,
            :class:`ReRopeAttention`, :class:`AlibiAttention` or
            :class:`T5BiasAttention`.
        causal: a query at position p sees keys at positions j <= p.
        window: if > 0, a query sees only keys with ``p - j < window``
            (``|p - j|`` when not causal): exactly ``window`` keys up to and
            including its own position. Hugging Face's ``sliding_window`` is
            this number (Mistral, Gemma 2); flash-attention's
            ``window_size=(left, right)`` on causal rows is ``left + 1``.
        sinks: with a window, keys at positions ``j < sinks`` stay visible
            too: the Λ-shaped mask of LM-Infinite / StreamingLLM.
        softmax_scale: multiplies q.k; default ``1 / sqrt(head_dim)``.
        logn_train_length: if > 0, a query at position p is scaled by
            ``max(1, log(p + 1) / log(logn_train_length))`` (log-n scaling).
        sink_logits: learned per-head sink logits (gpt-oss), shape
            ``(q_heads,)``: a virtual key with this logit and a zero value in
            every softmax. Not StreamingLLM's sinks (see ``sinks``).
        softcap: if > 0, each logit s becomes ``softcap * tanh(s / softcap)``
            (Gemma 2's ``attn_logit_softcapping``), after scale and bias.
        q_offset: query s of every row is at ``q_offset + s``; a sequence
            gives one start per row. Default: the queries are the last
            ``q_len`` of each row's keys (``kv_len - q_len``, or
            ``kv_lengths[b] - q_len``).
        q_positions: explicit query positions, ``(batch, q_len)``,
            ``(1, q_len)`` or ``(q_len,)``; instead of ``q_offset``.
        k_offset, k_positions: the same for the keys (default offset 0).
        kv_lengths: valid keys per row, ``(batch,)``; keys past it are never
            seen (a batch of caches of different lengths).

    Returns:
        ``out`` ``[batch, q_len, q_heads, v_dim]`` in q's dtype. A query that
        sees no key gets zeros.

    Raises:
        ValueError: ``[attention] parameter = value: rule``, e.g.
            ``[attention] mask.window = -1: must be >= 0 (0: no window)``.
    """
    return _call(False, q, k, v, encoding, causal, window, sinks, softmax_scale, logn_train_length,
                 sink_logits, softcap, q_offset, q_positions, k_offset, k_positions, kv_lengths)


def _reference_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, **options: Any) -> np.ndarray:
    """:func:`posenc.attention` on the float64 reference: every score row
    materialized, each encoding by its own definition (ReRoPE as two score
    matrices selected by ``p - j < window``), one rounding to the output
    dtype at the end. Single-threaded and slow; same arguments and rules."""
    bound = _ATTENTION_SIGNATURE.bind(q, k, v, **options)  # the same keywords and defaults
    bound.apply_defaults()
    return _call(True, *bound.arguments.values())


_ATTENTION_SIGNATURE = inspect.signature(attention)
_reference_attention.__signature__ = _ATTENTION_SIGNATURE  # type: ignore[attr-defined]


_reference_attention.__name__ = "attention"
_reference_attention.__qualname__ = "attention"
