"""Absolute and relative position encodings besides RoPE, on NumPy arrays.

Absolute (added to token embeddings ``[batch, seq, dim]``):

* :func:`sinusoidal_table`, :func:`add_sinusoidal`: the sinusoidal encodings
  of Vaswani et al., ``order="interleaved"`` (the paper: sin, cos, sin, ...)
  or ``"concat"`` (tensor2tensor, fairseq: all sines then all cosines),
  ``spacing="paper"`` (``w_k = base^(-2k/dim)``) or ``"endpoints"``
  (fairseq: ``base^(-k/(P-1))``). Angles are formed in float64.
* :class:`LearnedTable`: trained tables from ``.npy`` / ``.safetensors`` files
  (strict readers: a corrupt file raises ValueError), with OPT/BART's row
  offset and an out-of-range policy (``"error"``, ``"clamp"``,
  ``"hierarchical"`` for Su's decomposition to n^2 positions).

Relative (biases and terms inside attention):

* :func:`alibi_slopes`, :func:`alibi_bias`: ALiBi (head order, never sorted).
* :func:`t5_relative_bucket`, :func:`t5_bias`: T5's bucketed bias.
* :func:`xlnet_relative_encoding`, :func:`deberta_log_bucket`,
  :func:`deberta_relative_positions`: the position arithmetic of XLNet and
  DeBERTa.

The float64 attention references of these forms (Shaw/BERT relative keys,
T5, ALiBi, XLNet, DeBERTa) are in :mod:`posenc.reference`
(``posenc.reference.t5_attention``, ...).

Example::

    >>> import numpy as np, posenc
    >>> posenc.alibi_slopes(8)
    array([0.5       , 0.25      , 0.125     , 0.0625    , 0.03125   ,
           0.015625  , 0.0078125 , 0.00390625])
    >>> x = np.zeros((1, 3, 4), np.float32)
    >>> posenc.add_sinusoidal(x)[0, 1]
    array([0.84147096, 0.5403023 , 0.00999983, 0.99995   ], dtype=float32)
"""

from __future__ import annotations

import os
from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np

from . import _args, _posenc
from . import _deprecated, _tensors

__all__ = [
    "LearnedTable",
    "add_sinusoidal",
    "alibi_bias",
    "alibi_key_bias_from_mask",
    "alibi_slopes",
    "deberta_log_bucket",
    "deberta_relative_positions",
    "position_ids_from_mask",
    "sinusoidal_inv_freq",
    "sinusoidal_table",
    "t5_bias",
    "t5_relative_bucket",
    "xlnet_relative_encoding",
]


