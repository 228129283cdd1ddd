"""Hugging Face models through posenc: one call runs every attention layer of a
loaded ``transformers`` Llama-family model (Llama, Mistral, Qwen2, Phi-3)
under any context-extension method, ReRoPE, Leaky ReRoPE, the Λ mask and
Self-Extend included, which transformers does not have; on posenc's kernel
on the CPU, as torch operations on any other device (a model on CUDA)::

    import torch, posenc, posenc.hf
    path = "SmolLM2-135M-Instruct.Q4_1.gguf"                          # scripts/fetch-model
    tok = posenc.BpeTokenizer.from_gguf(path)
    model = posenc.hf.from_gguf(path)                                 # or from_pretrained(...)
    posenc.hf.apply(model, "self-extend", target_length=16384)
    prompt = torch.tensor([tok.encode("The GNU General Public License is")])
    out = model.generate(prompt, max_new_tokens=8, do_sample=False)   # KV cache, padding masks as usual
    ids = tok.encode(open("/usr/share/common-licenses/GPL-3").read())
    nll = posenc.hf.nll_by_position(model, ids, context=1024, max_windows=2)
    print(tok.decode(out[0, prompt.shape[1]:].tolist()), nll.mean(axis=0)[-8:])  # loss by position
    posenc.hf.remove(model)                                           # HF's own attention again

Entry points:

* :func:`apply` / :func:`remove`: patch a model's attention layers and undo it.
* :func:`from_gguf`: a GGUF file (llama, qwen2) as ``LlamaForCausalLM`` /
  ``Qwen2ForCausalLM``, read and dequantized by posenc (no gguf-py, no
  accelerate).
* :func:`nll_by_position`: an HF causal LM's next-token losses in windows,
  by position (perplexity, and the loss curve past the training length).

The patched layer projects q, k and v with the model's own weights and hands
posenc the **unrotated** keys: the cache (HF's ``DynamicCache``) stores them
so, and each call rotates them at their positions inside the kernel. That is
what ReRoPE and Self-Extend need (a key is read at more than one position)
and what keeps every method one pass. The method is planned once, for
``target_length``, exactly as :class:`posenc.DecoderModel` plans it
(:func:`posenc.extension_attention`), so the two engines compute one
function: the tests hold HF-patched perplexity to posenc's own. Method
``"none"`` is the model's own RoPE of each forward pass, as HF computes it
(LongRoPE's short or long factors and dynamic NTK's base follow the
pass's length).

Positions: each query sits at its ``position_ids`` (HF's: ``cache_position``
by default, the left-padding-aware ids in ``generate``); each cached key
keeps the position it was inserted at (a record kept beside the cache).
Padding keys (those HF's mask hides from every query of a call) are never
seen. Gradients flow through :func:`posenc.torch.attention` (materialized
backward: training sizes). float32, float16 and bfloat16 models.

Devices: a model on the CPU runs posenc's kernel; a model anywhere else
(CUDA, MPS) runs the same method as torch operations on its device
(:func:`posenc.torch.attention`'s torch backend: posenc's frequencies,
positions and masks, moved there; the attention materialized in blocks
of query rows, 512 MiB of scores at a time). ``apply(..., backend="torch")`` forces that
path on the CPU (the tests hold it to the kernel's).

Masks: posenc applies causality by position, padding, the model's own
sliding window and the method's mask; it takes no arbitrary bias. A 4-D
``attention_mask`` is therefore checked against that, and one that says
anything else (a packed sequence's block-diagonal mask, a prefix-LM mask,
an additive bias other than 0 and <= -1e4) is a ValueError, never silently
dropped: run packed sequences as separate rows with a 2-D padding mask.

Caches: a ``DynamicCache`` a patched layer has written holds unrotated keys,
which Hugging Face's own attention would read as rotated. posenc marks it:
after :func:`remove` (or from any unpatched attention) its ``update``
raises ValueError. Start a new cache, or :func:`apply` the model again.

Environment: transformers 4.49's ``generate`` imports
``torch.distributed.fsdp``, which torch 1.13 cannot import under Python 3.11
(a dataclass default Python 3.11 refuses). ``import posenc.hf`` installs a
one-line fix of that module (torch 2.0's own) where that can happen;
posenc/_hf_compat.py says what and why.
"""

from __future__ import annotations

