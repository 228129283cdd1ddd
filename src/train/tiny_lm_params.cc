// The tiny model's tensors: names and shapes from the config, the
// deterministic initialization, and the check that params fit a config.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/error.h"
#include "posenc/tiny_lm.h"
#include "util/split_mix64.h"
#include "train/tiny_lm_internal.h"

namespace posenc {
namespace {

using tiny_lm::kOp;

// Calls f(tensor, name, shape) for every tensor the config's model has, in
// the one fixed order (TinyLmTensorList's). `Params` is TinyLmParams or its
// const; params.blocks must already have config.layers entries.
template <class Params, class F>
void ForEachTensor(const TinyLmConfig& config, Params& params, F&& f) {
  using Shape = std::vector<std::int64_t>;
  const std::int64_t d = config.d_model;
  f(params.token_embd, "token_embd.weight", Shape{TinyLmConfig::kVocab, d});
  if (config.scheme == PositionScheme::kLearned) {
    f(params.position_embd, "position_embd.weight", Shape{config.train_length, d});
  }
  if (config.scheme == PositionScheme::kT5)
    f(params.attn_rel_b, "attn_rel_b.weight", Shape{config.t5_buckets, config.heads});
  for (std::int64_t l = 0; l < config.layers; ++l) {
    auto& block = params.blocks[static_cast<std::size_t>(l)];
    const std::string prefix = "blk." + std::to_string(l) + ".";
    f(block.attn_norm, prefix + "attn_norm.weight", Shape{d});
    f(block.attn_qkv, prefix + "attn_qkv.weight", Shape{3 * d, d});
    f(block.attn_output, prefix + "attn_output.weight", Shape{d, d});
    if (config.scheme == PositionScheme::kShaw) {
      f(block.attn_rel_k, prefix + "attn_rel_k.weight", Shape{2 * config.shaw_clip + 1, config.HeadDim()});
      f(block.attn_rel_v, prefix + "attn_rel_v.weight", Shape{2 * config.shaw_clip + 1, config.HeadDim()});
    }
    if (config.scheme == PositionScheme::kKerple) {
      f(block.attn_kerple_r1, prefix + "attn_kerple_r1.weight", Shape{config.heads});
      f(block.attn_kerple_r2, prefix + "attn_kerple_r2.weight", Shape{config.heads});
    }
    f(block.ffn_norm, prefix + "ffn_norm.weight", Shape{d});
    f(block.ffn_up, prefix + "ffn_up.weight", Shape{config.ffn_hidden, d});
    f(block.ffn_down, prefix + "ffn_down.weight", Shape{d, config.ffn_hidden});
  }
  f(params.output_norm, "output_norm.weight", Shape{d});
}

std::int64_t Elements(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (const std::int64_t s : shape) n *= s;
  return n;
}

std::string ShapeText(const std::vector<std::int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

// FNV-1a of the tensor name: each tensor has its own stream.
std::uint64_t NameHash(std::string_view name) {
  std::uint64_t h = 0xCBF29CE484222325ULL;
  for (const char c : name) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001B3ULL;
  return h;
}

// Uniform draws of one tensor: draw c is a pure function of (seed, name, c).
class Stream {
 public:
  Stream(std::uint64_t seed, std::string_view name) : key_(SplitMix64(SplitMix64(seed) ^ NameHash(name))) {}
  // In (0, 1): the top 53 bits, centred in their interval (never 0: log below).
  double Uniform(std::uint64_t counter) const {
    return (static_cast<double>(SplitMix64(key_ + counter) >> 11) + 0.5) * 0x1p-53;
  }
  // Box-Muller (written here: std::normal_distribution's output is
  // implementation-defined). Element e uses draws 2e and 2e+1. The double
  // is rounded to float: a last-bit difference of two libms' log or cos
  // changes the float only in the rare case it straddles a rounding point.
  double Normal(std::uint64_t e) const {
    const double u1 = Uniform(2 * e), u2 = Uniform(2 * e + 1);
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }

 private:
  std::uint64_t key_;
};

void FillNormal(TinyLmTensor& t, std::uint64_t seed, double stddev) {
  const Stream stream(seed, t.name);
  for (std::size_t e = 0; e < t.values.size(); ++e) t.values[e] = static_cast<float>(stddev * stream.Normal(e));
}

// KERPLE's r ~ U(0, scale) clamped to >= 0.01 (the paper's init and eps),
// stored as raw = softplus^-1(r) = log(expm1(r)).
void FillKerple(TinyLmTensor& t, std::uint64_t seed, double scale) {
  const Stream stream(seed, t.name);
  for (std::size_t e = 0; e < t.values.size(); ++e) {
    const double r = std::max(0.01, scale * stream.Uniform(e));
    t.values[e] = static_cast<float>(std::log(std::expm1(r)));
  }
}

void FillOnes(TinyLmTensor& t) { std::fill(t.values.begin(), t.values.end(), 1.0f); }

}  // namespace

TinyLmParams ZeroTinyLmParams(const TinyLmConfig& config) {
  ValidateTinyLmConfig(config);
  TinyLmParams params;
  params.blocks.resize(static_cast<std::size_t>(config.layers));
  ForEachTensor(config, params, [](TinyLmTensor& t, std::string name, std::vector<std::int64_t> shape) {
    t.name = std::move(name);
    t.values.assign(static_cast<std::size_t>(Elements(shape)), 0.0f);
    t.shape = std::move(shape);
  });
  return params;
}

TinyLmParams InitTinyLm(const TinyLmConfig& config, std::uint64_t seed) {
  TinyLmParams p = ZeroTinyLmParams(config);
  constexpr double kStd = 0.02;
  const double residual_std = kStd / std::sqrt(2.0 * static_cast<double>(config.layers));
  FillNormal(p.token_embd, seed, kStd);
  if (config.scheme == PositionScheme::kLearned) FillNormal(p.position_embd, seed, 0.01);
  if (config.scheme == PositionScheme::kT5) FillNormal(p.attn_rel_b, seed, kStd);
  for (TinyLmBlock& block : p.blocks) {
    FillOnes(block.attn_norm);
    FillNormal(block.attn_qkv, seed, kStd);
    FillNormal(block.attn_output, seed, residual_std);
    FillOnes(block.ffn_norm);
    FillNormal(block.ffn_up, seed, kStd);
    FillNormal(block.ffn_down, seed, residual_std);
    if (config.scheme == PositionScheme::kShaw) {
      FillNormal(block.attn_rel_k, seed, kStd);
      FillNormal(block.attn_rel_v, seed, kStd);
    }
    if (config.scheme == PositionScheme::kKerple) {
      FillKerple(block.attn_kerple_r1, seed, 2.0);
      FillKerple(block.attn_kerple_r2, seed, 1.0);
    }
  }
  FillOnes(p.output_norm);
  return p;
}

void ValidateTinyLmParams(const TinyLmConfig& config, const TinyLmParams& params) {
  ValidateTinyLmConfig(config);
  Require(static_cast<std::int64_t>(params.blocks.size()) == config.layers, kOp, "params.blocks.size()",
          params.blocks.size(), "must equal layers = " + std::to_string(config.layers));
  ForEachTensor(
      config, params, [](const TinyLmTensor& t, const std::string& name, const std::vector<std::int64_t>& shape) {
        Require(t.name == name, kOp, "tensor name", t.name, "must be " + QuoteForMessage(name) + " for this config");
        Require(t.shape == shape, kOp, name + " shape", Verbatim{ShapeText(t.shape)},
                "must be " + ShapeText(shape) + " for this config");
        Require(static_cast<std::int64_t>(t.values.size()) == Elements(shape), kOp, name + " values.size()",
                t.values.size(), "must be the product of its shape " + ShapeText(shape));
      });
}

std::int64_t TinyLmParameterCount(const TinyLmConfig& config) {
  ValidateTinyLmConfig(config);
  TinyLmParams shapes_only;  // names and shapes are walked, no values allocated
  shapes_only.blocks.resize(static_cast<std::size_t>(config.layers));
  std::int64_t count = 0;
  ForEachTensor(config, shapes_only,
                [&](const TinyLmTensor&, const std::string&, const std::vector<std::int64_t>& shape) {
                  count += Elements(shape);
                });
  return count;
}

std::vector<TinyLmTensor*> TinyLmTensorList(const TinyLmConfig& config, TinyLmParams& params) {
  ValidateTinyLmParams(config, params);
  std::vector<TinyLmTensor*> list;
  ForEachTensor(config, params, [&](TinyLmTensor& t, const std::string&, const auto&) { list.push_back(&t); });
  return list;
}

std::vector<const TinyLmTensor*> TinyLmTensorList(const TinyLmConfig& config, const TinyLmParams& params) {
  ValidateTinyLmParams(config, params);
  std::vector<const TinyLmTensor*> list;
  ForEachTensor(config, params, [&](const TinyLmTensor& t, const std::string&, const auto&) { list.push_back(&t); });
  return list;
}

}  // namespace posenc
