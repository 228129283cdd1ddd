"""Attention with positional encodings, on NumPy arrays.

One call computes ``softmax(scale * q.k + bias) v`` over every query and
head with the C++ tiled kernel (online softmax: no ``q_len x kv_len`` matrix
is ever stored, SIMD, multithreaded, GIL released)::

    q    [batch, q_len,  q_heads,  head_dim]
    k    [batch, kv_len, kv_heads, head_dim]     q_heads a multiple of kv_heads (GQA, MQA)
    v    [batch, kv_len, kv_heads, v_dim]
    out  [batch, q_len,  q_heads,  v_dim]        (returned, q's dtype)

(``layout="bhsd"``: Hugging Face's ``[batch, heads, seq, dim]`` for all
four, read as strided views; ``layout=`` is required when the shapes fit
both orders, e.g. equal head counts and lengths.) float32, float16 or ``ml_dtypes.bfloat16``, or
PyTorch and other DLPack tensors of those; any strides with a contiguous
last axis (slices of a fused QKV projection need no copy). Arithmetic is
float32 whatever the storage type.

The positional encoding is one of the classes below (``encoding=None`` is
NoPE); masks, log-n scaling, sink logits and soft-capping combine with any
of them:

* :class:`RopeEncoding` rotates q and k by their positions inside the call
  (pass them unrotated).
* :class:`ReRopeEncoding`: ReRoPE / Leaky ReRoPE (Su Jianlin 2023).
* :class:`SelfExtendEncoding`: Self-Extend (Jin et al. 2024, LongLM): exact
  RoPE inside a neighbour window, grouped positions beyond it.
* :class:`AlibiEncoding`: ALiBi slopes per query head.
* :class:`T5BiasEncoding`: T5's bucketed relative bias.
* :class:`ShawEncoding`: Shaw et al. / BERT learned relative keys and values.
* :class:`UrpeEncoding`: URPE (Luo et al. 2022): T5's bias plus a Toeplitz
  weight on each probability.

Each class is the C++ struct of the same name (``posenc/attention.h``), and
``None`` is its ``NoPositionEncoding``.

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
    >>> out = posenc.attention(q, k, v, encoding=posenc.RopeEncoding(spec))   # query at position 9
    >>> out.shape
    (1, 1, 32, 128)
    >>> ref = posenc.reference.attention(q, k, v, encoding=posenc.RopeEncoding(spec))
    >>> bool(np.abs(out - ref).max() < 1e-5)
    True
"""

# The function and the classes are bound in C++ (python/src/bind_attention.cc:
# keyword-only arguments, converted and checked there and by the library);
# this module is their home and holds their overview.

from typing import Union

from ._posenc import (AlibiEncoding, ReRopeEncoding, RopeEncoding, SelfExtendEncoding, ShawEncoding, T5BiasEncoding,
                      UrpeEncoding, attention)
from . import _deprecated, _layout, _tensors
from .rope import RopeSpec

__all__ = [
    "AlibiEncoding",
    "ReRopeEncoding",
    "RopeEncoding",
    "SelfExtendEncoding",
    "T5BiasEncoding",
    "ShawEncoding",
    "UrpeEncoding",
    "attention",
]

#: What ``attention(..., encoding=...)`` takes.
Encoding = Union[None, RopeSpec, RopeEncoding, ReRopeEncoding, SelfExtendEncoding, AlibiEncoding, T5BiasEncoding,
                 ShawEncoding, UrpeEncoding]

#: The names before posenc took the C++ ones (issue 50), one release more.
RENAMED = {old + "Attention": f"posenc.attention.{old}Encoding"
           for old in ("Rope", "ReRope", "SelfExtend", "Alibi", "T5Bias", "Shaw")}
__getattr__ = _deprecated.renamed(__name__, RENAMED)

# The layout keyword (_layout.py); tensors (PyTorch, any DLPack array) in,
# the caller's kind out (_tensors.py).
attention = _layout.with_layout(attention, "attention", 0, _layout.attention_fits, count=3)
_tensors.wrap_functions(globals(), ["attention"])
