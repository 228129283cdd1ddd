"""The reference implementations: plain scalar C++ code in float64, kept
readable on purpose, the C++ ``posenc::reference`` functions under their
Python names. The fast functions are tested against these.

* :func:`apply_rope`, :func:`attention`: :func:`posenc.apply_rope` and
  :func:`posenc.attention` on the float64 reference (same arguments).
* ``*_attention`` (:func:`plain_attention`, :func:`biased_attention`,
  :func:`alibi_attention`, :func:`t5_attention`, :func:`shaw_attention`,
  :func:`xlnet_attention`, :func:`deberta_attention`): naive float64
  attention with materialized scores for each relative form, each by its
  paper's definition (``posenc/relative_attention.h``). q, k and v take
  ``layout=`` as :func:`posenc.attention` does (``"bshd"``
  ``[batch, seq, heads, dim]`` or ``"bhsd"`` ``[batch, heads, seq, dim]``,
  required when the shapes fit both); each returns a
  :class:`RelativeAttentionResult` ``(scores, probs, output)``, the output in
  the call's layout, scores and probs ``[batch, heads, q_len, k_len]``. The
  position tables keep their own shapes (XLNet's ``rel_k`` is
  ``[batch, heads, q_len + k_len, head_dim]``).

Example::

    >>> import numpy as np, posenc
    >>> spec = posenc.RopeSpec(head_dim=32)
    >>> x = np.random.default_rng(0).standard_normal((1, 7, 4, 32), dtype=np.float32)
    >>> fast = posenc.apply_rope(spec, x, offset=100, layout="bshd")
    >>> slow = posenc.reference.apply_rope(spec, x, offset=100, layout="bshd")
    >>> float(np.abs(fast - slow).max()) < 1e-6
    True
"""

from typing import NamedTuple

import numpy as np

from . import _args, _posenc
from ._posenc import reference as _reference
from . import _layout, _tensors

# The relative forms, as reference::PlainAttention ... reference::DebertaAttention are in C++.
_RELATIVE = ["plain_attention", "biased_attention", "alibi_attention", "t5_attention", "shaw_attention",
             "xlnet_attention", "deberta_attention"]
__all__ = ["apply_rope", "attention", "RelativeAttentionResult"] + _RELATIVE

#: :func:`posenc.apply_rope` on the scalar float64 reference kernel (bound in C++, same signature).
apply_rope = _reference.apply_rope
#: :func:`posenc.attention` on the float64 reference (bound in C++, same signature).
attention = _reference.attention


class RelativeAttentionResult(NamedTuple):
    """Materialized float64 attention: ``scores`` (logits before masking) and
    ``probs`` ``[batch, heads, q_len, k_len]``, ``output [batch, heads, q_len, value_dim]``."""

    scores: np.ndarray
    probs: np.ndarray
    output: np.ndarray


def _common(q, k, v, scale, causal, query_offset, key_padding):
    f = lambda a: np.asarray(a, dtype=np.float64)
    return dict(q=f(q), k=f(k), v=f(v), scale=None if scale is None else float(scale), causal=bool(causal),
                query_offset=_args.optional_integer("attention", "query_offset", query_offset),
                key_padding=None if key_padding is None else np.asarray(key_padding, dtype=np.uint8))


def plain_attention(q, k, v, *, scale=None, causal=False, query_offset=None, key_padding=None):
    """No positional term: ``softmax(scale * q k^T) v`` (scale default 1/sqrt(head_dim))."""
    return RelativeAttentionResult(*_posenc.plain_attention(**_common(q, k, v, scale, causal, query_offset,
                                                                      key_padding)))


def biased_attention(q, k, v, bias, *, scale=None, causal=False, query_offset=None, key_padding=None):
    """``scale * q k^T + bias``, bias ``[heads, q_len, k_len]`` or ``[batch, heads, q_len, k_len]``."""
    return RelativeAttentionResult(*_posenc.biased_attention(
        **_common(q, k, v, scale, causal, query_offset, key_padding), bias=np.asarray(bias, dtype=np.float64)))


def alibi_attention(q, k, v, *, form="distance", max_bias=8.0, scale=None, causal=False, query_offset=None,
                    key_padding=None):
    """ALiBi: ``scale * q k^T`` plus the bias of :func:`posenc.alibi_bias` (slopes from q's head count)."""
    return RelativeAttentionResult(*_posenc.alibi_attention(
        **_common(q, k, v, scale, causal, query_offset, key_padding), max_bias=float(max_bias), form=form))


