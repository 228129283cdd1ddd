// The Llama model's weights in float32, checked against the hyperparameters
// and packed for MatMul. Q, K and V are packed as one [q + 2 kv, d] matrix
// and gate and up as one [2 ffn, d] matrix, so each layer makes four
// products instead of seven.
#pragma once

#include <vector>

#include "posenc/gguf.h"
#include "posenc/llama_model.h"
#include "posenc/matmul.h"

namespace posenc {

struct LlamaLayerWeights {
  std::vector<float> attn_norm;  // [d]
  std::vector<float> ffn_norm;   // [d]
  PackedWeights qkv;             // [heads*hd + 2*kv_heads*hd, d]
  PackedWeights attn_output;     // [d, heads*hd]
  PackedWeights gate_up;         // [2 ffn, d]
  PackedWeights down;            // [d, ffn]
};

struct LlamaModel::Weights {
  LlamaHyperparams hp;
  std::vector<float> token_embd;   // [vocab, d]
  std::vector<float> output_norm;  // [d]
  PackedWeights output;            // [vocab, d]
  std::vector<LlamaLayerWeights> layers;
};

// Reads every tensor, checking names, shapes and types; throws posenc::Error
// naming the tensor.
std::unique_ptr<LlamaModel::Weights> LoadLlamaWeights(const GgufFile& file);

// The hyperparameters with what only the tensors tell: the vocabulary size
// when the metadata has none (token_embd's rows) and llama.cpp's rope_freqs
// tensor (Llama-3 scaling as per-pair frequency divisors).
LlamaHyperparams LlamaHyperparamsOf(const GgufFile& file);

// A tensor as float32 in ggml order after checking its shape ({cols, rows}
// for a matrix, {len} for a vector). Shared with the reference model.
std::vector<float> ReadLlamaTensor(const GgufFile& file, const std::string& name,
                                   const std::vector<std::int64_t>& shape);

}  // namespace posenc