import types
from typing import Any, Dict, Optional

import numpy as np
import torch

from . import _args, _hf_compat
from . import model as _model
from . import rope as _rope
from . import torch as _torch
from ._hf_gguf import from_gguf as _from_gguf

_hf_compat.install()  # before anything calls generate (the module docstring's "Environment")

__all__ = ["apply", "remove", "from_gguf", "nll_by_position", "SUPPORTED"]

#: The attention classes posenc patches (transformers 4.49): q_proj, k_proj,
#: v_proj (Phi-3: one fused qkv_proj), o_proj, RoPE given as
#: position_embeddings, a layer_idx. transformers 4.49 has no Gemma 3 class.
SUPPORTED = ("LlamaAttention", "MistralAttention", "Qwen2Attention", "Phi3Attention")


def _projections(attn, hidden_states: torch.Tensor):
    """q, k, v [batch, seq, heads * head_dim] from the layer's own weights:
    three projections, or Phi-3's fused one split as Phi3Attention splits it
    (q rows, then k's, then v's)."""
    if not hasattr(attn, "qkv_proj"):
        return attn.q_proj(hidden_states), attn.k_proj(hidden_states), attn.v_proj(hidden_states)
    qkv = attn.qkv_proj(hidden_states)
    q_size = attn.config.num_attention_heads * attn.head_dim
    kv_size = attn.num_key_value_heads * attn.head_dim
    return qkv[..., :q_size], qkv[..., q_size:q_size + kv_size], qkv[..., q_size + kv_size:]


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
          train_length: Optional[int] = None, backend: Optional[str] = None):
    """Runs every attention layer of ``model`` through posenc under ``method``.

    Args:
        model: a loaded ``transformers`` model whose attention layers are
            one of :data:`SUPPORTED` (``LlamaForCausalLM``, ``LlamaModel``,
            Mistral, Qwen2, Phi-3), on any device.
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
        backend: how each layer's attention runs
            (:func:`posenc.torch.attention`'s ``backend``): None (posenc's
            kernel for a model on the CPU, torch operations on the model's
            device otherwise: CUDA, MPS, ...), ``"kernel"`` or ``"torch"``.

    Returns:
        ``model`` (patched in place; :func:`remove` undoes it).

    Raises:
        ValueError: a model posenc cannot patch (naming the layer's class),
            a method invalid for the model's RoPE (a frequency method over
            a config's dynamic NTK: a model whose config scales its RoPE
            is extended on top of it, from the length its scaling states;
            docs/composition.md), a sliding-window
            model with a method that sets its own window. Later, in a
            forward pass: a 4-D ``attention_mask`` posenc cannot honour
            and a cache it does not know (the module docstring's Masks and
            Caches).
    """
    if backend is not None and backend not in _torch.BACKENDS:
        raise ValueError(f"[hf] backend = {backend!r}: must be None (the kernel on the CPU, torch operations "
                         f"elsewhere), {', '.join(map(repr, _torch.BACKENDS))}")
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
    if method.split(":")[0].split(",")[0] == "none":
        # The model's own RoPE as HF computes it: the frequencies of each
        # forward pass's length (LongRoPE's short or long factors, dynamic
        # NTK's base), not of target_length.
        plan["encoding"] = type(plan["encoding"])(spec)
    remove(model)
    for layer in layers:
        attn = layer.self_attn
        kwargs: Dict[str, Any] = dict(plan, backend=backend)
        window = _model_window(attn, config)
        if window and plan["window"]:
            raise ValueError(f"[hf] method = {method!r}: sets a window of {plan['window']} on a model with its own "
                             f"sliding_window = {window}; use a method without a mask")
        if window:
            kwargs["window"] = window
        attn._posenc_kwargs = kwargs
        # HF 4.49's eager mask hides keys past config.sliding_window even where
        # the layers do not use a window (Qwen2 with use_sliding_window=False);
        # posenc follows the layers, and the mask check allows that difference.
        attn._posenc_windows = (window, int(getattr(config, "sliding_window", None) or 0))
        # HF passes one mask to every layer, and every layer's keys sit at the
        # same positions: the first layer checks it for all.
        attn._posenc_checks_mask = layer is layers[0]
        attn._posenc_original_forward = attn.forward
        attn.forward = types.MethodType(_forward, attn)
    model._posenc_method = method
    return model


