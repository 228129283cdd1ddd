#include "model/llama_weights.h"

#include <string>

#include "posenc/error.h"

namespace posenc {
namespace {

constexpr const char* kOp = "llama";

std::string ShapeText(const std::vector<std::int64_t>& shape) {
  std::string text = "{";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "}";
}

std::string Block(std::int64_t layer, const char* name) { return "blk." + std::to_string(layer) + "." + name; }

// Rows of `a` then rows of `b` (both [*, cols]) as one matrix.
std::vector<float> StackRows(std::vector<float> a, const std::vector<float>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

}  // namespace

std::vector<float> ReadLlamaTensor(const GgufFile& file, const std::string& name,
                                   const std::vector<std::int64_t>& shape) {
  const GgufTensorInfo* info = file.FindTensor(name);
  Require(info != nullptr, kOp, name, Verbatim{"missing"}, "a llama GGUF must have this tensor");
  Require(info->shape == shape, kOp, name + ".shape", Verbatim{ShapeText(info->shape)},
          "must be " + ShapeText(shape) + " (ggml order) for these hyperparameters");
  Require(TraitsOf(info->type).dequantizable, kOp, name + ".type", TraitsOf(info->type).name,
          "is not a type posenc can dequantize");
  return file.Dequantize(*info);
}

LlamaHyperparams LlamaHyperparamsOf(const GgufFile& file) {
  LlamaHyperparams hp = ReadLlamaHyperparams(file.metadata());
  if (hp.vocab_size == 0) hp.vocab_size = file.Tensor("token_embd.weight").Rows();
  if (const GgufTensorInfo* freqs = file.FindTensor("rope_freqs.weight")) {
    const std::vector<float> factors = ReadLlamaTensor(file, freqs->name, {hp.rope.Pairs()});
    hp.rope.scaling = FrequencyFactorScaling{std::vector<double>(factors.begin(), factors.end())};
  }
  return hp;
}

std::unique_ptr<LlamaModel::Weights> LoadLlamaWeights(const GgufFile& file) {
  LlamaHyperparams hp = LlamaHyperparamsOf(file);
  const std::int64_t d = hp.embedding_length, ffn = hp.feed_forward_length;
  const std::int64_t q_dim = hp.head_count * hp.head_dim, kv_dim = hp.head_count_kv * hp.head_dim;

  std::vector<float> token_embd = ReadLlamaTensor(file, "token_embd.weight", {d, hp.vocab_size});
  std::vector<float> output_norm = ReadLlamaTensor(file, "output_norm.weight", {d});
  hp.tied_output = file.FindTensor("output.weight") == nullptr;
  PackedWeights output =
      hp.tied_output
          ? PackedWeights::Pack(token_embd, hp.vocab_size, d)  // no copy of the table
          : PackedWeights::Pack(ReadLlamaTensor(file, "output.weight", {d, hp.vocab_size}), hp.vocab_size, d);

  std::vector<LlamaLayerWeights> layers;
  layers.reserve(hp.block_count);
  for (std::int64_t l = 0; l < hp.block_count; ++l) {
    const auto read = [&](const char* name, const std::vector<std::int64_t>& shape) {
      return ReadLlamaTensor(file, Block(l, name), shape);
    };
    std::vector<float> qkv = StackRows(StackRows(read("attn_q.weight", {d, q_dim}), read("attn_k.weight", {d, kv_dim})),
                                       read("attn_v.weight", {d, kv_dim}));
    std::vector<float> gate_up = StackRows(read("ffn_gate.weight", {d, ffn}), read("ffn_up.weight", {d, ffn}));
    layers.push_back(LlamaLayerWeights{
        read("attn_norm.weight", {d}),
        read("ffn_norm.weight", {d}),
        PackedWeights::Pack(qkv, q_dim + 2 * kv_dim, d),
        PackedWeights::Pack(read("attn_output.weight", {q_dim, d}), d, q_dim),
        PackedWeights::Pack(gate_up, 2 * ffn, d),
        PackedWeights::Pack(read("ffn_down.weight", {ffn, d}), d, ffn),
    });
  }
  return std::make_unique<LlamaModel::Weights>(LlamaModel::Weights{
      std::move(hp), std::move(token_embd), std::move(output_norm), std::move(output), std::move(layers)});
}

}  // namespace posenc
