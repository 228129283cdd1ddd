#include "model/decoder_weights.h"

#include <string>
#include <variant>

#include "posenc/error.h"
#include "posenc/gguf_metadata.h"
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

std::vector<double> FactorTensor(const GgufFile& file, const GgufTensorInfo& tensor, std::int64_t pairs) {
  const std::vector<float> factors = file.Dequantize(CheckedTensor(file, tensor.name, {pairs}));
  return {factors.begin(), factors.end()};
}

// The frequency scalings GGUF files carry as tensors of [rotary_dim / 2]
// per-pair divisors of the frequencies (llama.cpp's converter; its
// get_rope_factors reads them for any architecture):
// - rope_freqs: Llama 3's scaling, computed once from the config;
// - rope_factors_short and rope_factors_long: LongRoPE (Ding et al. 2024), with the
//   original length in rope.scaling.original_context_length (by default the
//   context length) and the attention factor in rope.scaling.attn_factor
//   (by default sqrt(1 + ln(s) / ln(original)), s = context_length /
//   original, as Hugging Face's). llama.cpp takes the long set when its
//   context exceeds the original length; posenc, as Hugging Face, when the
//   sequence does (ComputeRopeFrequencies at the planned length).
// A RopeSpec holds one scaling: these tensors with rope.scaling.type
// metadata (which RopeFromGguf read), or both kinds at once, are refused.
void ReadRopeFactorTensors(const GgufFile& file, DecoderHyperparams& hp) {
  const GgufTensorInfo* freqs = file.FindTensor("rope_freqs.weight");
  const GgufTensorInfo* short_factors = file.FindTensor("rope_factors_short.weight");
  const GgufTensorInfo* long_factors = file.FindTensor("rope_factors_long.weight");
  const GgufTensorInfo* first = freqs ? freqs : short_factors ? short_factors : long_factors;
  if (first == nullptr) return;
  const std::string p = hp.architecture + ".";
  Require(std::holds_alternative<NoScaling>(hp.rope.scaling), kOp, first->name, Verbatim{"present"},
          "cannot scale the RoPE together with " + p + "rope.scaling.type = " +
              std::string(RopeScalingName(hp.rope.scaling)) + " (posenc's RoPE holds one scaling)");
  Require(freqs == nullptr || (short_factors == nullptr && long_factors == nullptr), kOp, first->name,
          Verbatim{"present"}, "cannot come with rope_factors_short/long (two scalings of one RoPE)");
  if (freqs) {
    hp.rope.scaling = FrequencyFactorScaling{FactorTensor(file, *freqs, hp.rope.Pairs())};
  } else {
    Require(short_factors != nullptr && long_factors != nullptr, kOp,
            short_factors ? "rope_factors_long.weight" : "rope_factors_short.weight", Verbatim{"missing"},
            "LongRoPE needs both the short and the long factors");
    const GgufMetadata& meta = file.metadata();
    LongRopeScaling longrope;
    longrope.short_factor = FactorTensor(file, *short_factors, hp.rope.Pairs());
    longrope.long_factor = FactorTensor(file, *long_factors, hp.rope.Pairs());
    longrope.original_max_position =
        GgufCount(meta, p + "rope.scaling.original_context_length", kOp).value_or(hp.context_length);
    longrope.factor = static_cast<double>(hp.context_length) / static_cast<double>(longrope.original_max_position);
    longrope.attention_factor = GgufNumber(meta, p + "rope.scaling.attn_factor", kOp);
    hp.rope.scaling = std::move(longrope);
  }
  hp.rope.Validate();  // every factor finite and > 0
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
  ReadRopeFactorTensors(file, hp);
  hp.tied_output = file.FindTensor("output.weight") == nullptr;
  hp.fused_qkv = file.FindTensor(Block(0, "attn_qkv.weight")) != nullptr;
  // A family may require the biases (then a file without them is refused at
  // load); any file may have them.
  hp.qkv_bias = hp.qkv_bias || file.FindTensor(Block(0, hp.fused_qkv ? "attn_qkv.bias" : "attn_q.bias")) != nullptr;
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
        hp.fused_qkv
            ? matrix({{name("attn_qkv.weight"), q_dim + 2 * kv_dim}}, d)
            : matrix({{name("attn_q.weight"), q_dim}, {name("attn_k.weight"), kv_dim}, {name("attn_v.weight"), kv_dim}},
                     d),
        matrix({{name("attn_output.weight"), d}}, q_dim),
        hp.fused_gate_up ? matrix({{name("ffn_up.weight"), 2 * ffn}}, d)
                         : matrix({{name("ffn_gate.weight"), ffn}, {name("ffn_up.weight"), ffn}}, d),
        matrix({{name("ffn_down.weight"), d}}, ffn),
    });
    if (hp.qk_norm) {
      layer.attn_q_norm = ReadDecoderTensor(file, name("attn_q_norm.weight"), {hp.head_dim});
      layer.attn_k_norm = ReadDecoderTensor(file, name("attn_k_norm.weight"), {hp.head_dim});
    }
    if (hp.qkv_bias && hp.fused_qkv) {
      layer.qkv_bias = ReadDecoderTensor(file, name("attn_qkv.bias"), {q_dim + 2 * kv_dim});
    } else if (hp.qkv_bias) {
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
