// A decoder described by its features: what its layers do beyond the
// baseline every family shares, filled once from GGUF metadata (and the
// tensors a file holds) by its family's function, src/model/families/. The
// engine (DecoderModel), its decode path and its float64 reference read these
// features and never ask which family a model is, as gemma.cpp's
// ModelConfig (post_norm, use_qk_norm) does: a new family is a new way of
// filling them.
//
// The baseline: token embeddings looked up; per layer, x = x + attention of
// rms_norm(x) * attn_norm (q, k, v projections without biases, RoPE,
// causal), then
// x = x + the gated MLP of rms_norm(x) * ffn_norm; logits of
// rms_norm(x) * output_norm times the output matrix.
#pragma once

#include <cstdint>

namespace posenc {

// The MLP's gate: out = act(f Wgate^T) * (f Wup^T).
enum class GateActivation {
  kSilu,      // SwiGLU (Llama): g / (1 + exp(-g))
  kGeluTanh,  // GeGLU (Gemma): the tanh approximation of GELU, as PyTorch's gelu(approximate="tanh")
};

struct DecoderFeatures {
  // x = token_embd[tokens] * embedding_scale (Gemma: sqrt(d) rounded to
  // float32, as Hugging Face's embed_scale tensor holds it).
  float embedding_scale = 1.0F;
  // q and k: each head's head_dim vector rms-normed (attn_q_norm,
  // attn_k_norm, [head_dim]) before the cache keeps k and before RoPE.
  bool qk_norm = false;
  // Biases added to the q, k and v projections (attn_q.bias, attn_k.bias,
  // attn_v.bias), before the QK norm: Qwen2's; llama.cpp's llama graph adds
  // them too where a file has them. Read from the tensors, as tied_output:
  // true when blk.0.attn_q.bias is there (then every layer needs all three).
  bool qkv_bias = false;
  // How the projections are stored, not what they compute: q, k and v as
  // one matrix, attn_qkv [q + 2 kv, d] with rows q | k | v (and its bias
  // attn_qkv.bias), as llama.cpp's converter writes Phi-3's qkv_proj. Read
  // from the tensors, as tied_output: true when blk.0.attn_qkv.weight is
  // there (llama.cpp's loader takes either form).
  bool fused_qkv = false;
  // The MLP's gate and up as one matrix, ffn_up [2 ffn, d] with rows
  // gate | up and no ffn_gate (Phi-3's gate_up_proj; llama.cpp's phi3
  // loader requires it so): set by the family.
  bool fused_gate_up = false;
  // The attention's and the MLP's outputs rms-normed (post_attention_norm,
  // post_ffw_norm, [d]) before their residual adds: with the two pre-norms,
  // four norms a layer (Gemma 2 and 3).
  bool post_norms = false;
  GateActivation activation = GateActivation::kSilu;
  // Queries scaled by 1 / sqrt(query_pre_attn_scalar) (Hugging Face's
  // Gemma config field, which GGUF files do not carry; the family decides
  // it) where the attention's default is 1 / sqrt(head_dim). 0: head_dim.
  double query_pre_attn_scalar = 0;
  // Layer kinds: with a sliding_window W > 0, layer l is global when
  // (l + 1) % sliding_window_pattern == 0 and local otherwise. A global
  // layer runs the caller's attention (a context-extension method); a local
  // one sees the last W keys (its own included) with RoPE of base
  // local_rope_theta and no frequency scaling, whatever the method.
  std::int64_t sliding_window = 0;
  std::int64_t sliding_window_pattern = 0;
  double local_rope_theta = 10000;
  // No output.weight in the file: the logits use token_embd (SmolLM2, Gemma).
  bool tied_output = false;

  bool IsLocalLayer(std::int64_t layer) const {
    return sliding_window > 0 && (layer + 1) % sliding_window_pattern != 0;
  }
};

}  // namespace posenc
