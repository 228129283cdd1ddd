"""A GGUF file as a Hugging Face ``transformers`` model, read by posenc
(:func:`posenc.hf.from_gguf`; the overview is in posenc/hf.py).

What it does is what ``from_pretrained(dir, gguf_file=name)`` does (a
config from the ``{arch}.*`` metadata, llama.cpp's tensor names mapped to
HF's, llama's Q/K rows un-permuted), with posenc's reader and dequantizer
(:class:`posenc.GgufFile`, checked bit for bit against gguf-py in
tests/python/test_gguf_oracle.py) in place of gguf-py, and without
``from_pretrained``'s need of the ``accelerate`` package, which does not run
on torch 1.13. tests/python/test_hf_patch.py holds the two loaders' models
equal, tensor for tensor. One difference, on purpose: transformers makes a
llama GGUF whose general.name says "mistral" a MistralForCausalLM, with
MistralConfig's default 4096-token window that the file does not carry;
llama.cpp and posenc's engine run it as llama, and so does this loader.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, Union

import torch
import transformers

from .gguf import GgufFile
from .rope import permute_qk_weights

# general.architecture -> (config class, model class, Q/K rows permuted by
# llama.cpp's converter). Qwen2's converter writes them as HF has them.
_ARCHITECTURES = {
    "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM, True),
    "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM, False),
}

# llama.cpp's tensor names (blk.N.<name>) -> HF's (model.layers.N.<name>).
_BLOCK_TENSORS = {
    "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
}
_MODEL_TENSORS = {"token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head"}

# The RoPE scaling keys llama.cpp writes, with their "no scaling" values;
# HF's form of them is rope_scaling.
_SCALING_KEYS = {"rope.scaling.type": "none", "rope.scale_linear": 1.0}


def _error(name: str, value: Any, rule: str) -> ValueError:
    return ValueError(f"[hf] {name} = {value}: {rule}")


def _count(meta: Dict[str, Any], key: str, default: Any = None) -> int:
    value = meta.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _error(key, "missing" if value is None else repr(value),
                     "must be a count >= 1 (the architecture needs it)")
    return value


def _hf_name(name: str) -> Optional[str]:
    """HF's parameter name for a GGUF tensor name (None: it has none)."""
    parts = name.split(".")
    if len(parts) == 4 and parts[0] == "blk" and parts[1].isdigit() and parts[2] in _BLOCK_TENSORS:
        return f"model.layers.{parts[1]}.{_BLOCK_TENSORS[parts[2]]}.{parts[3]}"
    if len(parts) == 2 and parts[0] in _MODEL_TENSORS:
        return f"{_MODEL_TENSORS[parts[0]]}.{parts[1]}"
    return None


