"""Hugging Face models through posenc: one call runs every attention layer of a
loaded ``transformers`` Llama-family model (Llama, Mistral, Qwen2) on
posenc's kernel under any context-extension method, ReRoPE, Leaky ReRoPE,
the Λ mask and Self-Extend included, which transformers does not have::

    import posenc.hf
    model = transformers.AutoModelForCausalLM.from_pretrained(...)
    posenc.hf.apply(model, "self-extend", target_length=16384)
    model.generate(input_ids, max_new_tokens=64)          # KV cache, padding masks as usual
    posenc.hf.remove(model)                               # HF's own attention again

The patched layer projects q, k and v with the model's own weights and hands
posenc the **unrotated** keys: the cache (HF's ``DynamicCache``) stores them
so, and each call rotates them at their positions inside the kernel. That is
what ReRoPE and Self-Extend need (a key is read at more than one position)
and what keeps every method one pass. The method is planned once, for
``target_length``, exactly as :class:`posenc.LlamaModel` plans it
(:func:`posenc.extension_attention`), so the two engines compute one
function: the tests hold HF-patched perplexity to posenc's own.

Positions: each query sits at its ``position_ids`` (HF's: ``cache_position``
by default, the left-padding-aware ids in ``generate``); each cached key
keeps the position it was inserted at (a record kept beside the cache).
Padding keys (those HF's mask hides from the last query) are never seen.
Gradients flow through :func:`posenc.torch.attention` (materialized
backward: training sizes). float32, float16 and bfloat16 models.
"""

from __future__ import annotations

import types
from typing import Any, Dict, Optional

import numpy as np
import torch

from . import model as _model
from . import rope as _rope
from . import torch as _torch

__all__ = ["apply", "remove", "SUPPORTED"]

#: The attention classes posenc patches (transformers 4.49): q_proj, k_proj,
#: v_proj, o_proj, RoPE given as position_embeddings, a layer_idx.
SUPPORTED = ("LlamaAttention", "MistralAttention", "Qwen2Attention")


def _decoder_layers(model) -> list:
    for owner in (getattr(model, "model", None), model):
        layers = getattr(owner, "layers", None)
        if isinstance(layers, torch.nn.ModuleList) and len(layers) > 0:
            return list(layers)
    raise ValueError(f"[hf] model = a {type(model).__name__}: has no decoder layers at model.model.layers or "
                     f"model.layers (posenc.hf patches Llama-family models: {', '.join(SUPPORTED)})")


def _model_window(attn, config) -> int:
    """The model's own sliding window for this layer (0: none)."""
    window = getattr(config, "sliding_window", None) or 0
    if type(attn).__name__ == "Qwen2Attention":
        uses = getattr(config, "use_sliding_window", False) and attn.layer_idx >= getattr(config, "max_window_layers", 0)
        window = window if uses else 0
    return int(window)


def apply(model, method: str = "none", *, target_length: Optional[int] = None,
          train_length: Optional[int] = None):
    """Runs every attention layer of ``model`` through posenc under ``method``.

    Args:
        model: a loaded ``transformers`` model whose attention layers are
            one of :data:`SUPPORTED` (``LlamaForCausalLM``, ``LlamaModel``,
            Mistral, Qwen2).
        method: a context-extension method in posenc's text form
            (``"none"``, ``"yarn"``, ``"rerope:window=512"``,
            ``"self-extend:group=8,window=1024"``, ``"lambda,logn"``, ...;
            :mod:`posenc.model` lists them).
        target_length: the longest sequence the model will see; the
            method's defaults (YaRN's factor, Self-Extend's group, ...) come
            from it and ``train_length``. Required unless ``method`` is
            ``"none"``.
        train_length: the training length (default
            ``config.max_position_embeddings``).

    Returns:
        ``model`` (patched in place; :func:`remove` undoes it).

    Raises:
        ValueError: a model posenc cannot patch (naming the layer's class),
            a method invalid for the model's RoPE (a model whose config
            already scales its RoPE takes only ``"none"``), a sliding-window
            model with a method that sets its own window.
    """
    config = model.config
    layers = _decoder_layers(model)
    for index, layer in enumerate(layers):
        attn = getattr(layer, "self_attn", None)
        name = type(attn).__name__
        if name not in SUPPORTED:
            raise ValueError(f"[hf] layers[{index}].self_attn = a {name}: posenc patches {', '.join(SUPPORTED)} "
                             f"(q_proj/k_proj/v_proj/o_proj projections and RoPE from position_embeddings)")
    spec = _rope.RopeSpec.from_hf_config(config.to_dict())
    train = int(train_length if train_length is not None else config.max_position_embeddings)
    if target_length is None:
        if method.split(":")[0].split(",")[0] != "none":
            raise ValueError(f"[hf] target_length = None: must be given for method {method!r} (its defaults "
                             f"come from the longest sequence it must serve)")
        target_length = train
    plan = _model.extension_attention(method, spec, train_length=train, target_length=int(target_length))
    remove(model)
    for layer in layers:
        attn = layer.self_attn
        kwargs: Dict[str, Any] = dict(plan)
        window = _model_window(attn, config)
        if window and plan["window"]:
            raise ValueError(f"[hf] method = {method!r}: sets a window of {plan['window']} on a model with its own "
                             f"sliding_window = {window}; use a method without a mask")
        if window:
            kwargs["window"] = window
        attn._posenc_kwargs = kwargs
        attn._posenc_original_forward = attn.forward
        attn.forward = types.MethodType(_forward, attn)
    model._posenc_method = method
    return model