def t5_attention(q, k, v, weights, *, max_distance=128, bidirectional=True, scale=None, causal=False,
                 query_offset=None, key_padding=None):
    """T5: ``q k^T`` (unscaled unless ``scale``) plus :func:`posenc.t5_bias`; weights ``[num_buckets, heads]``."""
    w = np.asarray(weights, dtype=np.float64)
    return RelativeAttentionResult(*_posenc.t5_attention(
        **_common(q, k, v, scale, causal, query_offset, key_padding), weights=w, num_buckets=w.shape[0],
        max_distance=_args.integer("t5_bias", "max_distance", max_distance), bidirectional=bool(bidirectional)))


def shaw_attention(q, k, v, *, max_distance, rel_k=None, rel_v=None, distance="key-minus-query", key_term=True,
                   query_term=False, scale=None, causal=False, query_offset=None, key_padding=None):
    """Shaw et al. / BERT relative keys (and values). Tables ``[2 max_distance + 1, dim]``
    indexed by the clipped distance + max_distance; ``distance="query-minus-key"``
    with ``max_distance = max_position_embeddings - 1`` is BERT's
    ``relative_key`` (add ``query_term=True`` for ``relative_key_query``)."""
    f = lambda a: None if a is None else np.asarray(a, dtype=np.float64)
    return RelativeAttentionResult(*_posenc.shaw_attention(
        **_common(q, k, v, scale, causal, query_offset, key_padding), rel_k=f(rel_k), rel_v=f(rel_v),
        max_distance=_args.integer("shaw", "max_distance", max_distance), distance=distance,
        key_term=bool(key_term), query_term=bool(query_term)))


def xlnet_attention(q, k, v, *, rel_k, r_w_bias, r_r_bias, r_s_bias=None, seg_embed=None, segment_differs=None,
                    scale=None, causal=False, key_padding=None):
    """XLNet relative attention. ``rel_k [batch, heads, q_len + k_len, head_dim]``
    (row m: distance ``k_len - m``, i.e. XLNet's ``k_head_r``), biases ``[heads, head_dim]``,
    optional segments: ``seg_embed [2, heads, head_dim]``, ``segment_differs [batch, q_len, k_len]``."""
    f = lambda a: None if a is None else np.asarray(a, dtype=np.float64)
    return RelativeAttentionResult(*_posenc.xlnet_attention(
        **_common(q, k, v, scale, causal, None, key_padding), rel_k=f(rel_k), r_w_bias=f(r_w_bias),
        r_r_bias=f(r_r_bias), r_s_bias=f(r_s_bias), seg_embed=f(seg_embed),
        segment_differs=None if segment_differs is None else np.asarray(segment_differs, dtype=np.uint8)))


def deberta_attention(q, k, v, *, pos_key=None, pos_query=None, position_buckets=256, max_relative_positions=512,
                      scale=None, causal=False, query_offset=None, key_padding=None):
    """DeBERTa disentangled attention: ``pos_key`` (c2p) and/or ``pos_query`` (p2c),
    each ``[heads, 2 * span, head_dim]``; default scale ``1/sqrt(head_dim * (1 + #terms))``."""
    f = lambda a: None if a is None else np.asarray(a, dtype=np.float64)
    return RelativeAttentionResult(*_posenc.deberta_attention(
        **_common(q, k, v, scale, causal, query_offset, key_padding), pos_key=f(pos_key), pos_query=f(pos_query),
        position_buckets=_args.integer("deberta", "position_buckets", position_buckets),
        max_relative_positions=_args.integer("deberta", "max_relative_positions", max_relative_positions)))


# q, k, v in either layout (_layout.py; these compute in [batch, heads, seq, dim]).
for _name in _RELATIVE:
    globals()[_name] = _layout.with_layout(globals()[_name], "attention", 0, _layout.attention_fits, count=3,
                                           native="bhsd")
del _name

# The layout keyword (_layout.py); tensors (PyTorch, any DLPack array) in,
# the caller's kind out (_tensors.py).
apply_rope = _layout.with_layout(apply_rope, "apply_rope", 1, _layout.rope_fits)
attention = _layout.with_layout(attention, "attention", 0, _layout.attention_fits, count=3)
_tensors.wrap_functions(globals(), __all__)
