"""posenc.torch.PositionScheme: a positional scheme of posenc's tiny trainer
(every one of ``posenc train --pe``: NoPE, sinusoidal, learned, Shaw, T5,
ALiBi, RoPE, KERPLE, FIRE, XLNet, DeBERTa, complex order, URPE, FLOATER) as
a PyTorch module whose parameters are the scheme's tensors.

A scheme acts at up to three places (scheme_trainer.h), and the module has
one method for each: :meth:`embed` (the input rows: token rows times the
embedding scale plus the positions' rows, or the scheme's own rows),
:meth:`layer_positions` (rows added to each layer's attention input) and
``forward`` (causal attention with the scheme's terms, q and k rotated
first for RoPE). What the scheme computes from its tensors (the rows, the
attention terms: a bias per distance, per (position, distance), relative
tables read by q, by k and added to v, a key bias, a weight on the
probabilities) comes from the trainer's own code, and so does the gradient
of its tensors from the gradients of what it computed: PyTorch only
differentiates around them, the attention materialized
(``[batch, heads, T, T]``):

    s_ij = scale (q_i.k_j + u_h.k_j + q_i.A[i-j] + k_j.B[i-j]) + bias_h(i-j) + pair_h(i, i-j)
    o_i  = sum_{j <= i} softmax_j(s_ij) w_h(i-j) (v_j + C[i-j])

at positions 0..T-1, as the trainer runs a pass.
"""

from __future__ import annotations

import math
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np
import torch

from . import _args, _layout, _posenc
from . import rope as _rope

__all__ = ["PositionScheme"]

# LayerTerms' differentiable terms, in order.
_TERMS = ("distance_bias", "pair_bias", "query_table", "key_table", "value_table", "key_bias", "probability_weight")


def _values(term) -> np.ndarray:
    return term["values"] if isinstance(term, dict) else term


class _FromTrainer(torch.autograd.Function):
    """Arrays the trainer computed from the scheme's tensors, as tensors whose
    backward is the trainer's: ``backward(tensors by name, output grads) ->
    gradient by name``."""

    @staticmethod
    def forward(ctx, module: "PositionScheme", values: Sequence[np.ndarray], backward: Callable, *tensors):
        ctx.module, ctx.backward_fn = module, backward
        ctx.save_for_backward(*tensors)
        return tuple(torch.from_numpy(np.array(v, dtype=np.float64)) for v in values)

    @staticmethod
    def backward(ctx, *grads):
        tensors = ctx.saved_tensors
        outputs = [None if g is None else g.detach().double().contiguous().numpy() for g in grads]
        named = ctx.backward_fn(ctx.module._numpy(tensors), outputs)
        return (None, None, None) + tuple(torch.from_numpy(named[name]).to(t.dtype)
                                          for name, t in zip(ctx.module.names, tensors))