def remove(model):
    """Gives ``model`` back its own attention (no-op if not patched)."""
    for layer in _decoder_layers(model):
        attn = getattr(layer, "self_attn", None)
        if attn is not None and hasattr(attn, "_posenc_original_forward"):
            attn.forward = attn._posenc_original_forward
            del attn._posenc_original_forward, attn._posenc_kwargs
    if hasattr(model, "_posenc_method"):
        del model._posenc_method
    return model


def _key_positions(cache, layer: int, past: int, positions: torch.Tensor) -> torch.Tensor:
    """The positions [batch, kv_len] of the cache's keys after this call adds
    `positions` [batch, q_len]: a record kept on the cache object."""
    record = cache.__dict__.setdefault("_posenc_key_positions", {})
    previous = record.get(layer) if past > 0 else None
    if past > 0 and (previous is None or previous.shape[1] != past):
        raise ValueError(f"[hf] past_key_value: layer {layer} holds {past} keys that posenc.hf did not insert "
                         f"(a cache filled before posenc.hf.apply, or cropped/reordered since): start a new cache")
    record[layer] = positions if previous is None else torch.cat([previous, positions], dim=1)
    return record[layer]


def _padding(mask: Optional[torch.Tensor], batch: int, kv_len: int) -> Optional[torch.Tensor]:
    """[batch, kv_len] True where a key is padding: hidden by HF's mask
    (4-D additive or boolean, or 2-D 1/0) from every query of the call. (A
    key some query sees is left to posenc's own causal and window masks.)"""
    if mask is None:
        return None
    if mask.dim() == 4:
        rows = mask[:, 0, :, :kv_len]
        hidden = (~rows if rows.dtype == torch.bool else rows < 0).all(dim=1)
    elif mask.dim() == 2:
        hidden = mask[:, -kv_len:] == 0
    else:
        raise ValueError(f"[hf] attention_mask.shape = {tuple(mask.shape)}: must have 2 or 4 axes")
    return hidden.expand(batch, kv_len) if hidden.any() else None


def _forward(self, hidden_states: torch.Tensor, position_embeddings=None, attention_mask=None,
             past_key_value=None, cache_position=None, **kwargs):
    """The patched attention: q, k, v [batch, seq, heads, head_dim] from the
    model's projections, unrotated keys into the cache, posenc's attention."""
    if self.training and getattr(self, "attention_dropout", 0.0) > 0:
        raise ValueError(f"[hf] attention_dropout = {self.attention_dropout}: posenc.hf has no attention dropout; "
                         f"set config.attention_dropout = 0 to train through it")
    batch, seq, _ = hidden_states.shape
    shape = (batch, seq, -1, self.head_dim)
    q = self.q_proj(hidden_states).view(shape).transpose(1, 2)  # [batch, heads, seq, head_dim]
    k = self.k_proj(hidden_states).view(shape).transpose(1, 2)
    v = self.v_proj(hidden_states).view(shape).transpose(1, 2)
    positions = kwargs.get("position_ids")
    if positions is None:
        positions = cache_position if cache_position is not None else torch.arange(seq)
    positions = positions.reshape(-1, seq).expand(batch, seq).to(torch.int64)
    if past_key_value is not None:
        if type(past_key_value).__name__ != "DynamicCache":
            raise ValueError(f"[hf] past_key_value = a {type(past_key_value).__name__}: posenc.hf keeps unrotated "
                             f"keys in a DynamicCache (the default of generate)")
        past = past_key_value.get_seq_length(self.layer_idx)
        k, v = past_key_value.update(k, v, self.layer_idx, {"cache_position": cache_position})
        key_positions = _key_positions(past_key_value, self.layer_idx, past, positions)
    else:
        key_positions = positions
    key_positions = key_positions.numpy().copy()
    pads = _padding(attention_mask, batch, k.shape[2])
    if pads is not None:  # past every query: the causal mask hides them
        key_positions[pads.numpy()] = int(max(key_positions.max(), positions.max())) + 1
    dtype = q.dtype
    out = _torch.attention(q, k.to(dtype), v.to(dtype), layout="bhsd", softmax_scale=self.scaling,
                           q_positions=positions.numpy(), k_positions=key_positions, **self._posenc_kwargs)
    out = out.transpose(1, 2).reshape(batch, seq, -1)
    return self.o_proj(out), None