def _embedding_views(x: np.ndarray, out: Optional[np.ndarray], name: str) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(result, in4, out4): 4-D [batch, seq, rows, dim] views of x and the output."""
    x = np.asarray(x)
    if x.ndim not in (3, 4):
        raise ValueError(f"[{name}] x.ndim = {x.ndim}: must be 3 ([batch, seq, dim]) or 4 ([batch, seq, rows, dim])")
    if out is None:
        out = np.empty_like(x)
    elif out.shape != x.shape:
        raise ValueError(f"[{name}] out.shape = {out.shape}: must equal x.shape {x.shape}")
    as4 = (lambda a: a[:, :, None, :]) if x.ndim == 3 else (lambda a: a)
    return out, as4(x), as4(out)


def _positions(offset: int, offsets: Any, position_ids: Any, batch: int, seq: int, name: str):
    if offsets is not None and position_ids is not None:
        raise ValueError(f"[{name}] offsets = given: give offsets or position_ids, not both")
    offs = None if offsets is None else _positions_array(name, "offsets", offsets).reshape(-1)
    ids = None
    if position_ids is not None:
        ids = _positions_array(name, "position_ids", position_ids)
        if ids.ndim == 1 and batch == 1:
            ids = ids[None]
        if ids.shape != (batch, seq):
            raise ValueError(f"[{name}] position_ids.shape = {ids.shape}: must be (batch, seq) = {(batch, seq)}")
        ids = ids.reshape(-1)
    return _args.integer(name, "offset", offset), offs, ids


def _positions_array(op: str, name: str, value: Any) -> np.ndarray:
    """Token positions (or relative positions) as int64, any shape."""
    return _args.int64_array(op, name, value, dtype_rule="must be an integer type (token positions)")


# ---- sinusoidal -------------------------------------------------------------------


def sinusoidal_inv_freq(dim: int, *, order: str = "interleaved", spacing: str = "paper",
                        base: float = 10000.0) -> np.ndarray:
    """The frequencies w_k (k < dim // 2), float64."""
    return _posenc.sinusoidal_inv_freq(_args.integer("sinusoidal", "dim", dim), order, spacing, float(base))


def sinusoidal_table(dim: int, positions: Union[int, Sequence[float], np.ndarray], *, start: int = 0,
                     order: str = "interleaved", spacing: str = "paper", base: float = 10000.0) -> np.ndarray:
    """Sinusoidal encodings, float64 ``[len(positions), dim]``.

    ``positions`` is a count (positions ``start .. start + n - 1``) or any
    real positions (negative ones too, as XLNet uses). An odd ``dim`` ends in a
    column of zeros.
    """
    dim = _args.integer("sinusoidal", "dim", dim)
    if isinstance(positions, (int, np.integer)):
        count = _args.integer("sinusoidal", "positions", positions)
        positions = float(_args.integer("sinusoidal", "start", start)) + np.arange(count, dtype=np.float64)
    return _posenc.sinusoidal_table(dim, order, spacing, float(base),
                                    np.asarray(positions, dtype=np.float64).reshape(-1))


def add_sinusoidal(x: np.ndarray, *, offset: int = 0, offsets: Optional[Sequence[int]] = None,
                   position_ids: Optional[Any] = None, input_scale: float = 1.0, order: str = "interleaved",
                   spacing: str = "paper", base: float = 10000.0, out: Optional[np.ndarray] = None,
                   inplace: bool = False, reference: bool = False) -> np.ndarray:
    """``input_scale * x + PE(position)`` for embeddings ``x [batch, seq, dim]``
    (or ``[batch, seq, rows, dim]``), float32/float16/bfloat16.

    Positions: token s of every row at ``offset + s``; or ``offsets[b] + s``;
    or ``position_ids[b, s]`` (left padding: see :func:`position_ids_from_mask`).
    ``inplace=True`` writes into ``x`` (refused where two of its elements
    share memory, as in a broadcast view; ``out`` must not overlap ``x``).
    ``reference=True`` runs the float64 scalar reference instead of the SIMD
    kernel.
    """
    x = np.asarray(x)
    result, in4, out4 = _embedding_views(x, x if inplace else out, "sinusoidal")
    off, offs, ids = _positions(offset, offsets, position_ids, x.shape[0], x.shape[1], "sinusoidal")
    _posenc.add_sinusoidal(x.shape[-1], order, spacing, float(base), in4, out4, off, offs, ids,
                           float(input_scale), bool(reference))
    return result


# ---- learned tables ---------------------------------------------------------------


class LearnedTable:
    """A learned absolute position table ``[rows, dim]`` (held as float32).

    Build it from an array, or load a ``.npy`` (2-D, C order, ``<f4``,
    ``<f2``, ``<f8``) or ``.safetensors`` file (F32, F16, BF16, F64; name the
    tensor unless the file holds one). Lookups take ``row_offset`` (OPT/BART:
    2) and ``out_of_range``: ``"error"`` (positions past the table raise),
    ``"clamp"`` (the last row), ``"hierarchical"`` (Su's decomposition with
    ``alpha``; positions 0..n-1 are the table's rows exactly, up to n^2).

    Example::

        >>> import numpy as np, posenc
        >>> t = posenc.LearnedTable(np.arange(8, dtype=np.float32).reshape(4, 2))
        >>> t.lookup([0, 3])
        array([[0., 1.],
               [6., 7.]], dtype=float32)
        >>> t.lookup([5], out_of_range="hierarchical")    # 5 = 1 * 4 + 1: u_1
        array([[3.3333333, 4.3333335]], dtype=float32)
    """

    def __init__(self, values: Any):
        self._core = values if isinstance(values, _posenc.LearnedTable) else _posenc.LearnedTable(
            np.asarray(values, dtype=np.float32))

    @classmethod
    def load(cls, path: Union[str, os.PathLike], tensor: Optional[str] = None) -> "LearnedTable":
        """Reads a ``.npy`` or ``.safetensors`` file (by extension)."""
        return cls(_posenc.LearnedTable.load(os.fspath(path), tensor or ""))

    @classmethod
    def from_bytes(cls, data: bytes, format: str, tensor: Optional[str] = None) -> "LearnedTable":
        """Parses file contents already in memory; ``format`` is ``"npy"`` or ``"safetensors"``."""
        return cls(_posenc.LearnedTable.from_bytes(bytes(data), format, tensor or ""))

    @property
    def rows(self) -> int:
        return self._core.rows

    @property
    def dim(self) -> int:
        return self._core.dim

    @property
    def source_dtype(self) -> str:
        """The file's element type (``"<f4"``, ``"BF16"``, ...), or ``"float32"``."""
        return self._core.source_dtype

    @property
    def values(self) -> np.ndarray:
        return self._core.values

    def capacity(self, *, row_offset: int = 0, out_of_range: str = "error", alpha: float = 0.4) -> Optional[int]:
        """How many positions are served (None: unbounded, under ``"clamp"``)."""
        c = self._core.capacity(_args.integer("learned_table", "row_offset", row_offset), out_of_range,
                                float(alpha))
        return None if c == np.iinfo(np.int64).max else c

    def lookup(self, positions: Any, *, row_offset: int = 0, out_of_range: str = "error",
               alpha: float = 0.4) -> np.ndarray:
        """Encodings of ``positions`` (any shape), float32 ``[*positions.shape, dim]``."""
        p = _positions_array("learned_table", "positions", positions)
        row_offset = _args.integer("learned_table", "row_offset", row_offset)
        rows = self._core.lookup(np.ascontiguousarray(p.reshape(-1)), row_offset, out_of_range, float(alpha))
        return rows.reshape(p.shape + (self.dim,))

    def add(self, x: np.ndarray, *, offset: int = 0, offsets: Optional[Sequence[int]] = None,
            position_ids: Optional[Any] = None, input_scale: float = 1.0, row_offset: int = 0,
            out_of_range: str = "error", alpha: float = 0.4, out: Optional[np.ndarray] = None,
            inplace: bool = False, reference: bool = False) -> np.ndarray:
        """``input_scale * x + table[position + row_offset]`` for embeddings
        ``x [batch, seq, dim]``; positions as in :func:`add_sinusoidal`."""
        x = np.asarray(x)
        result, in4, out4 = _embedding_views(x, x if inplace else out, "learned_table")
        off, offs, ids = _positions(offset, offsets, position_ids, x.shape[0], x.shape[1], "learned_table")
        row_offset = _args.integer("learned_table", "row_offset", row_offset)
        self._core.add(in4, out4, off, offs, ids, float(input_scale), row_offset, out_of_range,
                       float(alpha), bool(reference))
        return result

    def __repr__(self) -> str:
        return f"LearnedTable(rows={self.rows}, dim={self.dim}, source_dtype={self.source_dtype!r})"


def position_ids_from_mask(mask: Any, pad_position: int = 0) -> np.ndarray:
    """Hugging Face's position ids for a left-padded batch: ``cumsum(mask) - 1``
    for tokens, ``pad_position`` for padding. ``mask [batch, seq]`` of 0/1."""
    return _posenc.position_ids_from_mask(np.asarray(mask, dtype=np.uint8),
                                          _args.integer("positions", "pad_position", pad_position))


# ---- ALiBi ------------------------------------------------------------------------


def alibi_slopes(heads: int, *, max_bias: float = 8.0, head_begin: int = 0,
                 head_count: Optional[int] = None) -> np.ndarray:
    """ALiBi slopes in head order (float64). A tensor-parallel shard passes the
    global ``heads`` and its ``head_begin``/``head_count``."""
    return _posenc.alibi_slopes(_args.integer("alibi", "heads", heads), float(max_bias),
                                _args.integer("alibi", "head_begin", head_begin),
                                _args.optional_integer("alibi", "head_count", head_count))


def alibi_bias(heads: int, q_len: int, k_len: int, *, query_offset: Optional[int] = None,
               form: str = "distance", max_bias: float = 8.0) -> np.ndarray:
    """The bias ``[heads, q_len, k_len]``: ``form="distance"`` gives
    ``-slope * |i - j|``, ``"key-position"`` BLOOM's ``slope * j``. Queries sit at
    ``query_offset + i`` (default ``k_len - q_len``)."""
    q_len, k_len = _args.integer("alibi", "q_len", q_len), _args.integer("alibi", "k_len", k_len)
    qo = (_args.integer("alibi", "query_offset (default k_len - q_len)", k_len - q_len) if query_offset is None
          else _args.integer("alibi", "query_offset", query_offset))
    return _posenc.alibi_bias(_args.integer("alibi", "heads", heads), float(max_bias), form, q_len, k_len, qo)


def alibi_key_bias_from_mask(heads: int, mask: Any, *, max_bias: float = 8.0) -> np.ndarray:
    """BLOOM's ``build_alibi_tensor``: ``slope * (cumsum(mask) - 1) * mask`` as
    ``[batch, heads, k_len]``."""
    return _posenc.alibi_key_bias_from_mask(_args.integer("alibi", "heads", heads), float(max_bias),
                                            np.asarray(mask, dtype=np.uint8))


# ---- T5 ---------------------------------------------------------------------------


def t5_relative_bucket(relative_position: Any, *, num_buckets: int = 32, max_distance: int = 128,
                       bidirectional: bool = True) -> np.ndarray:
    """T5 buckets (int64, same shape) of relative positions ``key - query``."""
    rel = _positions_array("t5_bias", "relative_position", relative_position)
    return _posenc.t5_relative_bucket(rel, _args.integer("t5_bias", "num_buckets", num_buckets),
                                      _args.integer("t5_bias", "max_distance", max_distance),
                                      bool(bidirectional))


def t5_bias(weights: Any, q_len: int, k_len: int, *, query_offset: int = 0, num_buckets: Optional[int] = None,
            max_distance: int = 128, bidirectional: bool = True) -> np.ndarray:
    """T5's bias ``[heads, q_len, k_len]`` from ``weights [num_buckets, heads]``
    (``relative_attention_bias.weight``); queries at ``query_offset + i``
    (Hugging Face's ``compute_bias``: 0, or ``cache_position[0]`` in decode)."""
    w = np.asarray(weights, dtype=np.float64)
    nb = w.shape[0] if num_buckets is None else _args.integer("t5_bias", "num_buckets", num_buckets)
    return _posenc.t5_bias(w, nb, _args.integer("t5_bias", "max_distance", max_distance), bool(bidirectional),
                           _args.integer("t5_bias", "q_len", q_len), _args.integer("t5_bias", "k_len", k_len),
                           _args.integer("t5_bias", "query_offset", query_offset))


# ---- XLNet, DeBERTa ---------------------------------------------------------------


def xlnet_relative_encoding(d_model: int, q_len: int, k_len: int, *, attn_type: str = "bi",
                            clamp_len: int = 0) -> np.ndarray:
    """XLNet's relative sinusoid ``[rows, d_model]`` for distances ``k_len,
    k_len - 1, ...`` down to ``-q_len + 1`` (``"bi"``) or 0 (``"uni"``)."""
    return _posenc.xlnet_relative_encoding(_args.integer("xlnet", "d_model", d_model),
                                           _args.integer("xlnet", "q_len", q_len),
                                           _args.integer("xlnet", "k_len", k_len), attn_type,
                                           _args.integer("xlnet", "clamp_len", clamp_len))


def deberta_log_bucket(relative_position: Any, bucket_size: int, max_position: int) -> np.ndarray:
    """DeBERTa's ``make_log_bucket_position`` (int64, same shape)."""
    return _posenc.deberta_log_bucket(_positions_array("deberta", "relative_position", relative_position),
                                      _args.integer("deberta", "bucket_size", bucket_size),
                                      _args.integer("deberta", "max_position", max_position))


def deberta_relative_positions(q_len: int, k_len: int, *, position_buckets: int = 256,
                               max_relative_positions: int = 512) -> np.ndarray:
    """DeBERTa's ``build_relative_position`` ``[q_len, k_len]`` (bucketed ``i - j``)."""
    return _posenc.deberta_relative_positions(_args.integer("deberta", "position_buckets", position_buckets),
                                              _args.integer("deberta", "max_relative_positions",
                                                            max_relative_positions),
                                              _args.integer("deberta", "q_len", q_len),
                                              _args.integer("deberta", "k_len", k_len))


# Tensors (PyTorch, any DLPack array) in, the caller's kind out (_tensors.py).
_tensors.wrap_functions(globals(), __all__)

#: The float64 attention references moved to posenc.reference under the C++
#: names (reference::T5Attention -> posenc.reference.t5_attention), one release more.
RENAMED = {f"{form}_attention_reference": f"posenc.reference.{form}_attention"
           for form in ("plain", "biased", "alibi", "t5", "shaw", "xlnet", "deberta")}
RENAMED["AttentionResult"] = "posenc.reference.RelativeAttentionResult"
__getattr__ = _deprecated.renamed(__name__, RENAMED)
