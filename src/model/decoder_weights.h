// The decoder's weights, checked against the hyperparameters and kept
// for MatMul as the file stores them (or as float32: WeightStorage). Q, K and
// V are stacked as one [q + 2 kv, d] matrix and gate and up as one [2 ffn, d]
// matrix (each part in its own type, or as the file fused them), so each
// layer makes four products instead of seven.
#pragma once

#include <optional>
#include <vector>

#include "posenc/gguf.h"
#include "posenc/decoder_model.h"
#include "posenc/matmul.h"

namespace posenc {

struct DecoderLayerWeights {
  std::vector<float> attn_norm;  // [d]
  std::vector<float> ffn_norm;   // [d]
  PackedWeights qkv;             // [heads*hd + 2*kv_heads*hd, d]
  PackedWeights attn_output;     // [d, heads*hd]
  PackedWeights gate_up;         // [2 ffn, d]
  PackedWeights down;            // [d, ffn]
  // Empty unless the features ask for them: the per-head QK norms
  // [head_dim] (qk_norm) and the norms of the attention and MLP outputs [d]
  // (post_norms).
  std::vector<float> attn_q_norm, attn_k_norm;
  std::vector<float> post_attention_norm, post_ffw_norm;
  std::vector<float> qkv_bias;  // [heads*hd + 2*kv_heads*hd]: q | k | v (qkv_bias)
};

struct DecoderModel::Weights {
  DecoderHyperparams hp;
  PackedWeights token_embd;             // [vocab, d]: rows looked up, and the tied output
  std::vector<float> output_norm;       // [d]
  std::optional<PackedWeights> output;  // [vocab, d]; none when tied
  std::vector<DecoderLayerWeights> layers;
  DotActivations activations = DotActivations::kFloat32;  // of every decode product
  AttentionOptions local_attention;                       // the local layers' (LayerAttention)
  const PackedWeights& Output() const { return output ? *output : token_embd; }
};

// Reads every tensor, checking names, shapes and types; throws posenc::Error
// naming the tensor.
// Throws for int8 activations with float32 weights (nothing to apply them to).
std::unique_ptr<DecoderModel::Weights> LoadDecoderWeights(const GgufFile& file, WeightStorage storage,
                                                          DotActivations activations);

// The hyperparameters with what only the tensors tell: the vocabulary size
// when the metadata has none (token_embd's rows), the RoPE scaling llama.cpp
// stores as tensors (rope_freqs: Llama 3's per-pair frequency divisors;
// rope_factors_short/long: LongRoPE's), whether the output is tied (no
// output.weight), whether q, k, v are one fused matrix and whether they have
// biases.
DecoderHyperparams DecoderHyperparamsOf(const GgufFile& file);

// The local layers' attention (DecoderFeatures): RoPE of base
// local_rope_theta without scaling, causal, a window of sliding_window keys.
AttentionOptions LocalLayerAttention(const DecoderHyperparams& hp);

// A tensor as float32 in ggml order after checking its shape ({cols, rows}
// for a matrix, {len} for a vector). Shared with the reference model.
std::vector<float> ReadDecoderTensor(const GgufFile& file, const std::string& name,
                                     const std::vector<std::int64_t>& shape);

// A matrix tensor's rows as stored, after checking its shape and that it can
// be kept as `storage` says (a type without a kernel names the tensor).
WeightRows DecoderTensorRows(const GgufFile& file, const std::string& name, const std::vector<std::int64_t>& shape,
                             WeightStorage storage);

}  // namespace posenc
