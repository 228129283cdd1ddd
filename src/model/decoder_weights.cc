#include "model/decoder_weights.h"

#include <string>

#include "posenc/error.h"
#include "posenc/rope_frequencies.h"

namespace posenc {
namespace {

constexpr const char* kOp = "llama";

std::string ShapeText(const std::vector<std::int64_t>& shape) {
  std::string text = "{";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "}";
}

std::string Block(std::int64_t layer, const char* name) { return "blk." + std::to_string(layer) + "." + name; }

const GgufTensorInfo& CheckedTensor(const GgufFile& file, const std::string& name,
                                    const std::vector<std::int64_t>& shape) {
  const GgufTensorInfo* info = file.FindTensor(name);
  Require(info != nullptr, kOp, name, Verbatim{"missing"}, "the file's architecture needs this tensor");
  Require(info->shape == shape, kOp, name + ".shape", Verbatim{ShapeText(info->shape)},
          "must be " + ShapeText(shape) + " (ggml order) for these hyperparameters");
  Require(TraitsOf(info->type).dequantizable, kOp, name + ".type", TraitsOf(info->type).name,
          "is not a type posenc can dequantize");
  return *info;
}

}  // namespace

std::vector<float> ReadDecoderTensor(const GgufFile& file, const std::string& name,
                                     const std::vector<std::int64_t>& shape) {
  return file.Dequantize(CheckedTensor(file, name, shape));
}

WeightRows DecoderTensorRows(const GgufFile& file, const std::string& name, const std::vector<std::int64_t>& shape,
                             WeightStorage storage) {
  const GgufTensorInfo& info = CheckedTensor(file, name, shape);
  Require(storage == WeightStorage::kFloat32 || PackedWeights::HasKernel(info.type), kOp, name + ".type",
          TraitsOf(info.type).name, "has no matmul kernel: load the model with float32 weights");
  return WeightRows{info.type, info.Rows(), info.data, info.name};
}

AttentionOptions LocalLayerAttention(const DecoderHyperparams& hp) {
  AttentionOptions options;
  RopeSpec spec = hp.rope;
  spec.theta = hp.local_rope_theta;
  spec.scaling = NoScaling{};
  options.encoding = RopeEncoding{spec, ComputeRopeFrequencies(spec)};
  options.mask.window = hp.sliding_window;
  return options;
}

DecoderHyperparams DecoderHyperparamsOf(const GgufFile& file) {
  DecoderHyperparams hp = ReadDecoderHyperparams(file.metadata());
  if (hp.vocab_size == 0) hp.vocab_size = file.Tensor("token_embd.weight").Rows();
  if (const GgufTensorInfo* freqs = file.FindTensor("rope_freqs.weight")) {
    const std::vector<float> factors = ReadDecoderTensor(file, freqs->name, {hp.rope.Pairs()});
    hp.rope.scaling = FrequencyFactorScaling{std::vector<double>(factors.begin(), factors.end())};
  }
  hp.tied_output = file.FindTensor("output.weight") == nullptr;
  hp.qkv_bias = file.FindTensor(Block(0, "attn_q.bias")) != nullptr;
  return hp;
}

std::unique_ptr<DecoderModel::Weights> LoadDecoderWeights(const GgufFile& file, WeightStorage storage,
                                                          DotActivations activations) {
  Require(activations == DotActivations::kFloat32 || storage == WeightStorage::kAsStored, kOp, "activations",
          Verbatim{"int8"}, "needs the weights kept as stored (float32 weights have no integer product)");
  DecoderHyperparams hp = DecoderHyperparamsOf(file);
  const std::int64_t d = hp.embedding_length, ffn = hp.feed_forward_length;
  const std::int64_t q_dim = hp.head_count * hp.head_dim, kv_dim = hp.head_count_kv * hp.head_dim;
  // A matrix of the named tensors' rows, stacked, with k inputs.
  const auto matrix = [&](const std::vector<std::pair<std::string, std::int64_t>>& tensors, std::int64_t k) {
    std::vector<WeightRows> parts;
    parts.reserve(tensors.size());
    for (const auto& [name, rows] : tensors) parts.push_back(DecoderTensorRows(file, name, {k, rows}, storage));
    return PackedWeights::FromRows(parts, k, storage, activations);
  };

  PackedWeights token_embd = matrix({{"token_embd.weight", hp.vocab_size}}, d);
  std::vector<float> output_norm = ReadDecoderTensor(file, "output_norm.weight", {d});
  std::optional<PackedWeights> output;
  if (!hp.tied_output) output = matrix({{"output.weight", hp.vocab_size}}, d);

  std::vector<DecoderLayerWeights> layers;
  layers.reserve(hp.block_count);
  for (std::int64_t l = 0; l < hp.block_count; ++l) {
    const auto name = [&](const char* tensor) { return Block(l, tensor); };
    DecoderLayerWeights& layer = layers.emplace_back(DecoderLayerWeights{
        ReadDecoderTensor(file, name("attn_norm.weight"), {d}),
        ReadDecoderTensor(file, name("ffn_norm.weight"), {d}),
        matrix({{name("attn_q.weight"), q_dim}, {name("attn_k.weight"), kv_dim}, {name("attn_v.weight"), kv_dim}}, d),
        matrix({{name("attn_output.weight"), d}}, q_dim),
        matrix({{name("ffn_gate.weight"), ffn}, {name("ffn_up.weight"), ffn}}, d),
        matrix({{name("ffn_down.weight"), d}}, ffn),
    });
    if (hp.qk_norm) {
      layer.attn_q_norm = ReadDecoderTensor(file, name("attn_q_norm.weight"), {hp.head_dim});
      layer.attn_k_norm = ReadDecoderTensor(file, name("attn_k_norm.weight"), {hp.head_dim});
    }
    if (hp.qkv_bias) {
      const std::pair<const char*, std::int64_t> biases[] = {
          {"attn_q.bias", q_dim}, {"attn_k.bias", kv_dim}, {"attn_v.bias", kv_dim}};
      for (const auto& [tensor, rows] : biases) {
        const std::vector<float> bias = ReadDecoderTensor(file, name(tensor), {rows});
        layer.qkv_bias.insert(layer.qkv_bias.end(), bias.begin(), bias.end());
      }
    }
    if (hp.post_norms) {
      layer.post_attention_norm = ReadDecoderTensor(file, name("post_attention_norm.weight"), {d});
      layer.post_ffw_norm = ReadDecoderTensor(file, name("post_ffw_norm.weight"), {d});
    }
  }
  AttentionOptions local = LocalLayerAttention(hp);
  return std::make_unique<DecoderModel::Weights>(
      DecoderModel::Weights{std::move(hp), std::move(token_embd), std::move(output_norm), std::move(output),
                            std::move(layers), activations, std::move(local)});
}

}  // namespace posenc