class PositionScheme(torch.nn.Module):
    """One of the tiny trainer's schemes, its tensors as parameters
    (initialized as the trainer initializes them).

    Args:
        scheme: a ``posenc train --pe`` name: ``"nope"``, ``"sinusoidal"``,
            ``"learned"``, ``"shaw"``, ``"t5"``, ``"alibi"``, ``"rope"``,
            ``"kerple"``, ``"fire"``, ``"xlnet"``, ``"deberta"``,
            ``"complex-order"``, ``"urpe"``, ``"floater"``.
        heads, head_dim: the attention's shape (the model width is their product).
        layers: how many layers' tensors (each layer has its own, except
            those the scheme shares, like T5's table).
        train_length: the training length the scheme is built for (table
            sizes, FIRE's normalization, ...).
        seed: the initialization's seed.
        **fields: the scheme's fields as ``posenc train`` names them
            (``t5_buckets=32``, ``fire_mlp_width=32``, ``shaw_clip=16``, ...).
    """

    def __init__(self, scheme: str, *, heads: int, head_dim: int, layers: int = 1, train_length: int,
                 seed: int = 0, **fields):
        super().__init__()
        self.scheme, self.heads, self.head_dim, self.layers = scheme, heads, head_dim, layers
        self._core = _posenc.SchemeCore(scheme, fields, heads, head_dim, layers, train_length)
        self.names = [name for name, _ in self._core.tensors()]
        init = self._core.init(seed)
        self.tensors = torch.nn.ParameterList(
            [torch.nn.Parameter(torch.from_numpy(np.array(init[name]))) for name in self.names])
        self.rotation = self._core.rotation()  # a posenc.RopeSpec for RoPE, else None

    def named_tensors(self) -> Dict[str, torch.nn.Parameter]:
        """The scheme's tensors by their checkpoint names (``blk.0.attn_kerple_r1.weight``, ...)."""
        return dict(zip(self.names, self.tensors))

    def _numpy(self, tensors) -> Dict[str, np.ndarray]:
        return {name: t.detach().float().numpy() for name, t in zip(self.names, tensors)}

    def _from_trainer(self, values: Sequence[np.ndarray], backward: Callable) -> tuple:
        return _FromTrainer.apply(self, values, backward, *self.tensors)

    def embed(self, tokens: torch.Tensor, token_embd: torch.Tensor) -> torch.Tensor:
        """The input rows ``[batch, T, d]`` of byte ids ``tokens [batch, T]``
        (integers in [0, 255]) at positions 0..T-1: ``token_embd[tokens] *
        scale + positions[t]``, or the scheme's own rows (complex order;
        token_embd is then the output projection only). T is bounded as
        ``forward``'s length is (a learned table's rows)."""
        batch, length = tokens.shape
        d = self.heads * self.head_dim
        core, named = self._core, self._numpy(self.tensors)
        # Checked, not cast: a cast to uint8 would read token 300 as 44 and -1 as 255.
        inputs = _args.int64_array("scheme", "tokens", tokens.detach().cpu().numpy(), low=0, high=255,
                                   rule="must be a byte id in [0, 255]").astype(np.uint8).reshape(-1)
        positions = np.arange(length, dtype=np.int64)
        own = core.input_embedding(named, inputs, positions)
        if own is not None:
            (rows,) = self._from_trainer(
                [own], lambda t, g: core.input_embedding_backward(t, inputs, positions, g[0]))
            return rows.view(batch, length, d).to(token_embd.dtype)
        x = token_embd[tokens] * core.embedding_scale()
        table = core.input_positions(named, length)
        if table is None:
            return x
        (rows,) = self._from_trainer([table], lambda t, g: core.input_positions_backward(t, length, g[0]))
        return x + rows.view(length, d).to(x.dtype)

    def layer_positions(self, length: int) -> Optional[List[torch.Tensor]]:
        """Each layer's rows ``[T, d]`` added to its attention input after
        the norm (FLOATER), or None."""
        core = self._core
        rows = core.layer_input_positions(self._numpy(self.tensors), length)
        if not rows:
            return None
        out = self._from_trainer(
            rows, lambda t, g: core.layer_input_positions_backward(
                t, length, [np.zeros(r.size) if x is None else x for r, x in zip(rows, g)]))
        return [r.view(length, -1) for r in out]

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layer: int = 0,
                layout: Optional[str] = None) -> torch.Tensor:
        """Causal attention of layer `layer` under the scheme: q, k, v
        ``[batch, T, heads, head_dim]`` (or ``layout="bhsd"``), one dtype;
        the output in the same layout."""
        layout = _layout.resolve("scheme", layout, _layout.attention_fits, (q, k, v), {})
        qh, kh, vh = (x if layout == "bhsd" else x.transpose(1, 2) for x in (q, k, v))
        batch, heads, length, head_dim = qh.shape
        if (heads, head_dim) != (self.heads, self.head_dim) or kh.shape != qh.shape or vh.shape[:3] != qh.shape[:3]:
            raise ValueError(f"[scheme] q, k, v shapes {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}: must "
                             f"be self-attention of {self.heads} heads of {self.head_dim} (layout {layout!r})")
        if not 0 <= layer < self.layers:
            raise ValueError(f"[scheme] layer = {layer}: must be in [0, layers = {self.layers})")
        if self.rotation is not None:
            from .torch import apply_rope  # posenc.torch imports this module
            qh, kh = apply_rope(self.rotation, qh, kh, layout="bhsd")
        core = self._core
        meta = core.terms(self._numpy(self.tensors), layer, length)
        present = [name for name in _TERMS if name in meta]
        terms = self._from_trainer(
            [_values(meta[name]) for name in present],
            lambda t, g: core.backward(t, layer, length, {n: x for n, x in zip(present, g) if x is not None}))
        out = _materialized(qh, kh, vh, meta, dict(zip(present, terms)))
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
    terms = {name: t.to(q.dtype) for name, t in terms.items()}
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
