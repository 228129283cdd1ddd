"""Tiny random-weight Hugging Face decoders of the families that scale their
RoPE, written to GGUF as llama.cpp's convert_hf_to_gguf.py writes them, for
tests/python/test_scaled_rope_families.py: the transformers model is the
oracle, the file is what posenc runs.

No GGUF of these families can be downloaded here, so the converter's steps
are done again for each (its classes named where they are followed):

- ``llama`` (LlamaModel): Q and K rows permuted into llama.cpp's
  interleaved-pair order (LlamaModel.permute); Llama 3's ``llama3`` scaling
  as the ``rope_freqs`` tensor of per-pair divisors
  (LlamaModel.generate_extra_tensors, which reads the original length from
  the config's top-level ``original_max_position_embeddings``, 8192 when
  absent: the tiny configs here give it there too).
- ``qwen2`` (Qwen2Model): q, k, v with their biases, not permuted (NEOX
  RoPE); a ``yarn`` rope_scaling as ``rope.scaling.type`` = yarn with its
  factor and ``original_context_length``.
- ``phi3`` (Phi3MiniModel): ``qkv_proj`` as ``attn_qkv`` and
  ``gate_up_proj`` as ``ffn_up`` (both fused, as stored); context_length
  the extended length and ``rope.scaling.original_context_length`` the
  original one; LongRoPE as the ``rope_factors_short`` / ``rope_factors_long``
  tensors and ``rope.scaling.attn_factor`` = sqrt(1 + ln(s) / ln(original)),
  s = max_position_embeddings / original_max_position_embeddings.

Shapes: random_llama_gguf.py's (vocab 320, d 64, 2 layers, 4 heads, 2 KV
heads, head_dim 16, ffn 96), float32 weights. The weights are redrawn after
transformers' own initialisation (std 0.02 would leave logits near 0, where
a wrong position changes nothing): projections N(0, 1/in_features), token
embeddings N(0, 0.35^2), norm weights 1 + N(0, 0.1^2), biases N(0, 0.5^2).
"""

from __future__ import annotations

import math
import pathlib
from typing import Dict, Optional

import numpy as np
import torch
import transformers

import gguf

# The shapes, RoPE base and norm epsilon of the random Llama files, so that
# the two kinds of tiny model are one size.
from random_llama_gguf import BLOCKS, D, EPS, FFN, HEAD_DIM, HEADS, KV_HEADS, THETA, VOCAB


def config(kind: str, max_position: int, rope_scaling: Optional[dict] = None, **extra):
    """The transformers config of a tiny `kind` model ("llama", "qwen2", "phi3"),
    eager attention (the reference implementation), no dropout."""
    common = dict(vocab_size=VOCAB, hidden_size=D, intermediate_size=FFN, num_hidden_layers=BLOCKS,
                  num_attention_heads=HEADS, num_key_value_heads=KV_HEADS, max_position_embeddings=max_position,
                  rms_norm_eps=EPS, rope_theta=THETA, rope_scaling=rope_scaling, attention_dropout=0.0, **extra)
    if kind == "llama":
        cfg = transformers.LlamaConfig(tie_word_embeddings=False, **common)
    elif kind == "qwen2":
        cfg = transformers.Qwen2Config(tie_word_embeddings=True, **common)
    elif kind == "phi3":
        # pad_token_id: Phi-3's 32000 is outside this vocabulary; no sliding
        # window (llama.cpp runs phi3 without one).
        cfg = transformers.Phi3Config(tie_word_embeddings=False, pad_token_id=None, sliding_window=None,
                                      resid_pdrop=0.0, embd_pdrop=0.0, **common)
    else:
        raise ValueError(f"kind = {kind!r}: must be llama, qwen2 or phi3")
    cfg._attn_implementation = "eager"
    return cfg


def random_model(cfg, seed: int = 0):
    """A causal LM of `cfg` with the module docstring's random weights, float32, in eval mode."""
    model = transformers.MODEL_FOR_CAUSAL_LM_MAPPING[type(cfg)](cfg).float().eval()
    generator = torch.Generator().manual_seed(seed)

    def normal(shape, std, mean=0.0):
        return mean + std * torch.randn(shape, generator=generator, dtype=torch.float32)

    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("embed_tokens.weight"):
                p.copy_(normal(p.shape, 0.35))
            elif "norm" in name:
                p.copy_(normal(p.shape, 0.1, 1.0))
            elif name.endswith(".bias"):
                p.copy_(normal(p.shape, 0.5))
            elif name == "lm_head.weight":
                p.copy_(normal(p.shape, 3.0 / math.sqrt(p.shape[1])))  # logits of the tied embedding's scale
            else:
                p.copy_(normal(p.shape, 1.0 / math.sqrt(p.shape[1])))
    model.tie_weights()
    return model


def permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's LlamaModel.permute: Hugging Face's half-split Q/K rows of
    each head into interleaved pairs."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama3_rope_factors(cfg) -> np.ndarray:
    """LlamaModel.generate_extra_tensors' rope_freqs for a llama3 rope_scaling."""
    s = cfg.rope_scaling
    freqs = 1.0 / (cfg.rope_theta ** (torch.arange(0, HEAD_DIM, 2, dtype=torch.float32) / HEAD_DIM))
    old_context_len = getattr(cfg, "original_max_position_embeddings", 8192)
    low_freq_wavelen = old_context_len / s.get("low_freq_factor", 1.0)
    high_freq_wavelen = old_context_len / s.get("high_freq_factor", 4.0)
    factors = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < high_freq_wavelen:
            factors.append(1)
        elif wavelen > low_freq_wavelen:
            factors.append(s.get("factor", 8.0))
        else:
            smooth = (old_context_len / wavelen - s.get("low_freq_factor", 1.0)) / (
                s.get("high_freq_factor", 4.0) - s.get("low_freq_factor", 1.0))
            factors.append(1 / ((1 - smooth) / s.get("factor", 8.0) + smooth))
    return np.asarray(factors, dtype=np.float32)


def write_gguf(model, path) -> pathlib.Path:
    """Writes `model` (from random_model) as llama.cpp's converter would; returns the path."""
    cfg = model.config
    kind = cfg.model_type
    path = pathlib.Path(path)
    sd: Dict[str, np.ndarray] = {k: v.detach().numpy().astype(np.float32) for k, v in model.state_dict().items()}
    scaling = cfg.rope_scaling or {}
    scaling_type = scaling.get("rope_type", scaling.get("type"))

    writer = gguf.GGUFWriter(str(path), kind)
    writer.add_name(f"posenc random {kind}")
    writer.add_context_length(cfg.max_position_embeddings)
    writer.add_embedding_length(D)
    writer.add_block_count(BLOCKS)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(KV_HEADS)
    writer.add_rope_freq_base(cfg.rope_theta)
    writer.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    writer.add_rope_dimension_count(HEAD_DIM)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    if kind == "llama":
        writer.add_vocab_size(VOCAB)
    if scaling_type == "yarn":  # Qwen2Model
        writer.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        writer.add_rope_scaling_factor(scaling["factor"])
        writer.add_rope_scaling_orig_ctx_len(scaling["original_max_position_embeddings"])
    if kind == "phi3":  # Phi3MiniModel.set_gguf_parameters and generate_extra_tensors
        original = cfg.original_max_position_embeddings
        writer.add_rope_scaling_orig_ctx_len(original)
        writer.add_sliding_window(0)
        if scaling_type == "longrope":
            s = cfg.max_position_embeddings / original
            writer.add_rope_scaling_attn_factors(math.sqrt(1 + math.log(s) / math.log(original)) if s > 1 else 1.0)
            writer.add_tensor("rope_factors_long.weight", np.asarray(scaling["long_factor"], np.float32))
            writer.add_tensor("rope_factors_short.weight", np.asarray(scaling["short_factor"], np.float32))
    if scaling_type == "llama3":
        writer.add_tensor("rope_freqs.weight", llama3_rope_factors(cfg))

    writer.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    writer.add_tensor("output_norm.weight", sd["model.norm.weight"])
    if not cfg.tie_word_embeddings:
        writer.add_tensor("output.weight", sd["lm_head.weight"])
    for b in range(BLOCKS):
        hf, blk = f"model.layers.{b}.", f"blk.{b}."
        writer.add_tensor(blk + "attn_norm.weight", sd[hf + "input_layernorm.weight"])
        writer.add_tensor(blk + "ffn_norm.weight", sd[hf + "post_attention_layernorm.weight"])
        writer.add_tensor(blk + "attn_output.weight", sd[hf + "self_attn.o_proj.weight"])
        writer.add_tensor(blk + "ffn_down.weight", sd[hf + "mlp.down_proj.weight"])
        if kind == "phi3":
            writer.add_tensor(blk + "attn_qkv.weight", sd[hf + "self_attn.qkv_proj.weight"])
            writer.add_tensor(blk + "ffn_up.weight", sd[hf + "mlp.gate_up_proj.weight"])
            continue
        q, k = sd[hf + "self_attn.q_proj.weight"], sd[hf + "self_attn.k_proj.weight"]
        if kind == "llama":
            q, k = permute(q, HEADS), permute(k, KV_HEADS)
        writer.add_tensor(blk + "attn_q.weight", q)
        writer.add_tensor(blk + "attn_k.weight", k)
        writer.add_tensor(blk + "attn_v.weight", sd[hf + "self_attn.v_proj.weight"])
        for role in ("q", "k", "v"):
            if hf + f"self_attn.{role}_proj.bias" in sd:
                writer.add_tensor(blk + f"attn_{role}.bias", sd[hf + f"self_attn.{role}_proj.bias"])
        writer.add_tensor(blk + "ffn_gate.weight", sd[hf + "mlp.gate_proj.weight"])
        writer.add_tensor(blk + "ffn_up.weight", sd[hf + "mlp.up_proj.weight"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def hf_logits(model, tokens) -> np.ndarray:
    """[n, vocab] float64 copy of the model's float32 logits for one sequence."""
    with torch.no_grad():
        return model(torch.as_tensor(np.asarray(tokens, np.int64))[None]).logits[0].double().numpy()