def remove(model):
    """Gives ``model`` back its own attention (no-op if not patched).

    A cache the patched model filled keeps posenc's unrotated keys and stays
    marked as posenc's: HF's attention refuses it (ValueError on its
    ``update``) rather than read those keys as rotated. Start a new cache.
    """
    for layer in _decoder_layers(model):
        attn = getattr(layer, "self_attn", None)
        if attn is not None and hasattr(attn, "_posenc_original_forward"):
            attn.forward = attn._posenc_original_forward
            del attn._posenc_original_forward, attn._posenc_kwargs, attn._posenc_windows, attn._posenc_checks_mask
    if hasattr(model, "_posenc_method"):
        del model._posenc_method
    return model


def from_gguf(path, **config):
    """A GGUF file as a Hugging Face model, in float32, eval mode, "eager"
    attention (the one transformers 4.49 runs on torch 1.13), ready for
    :func:`apply`.

    The file is read and dequantized by posenc (:class:`posenc.GgufFile`,
    bit for bit gguf-py's values); the model is what
    ``from_pretrained(dir, gguf_file=name)`` builds (tested tensor for
    tensor), without the ``accelerate`` package ``from_pretrained`` needs.

    Args:
        path: a GGUF of architecture ``llama`` (``LlamaForCausalLM``:
            SmolLM2, TinyLlama, Llama 2/3, Mistral-style; llama.cpp's
            interleaved Q/K rows are permuted back to HF's half-split
            order) or ``qwen2`` (``Qwen2ForCausalLM``). ``gemma3`` is
            refused: transformers 4.49 has no Gemma 3 class
            (:class:`posenc.DecoderModel` runs it).
        **config: fields of the HF config that override the file's, e.g.
            ``rope_scaling={"rope_type": "yarn", "factor": 4.0}`` or
            ``max_position_embeddings``.

    Returns:
        the model (a ``transformers`` ``PreTrainedModel``).

    Raises:
        ValueError: another architecture, a missing key, a tensor with no
            parameter in the model or of the wrong shape, a missing tensor,
            an override that is not a config field, and RoPE scaling in the
            file (``{arch}.rope.scaling.type``, ``rope_freqs.weight``)
            without a ``rope_scaling`` override saying it in HF's form.
    """
    return _from_gguf(path, **config)


def nll_by_position(model, tokens, *, context: int, max_windows: int = 0) -> np.ndarray:
    """An HF causal LM's next-token losses, window by window and position by
    position: ``nll[w, i] = -ln p(token i+1 | tokens 0..i)`` of window ``w``.

    The windows are :func:`posenc.perplexity`'s (``context`` tokens each,
    non-overlapping, from the first token, whole windows only; each one
    forward pass from position 0), so ``exp(nll.mean())`` is the perplexity
    it reports for the same tokens, and ``nll.mean(axis=0)`` is the loss by
    position: the curve that shows where a model stops extrapolating past
    its training length. Logits in the model's dtype, log-softmax in
    float64; no gradients. The model may be on any device.

    Args:
        model: a ``transformers`` causal LM (patched by :func:`apply` or not).
        tokens: token ids, any 1-D integer array-like, at least ``context``.
        context: window length, >= 2.
        max_windows: at most this many windows (0: all).

    Returns:
        float64 array ``[windows, context - 1]``.
    """
    ids = _model._tokens(tokens, "hf")
    context = _args.integer("hf", "context", context, allow_bool=False, low=2, rule="must be >= 2")
    max_windows = _args.integer("hf", "max_windows", max_windows, allow_bool=False, low=0,
                                rule="must be >= 0 (0: all)")
    vocab = int(model.config.vocab_size)
    if int(ids.max()) >= vocab:
        raise _args.error("hf", f"tokens[{int(ids.argmax())}]", int(ids.max()), f"must be < vocab_size = {vocab}")
    windows = len(ids) // context if max_windows == 0 else min(max_windows, len(ids) // context)
    if windows == 0:
        raise _args.error("hf", "len(tokens)", len(ids), f"must be >= context = {context} (one whole window)")
    nll = np.empty((windows, context - 1))
    device = next(model.parameters()).device  # the tokens go where the model is
    with torch.no_grad():
        for w in range(windows):
            x = torch.from_numpy(ids[w * context:(w + 1) * context].astype(np.int64))[None].to(device)
            logp = torch.log_softmax(model(x).logits[0, :-1].double(), -1)
            nll[w] = -logp[torch.arange(context - 1, device=device), x[0, 1:]].cpu().numpy()
    return nll


