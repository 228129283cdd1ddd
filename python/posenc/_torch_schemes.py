"""posenc.torch.SchemeAttention: a trainable positional scheme of posenc's
tiny trainer (KERPLE, FIRE, T5, Shaw, XLNet, DeBERTa, URPE, ALiBi, NoPE)
as a PyTorch module whose parameters are the scheme's tensors.

The scheme's terms of a layer (a bias per distance, per (position,
distance), relative tables read by q, by k and added to v, a key bias, a
weight on the probabilities: scheme_trainer.h's LayerTerms) come from the
trainer's own code, and so does the gradient of its tensors from the terms'
gradients (its LayerBackward): PyTorch only differentiates the attention
that reads the terms, materialized (``[batch, heads, T, T]``):

    s_ij = scale (q_i.k_j + u_h.k_j + q_i.A[i-j] + k_j.B[i-j]) + bias_h(i-j) + pair_h(i, i-j)
    o_i  = sum_{j <= i} softmax_j(s_ij) w_h(i-j) (v_j + C[i-j])

Causal self-attention at positions 0..T-1, as the trainer runs it.
"""

from __future__ import annotations

import math
from typing import Dict, Optional

import numpy as np
import torch

from . import _layout, _posenc

__all__ = ["SchemeAttention", "ATTENTION_SCHEMES"]

#: The schemes whose positional information lives in the attention. (RoPE:
#: posenc.torch.attention with a RopeAttention; sinusoidal, learned, complex
#: order and FLOATER act on the input embeddings.)
ATTENTION_SCHEMES = ("nope", "alibi", "t5", "shaw", "kerple", "fire", "xlnet", "deberta", "urpe")

# LayerTerms' differentiable terms, in order.
_TERMS = ("distance_bias", "pair_bias", "query_table", "key_table", "value_table", "key_bias", "probability_weight")


def _values(term) -> np.ndarray:
    return term["values"] if isinstance(term, dict) else term


class _Terms(torch.autograd.Function):
    """The scheme's tensors -> its terms (forward: the trainer's Layer,
    computed by the caller and passed in; backward: its LayerBackward)."""

    @staticmethod
    def forward(ctx, module: "SchemeAttention", layer: int, length: int, terms: dict, *tensors):
        ctx.module, ctx.layer, ctx.length = module, layer, length
        ctx.save_for_backward(*tensors)
        return tuple(torch.from_numpy(np.array(_values(terms[name]))) if name in terms else torch.zeros(0,
                                                                                                       dtype=torch.float64)
                     for name in _TERMS)

    @staticmethod
    def backward(ctx, *grads):
        tensors = ctx.saved_tensors
        named = ctx.module._numpy(tensors)
        dterms = {name: g.detach().double().numpy() for name, g in zip(_TERMS, grads) if g is not None and g.numel()}
        out = ctx.module._core.backward(named, ctx.layer, ctx.length, dterms)
        return (None, None, None, None) + tuple(torch.from_numpy(out[name]).to(t.dtype)
                                                for name, t in zip(ctx.module.names, tensors))