def _config(arch: str, meta: Dict[str, Any], names, vocab: int, overrides: Dict[str, Any]):
    config_class = _ARCHITECTURES[arch][0]
    known = config_class().to_dict()
    for key in overrides:
        if key not in known:
            raise _error(key, repr(overrides[key]), f"is not a {config_class.__name__} field (overrides name HF's "
                         f"config fields, e.g. rope_scaling, max_position_embeddings)")
    p = arch + "."
    heads = _count(meta, p + "attention.head_count")
    hidden = _count(meta, p + "embedding_length")
    if hidden % heads and p + "attention.key_length" not in meta:
        raise _error(p + "embedding_length", hidden, f"must be a multiple of attention.head_count = {heads} when "
                     f"attention.key_length is absent")
    head_dim = _count(meta, p + "attention.key_length", hidden // heads)
    rotary = meta.get(p + "rope.dimension_count", head_dim)
    if rotary != head_dim:
        raise _error(p + "rope.dimension_count", rotary, f"must equal the head dim {head_dim}: HF's {arch} rotates "
                     f"every dimension")
    if "rope_scaling" not in overrides:
        for key, none in _SCALING_KEYS.items():
            if meta.get(p + key, none) != none:
                raise _error(p + key, repr(meta[p + key]), "from_gguf builds the RoPE of the file's base only: "
                             "pass rope_scaling={...} in Hugging Face's form to load it scaled")
        if "rope_freqs.weight" in names:
            raise _error("tensor", '"rope_freqs.weight"', "per-frequency factors (Llama 3.1's): pass "
                         "rope_scaling={\"rope_type\": \"llama3\", ...} in Hugging Face's form to load them")
    values = dict(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=_count(meta, p + "feed_forward_length"),
        num_hidden_layers=_count(meta, p + "block_count"), num_attention_heads=heads,
        num_key_value_heads=_count(meta, p + "attention.head_count_kv", heads), head_dim=head_dim,
        max_position_embeddings=_count(meta, p + "context_length"),
        rms_norm_eps=float(meta.get(p + "attention.layer_norm_rms_epsilon", 1e-5)),
        rope_theta=float(meta.get(p + "rope.freq_base", 10000.0)),
        tie_word_embeddings="output.weight" not in names, attn_implementation="eager")
    for token in ("bos", "eos", "padding"):  # as transformers' GGUF reader: only those the file names
        if f"tokenizer.ggml.{token}_token_id" in meta:
            values[f"{token[:3]}_token_id"] = meta[f"tokenizer.ggml.{token}_token_id"]
    if arch == "llama":
        values["attention_bias"] = "blk.0.attn_q.bias" in names
    values.update(overrides)
    return config_class(**values)


def from_gguf(path: Union[str, os.PathLike], **config: Any):
    """:func:`posenc.hf.from_gguf` (documented there)."""
    file = GgufFile(path)
    meta, names = file.metadata, set(file.tensor_names())
    arch = meta.get("general.architecture")
    if arch not in _ARCHITECTURES:
        known = ", ".join(f'"{a}" ({c[1].__name__})' for a, c in _ARCHITECTURES.items())
        rule = f"from_gguf loads {known}"
        if arch == "gemma3":
            rule += (f"; transformers {transformers.__version__} has no Gemma 3 class (it came in 4.50, which "
                     f"the pinned torch 1.13 cannot run): posenc.DecoderModel runs Gemma 3 GGUFs")
        raise _error(f"{file.path}: general.architecture", repr(arch), rule)
    shapes = {name: shape for name, shape, _ in file.tensors}
    # As posenc's engine reads it: the vocab_size key, else the tokenizer's tokens, else the embedding's rows.
    vocab = (meta.get(arch + ".vocab_size") or len(meta.get("tokenizer.ggml.tokens", ()))
             or shapes.get("token_embd.weight", (0, 0))[-1])
    hf_config = _config(arch, meta, names, vocab, config)
    model_class, permuted = _ARCHITECTURES[arch][1:]
    model = model_class(hf_config)
    heads = {"attn_q": hf_config.num_attention_heads, "attn_k": hf_config.num_key_value_heads}
    tensors: Dict[str, torch.Tensor] = {}
    for name in file.tensor_names():
        if name == "rope_freqs.weight" and "rope_scaling" in config:
            continue  # the caller's rope_scaling says what they are
        hf_name = _hf_name(name)
        if hf_name is None:
            raise _error("tensor", f'"{name}"', f"has no parameter in {model_class.__name__} (in {file.path})")
        array = file.dequantize(name)
        kind = name.split(".")[2] if name.startswith("blk.") else ""
        if permuted and kind in heads:  # llama.cpp stores llama's Q/K rows interleaved; HF's RoPE is half-split
            array = permute_qk_weights(array, heads[kind], hf_config.head_dim, to="half-split")
        tensors[hf_name] = torch.from_numpy(array)
    _load(model, tensors, file.path)
    return model.eval()


def _load(model, tensors: Dict[str, torch.Tensor], path: str) -> None:
    """Every parameter from `tensors`, shapes checked (lm_head may be tied)."""
    own = model.state_dict()
    for name, tensor in tensors.items():
        if name not in own:
            raise _error("tensor for", name, f"has no parameter in {type(model).__name__} (in {path})")
        if tuple(tensor.shape) != tuple(own[name].shape):
            raise _error(f"{name}.shape", tuple(tensor.shape), f"must be {tuple(own[name].shape)}, as the "
                         f"metadata of {path} says")
    missing, _ = model.load_state_dict(tensors, strict=False)
    tied = {"lm_head.weight"} if model.config.tie_word_embeddings else set()
    if set(missing) - tied:
        raise _error("tensors", "missing", f"{type(model).__name__} needs {sorted(set(missing) - tied)} "
                     f"(not in {path})")
    model.tie_weights()