def _key_positions(cache, layer: int, past: int, positions: torch.Tensor) -> torch.Tensor:
    """The positions [batch, kv_len] of the cache's keys once this call adds
    `positions` [batch, q_len], from the record posenc keeps on the cache
    object (written by :func:`_insert`, after every check has passed)."""
    previous = cache.__dict__.get("_posenc_key_positions", {}).get(layer) if past > 0 else None
    if past > 0 and (previous is None or previous.shape[1] != past):
        raise ValueError(f"[hf] past_key_value: layer {layer} holds {past} keys that posenc.hf did not insert "
                         f"(a cache filled before posenc.hf.apply, or cropped/reordered since): start a new cache")
    return positions if previous is None else torch.cat([previous, positions], dim=1)


def _insert(cache, layer: int, k: torch.Tensor, v: torch.Tensor, key_positions: torch.Tensor, cache_position):
    """Adds k and v to the cache, records their positions and marks the
    cache as posenc's (:func:`_claim`): the keys and values of all of it."""
    _claim(cache)
    cache.__dict__.setdefault("_posenc_key_positions", {})[layer] = key_positions
    return type(cache).update(cache, k, v, layer, {"cache_position": cache_position})


# An additive mask value at or below this hides a key: e^-10000 is 0 in every
# float format, so posenc's hard mask is the same function.
_HIDDEN = -1e4
# Query rows of a 4-D mask checked at a time (memory: a few [batch, 1024, kv_len] booleans).
_CHECK_ROWS = 1024


def _hidden(rows: torch.Tensor) -> torch.Tensor:
    """True where HF's 4-D mask hides a key: boolean (True: attend) or
    additive (<= -1e4)."""
    return ~rows if rows.dtype == torch.bool else rows <= _HIDDEN


def _padding(mask: Optional[torch.Tensor], batch: int, kv_len: int) -> Optional[torch.Tensor]:
    """[batch, kv_len] True where a key is padding: hidden by HF's mask
    (4-D, or 2-D 1/0) from every query of the call. (A key some query sees
    is left to posenc's own causal and window masks.)"""
    if mask is None:
        return None
    if mask.dim() == 4:
        hidden = _hidden(mask[..., :kv_len]).all(dim=2).all(dim=1)
    elif mask.dim() == 2:
        hidden = mask[:, -kv_len:] == 0
    else:
        raise ValueError(f"[hf] attention_mask.shape = {tuple(mask.shape)}: must have 2 or 4 axes")
    return hidden.expand(batch, kv_len) if hidden.any() else None


def _check_mask(mask: torch.Tensor, q_pos: torch.Tensor, k_pos: torch.Tensor, pads: Optional[torch.Tensor],
                windows) -> None:
    """Refuses a 4-D mask [batch, 1 or heads, q_len, >= kv_len] that is not
    what posenc applies: additive values other than 0 and <= -1e4 (a bias),
    or a visibility other than key j visible to query i iff k_pos[j] <=
    q_pos[i], j is not padding and (a model with a sliding window)
    q_pos[i] - k_pos[j] < window. Queries HF hides from every key (padding
    queries) are not compared: their output is unused. ``windows``: the
    layer's window and the config's (see apply)."""
    window, config_window = windows
    batch, kv_len = k_pos.shape
    q_pos, k_pos = q_pos.to(mask.device), k_pos.to(mask.device)  # the mask stays where it is
    k = k_pos[:, None, :]
    for start in range(0, q_pos.shape[1], _CHECK_ROWS):
        rows = mask[..., start:start + _CHECK_ROWS, :kv_len]
        if rows.dtype != torch.bool:
            biased = (rows != 0) & (rows > _HIDDEN)
            if biased.any():
                at = tuple(int(i) for i in biased.nonzero()[0])
                raise ValueError(f"[hf] attention_mask[{at[0]}, {at[1]}, {start + at[2]}, {at[3]}] = "
                                 f"{float(rows[at]):g}: an additive mask must hold 0 (visible) or <= {_HIDDEN:g} "
                                 f"(hidden); posenc's attention takes no other bias")
        visible = (~_hidden(rows)).expand(batch, -1, -1, -1)
        q = q_pos[:, start:start + _CHECK_ROWS, None]
        expected = k <= q  # [batch, rows, kv_len]
        if window:
            expected &= k > q - window
        if pads is not None:
            expected &= ~pads[:, None, :]
        wrong = (visible != expected[:, None]) & visible.any(dim=-1, keepdim=True)
        if config_window:
            wrong &= ~(~visible & (k <= q - config_window)[:, None])
        if wrong.any():
            b, h, i, j = (int(x) for x in wrong.nonzero()[0])
            seen = "visible" if visible[b, h, i, j] else "hidden"
            raise ValueError(
                f"[hf] attention_mask[{b}, {h}, {start + i}, {j}] = {seen}: posenc.hf applies causality by "
                f"position (here the key at position {int(k_pos[b, j])} is "
                f"{'hidden from' if seen == 'visible' else 'visible to'} the query at position "
                f"{int(q_pos[b, start + i])}), padding and the model's window, not a custom 4-D mask (packed "
                f"sequences, prefix-LM): run each sequence as its own row with a 2-D padding mask")