class SchemeAttention(torch.nn.Module):
    """Causal attention under one of the trainer's schemes, with its tensors
    as parameters (initialized as the trainer initializes them).

    Args:
        scheme: one of :data:`ATTENTION_SCHEMES`.
        heads, head_dim: the attention's shape.
        layers: how many layers' tensors (each layer has its own, except
            those the scheme shares, like T5's table).
        train_length: the training length the scheme is built for (FIRE's
            normalization, table sizes, ...).
        seed: the initialization's seed.
        **fields: the scheme's fields as ``posenc train`` names them
            (``t5_buckets=32``, ``fire_mlp_width=32``, ``shaw_clip=16``, ...).

    ``forward(q, k, v, layer=0, layout=None)``: q, k, v ``[batch, T, heads,
    head_dim]`` (or ``layout="bhsd"``), one dtype; returns the output in
    the same layout.
    """

    def __init__(self, scheme: str, *, heads: int, head_dim: int, layers: int = 1, train_length: int,
                 seed: int = 0, **fields):
        super().__init__()
        if scheme not in ATTENTION_SCHEMES:
            raise ValueError(f"[scheme] scheme = {scheme!r}: must be one of {', '.join(ATTENTION_SCHEMES)} (rope: "
                             f"posenc.torch.attention with a RopeAttention; sinusoidal, learned, complex-order and "
                             f"floater act on the input embeddings, not the attention)")
        self.scheme, self.heads, self.head_dim, self.layers = scheme, heads, head_dim, layers
        self._core = _posenc.SchemeCore(scheme, fields, heads, head_dim, layers, train_length)
        self.names = [name for name, _ in self._core.tensors()]
        init = self._core.init(seed)
        self.tensors = torch.nn.ParameterList(
            [torch.nn.Parameter(torch.from_numpy(np.array(init[name]))) for name in self.names])

    def named_tensors(self) -> Dict[str, torch.nn.Parameter]:
        """The scheme's tensors by their checkpoint names (``blk.0.attn_kerple_r1.weight``, ...)."""
        return dict(zip(self.names, self.tensors))

    def _numpy(self, tensors) -> Dict[str, np.ndarray]:
        return {name: t.detach().float().numpy() for name, t in zip(self.names, tensors)}

    def terms(self, layer: int, length: int):
        """(metadata dict, the terms as tensors in _TERMS order) of `layer`."""
        meta = self._core.terms(self._numpy(self.tensors), layer, length)
        return meta, _Terms.apply(self, layer, length, meta, *self.tensors)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layer: int = 0,
                layout: Optional[str] = None) -> torch.Tensor:
        layout = _layout.resolve("scheme", layout, _layout.attention_fits, (q, k, v), {})
        qh, kh, vh = (x if layout == "bhsd" else x.transpose(1, 2) for x in (q, k, v))
        batch, heads, length, head_dim = qh.shape
        if (heads, head_dim) != (self.heads, self.head_dim) or kh.shape != qh.shape or vh.shape[:3] != qh.shape[:3]:
            raise ValueError(f"[scheme] q, k, v shapes {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}: must "
                             f"be self-attention of {self.heads} heads of {self.head_dim} (layout {layout!r})")
        meta, terms = self.terms(layer, length)
        out = _materialized(qh, kh, vh, meta, dict(zip(_TERMS, terms)))
        return out if layout == "bhsd" else out.transpose(1, 2)


def _table(meta: dict, values: torch.Tensor, distance: torch.Tensor, heads: int) -> torch.Tensor:
    """A relative table read at each (i, j): [heads, T, T, width] or [T, T, width]."""
    rows = torch.from_numpy(np.asarray(meta["row_of_distance"]))[distance]
    if meta["per_head"]:
        return values.view(heads, meta["rows"], -1)[:, rows]
    return values.view(meta["rows"], -1)[rows]


def _materialized(q, k, v, meta: dict, terms: Dict[str, torch.Tensor]) -> torch.Tensor:
    """The attention of the module docstring; q, k, v [batch, heads, T, dim]."""
    heads, length, head_dim = q.shape[1], q.shape[2], q.shape[3]
    position = torch.arange(length)
    distance = (position[:, None] - position[None, :]).clamp(min=0)  # [T, T]; j > i is masked
    terms = {name: t.to(q.dtype) for name, t in terms.items() if t.numel()}
    content = q @ k.transpose(-1, -2)
    if "key_bias" in terms:
        content = content + torch.einsum("hd,bhjd->bhj", terms["key_bias"].view(heads, head_dim), k)[:, :, None, :]
    for name, side in (("query_table", q), ("key_table", k)):
        if name in terms:
            table = _table(meta[name], terms[name], distance, heads)
            index = "bhid" if name == "query_table" else "bhjd"
            content = content + torch.einsum(f"{index},{'hijd' if table.dim() == 4 else 'ijd'}->bhij", side, table)
    scale = meta["scale"] if meta["scale"] is not None else 1.0 / math.sqrt(head_dim)
    logits = scale * content
    if "distance_bias" in terms:
        logits = logits + terms["distance_bias"].view(heads, length)[:, distance]
    if "pair_bias" in terms:
        logits = logits + terms["pair_bias"].view(heads, length, length)[:, position[:, None], distance]
    causal = position[None, :] <= position[:, None]
    probs = torch.softmax(logits.masked_fill(~causal, -math.inf), dim=-1)
    if "probability_weight" in terms:
        probs = probs * terms["probability_weight"].view(heads, length)[:, distance]
    out = probs @ v
    if "value_table" in terms:
        table = _table(meta["value_table"], terms["value_table"], distance, heads)
        out = out + torch.einsum(f"bhij,{'hijd' if table.dim() == 4 else 'ijd'}->bhid", probs, table)
    return out