def _refuse_update(cache, *args, **kwargs):
    raise ValueError("[hf] past_key_value = a DynamicCache posenc.hf filled: it holds unrotated keys (posenc "
                     "rotates them inside its kernel), which this attention (HF's own, after posenc.hf.remove, or "
                     "another unpatched layer) would read as rotated: start a new cache, or posenc.hf.apply again")


def _claim(cache) -> None:
    """Marks `cache` as holding posenc's unrotated keys: its ``update`` (an
    instance attribute over DynamicCache's) raises for every caller but
    posenc.hf, which calls DynamicCache.update itself."""
    if "update" not in cache.__dict__:
        cache.update = types.MethodType(_refuse_update, cache)


def _forward(self, hidden_states: torch.Tensor, position_embeddings=None, attention_mask=None,
             past_key_value=None, cache_position=None, **kwargs):
    """The patched attention: q, k, v [batch, seq, heads, head_dim] from the
    model's projections, unrotated keys into the cache, posenc's attention."""
    if self.training and getattr(self, "attention_dropout", 0.0) > 0:
        raise ValueError(f"[hf] attention_dropout = {self.attention_dropout}: posenc.hf has no attention dropout; "
                         f"set config.attention_dropout = 0 to train through it")
    batch, seq, _ = hidden_states.shape
    q, k, v = (x.view(batch, seq, -1, self.head_dim).transpose(1, 2)  # [batch, heads, seq, head_dim]
               for x in _projections(self, hidden_states))
    positions = kwargs.get("position_ids")
    if positions is None:
        positions = cache_position if cache_position is not None else torch.arange(seq)
    # Positions are posenc's bookkeeping: on the CPU, whatever the model's device.
    positions = positions.reshape(-1, seq).expand(batch, seq).to("cpu", torch.int64)
    if past_key_value is not None:
        cache_class = type(past_key_value)
        if cache_class.__name__ != "DynamicCache":
            raise ValueError(f"[hf] past_key_value = a {cache_class.__name__}: posenc.hf keeps unrotated "
                             f"keys in a DynamicCache (the default of generate)")
        key_positions = _key_positions(past_key_value, self.layer_idx,
                                       past_key_value.get_seq_length(self.layer_idx), positions)
    else:
        key_positions = positions
    pads = _padding(attention_mask, batch, key_positions.shape[1])
    if self._posenc_checks_mask and attention_mask is not None and attention_mask.dim() == 4:
        _check_mask(attention_mask, positions, key_positions, pads, self._posenc_windows)
    if past_key_value is not None:  # every check passed: the cache grows
        k, v = _insert(past_key_value, self.layer_idx, k, v, key_positions, cache_position)
    key_positions = key_positions.numpy().copy()
    if pads is not None:  # past every query: the causal mask hides them
        key_positions[pads.cpu().numpy()] = int(max(key_positions.max(), positions.max())) + 1
    dtype = q.dtype
    out = _torch.attention(q, k.to(dtype), v.to(dtype), layout="bhsd", softmax_scale=self.scaling,
                           q_positions=positions.numpy(), k_positions=key_positions, **self._posenc_kwargs)
    out = out.transpose(1, 2).reshape(batch, seq, -1)
    return self.o_proj(out), None
