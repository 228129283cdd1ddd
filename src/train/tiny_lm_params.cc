// The tiny model's tensors: names and shapes from the config (the common
// ones here, the scheme's from its trainer), the deterministic
// initialization, and the check that params fit a config.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "posenc/error.h"
#include "posenc/tiny_lm.h"
#include "train/scheme_trainer.h"
#include "train/tensor_init.h"
#include "train/tiny_lm_internal.h"
#include "util/split_mix64.h"

namespace posenc {
namespace tiny_lm {

namespace {

// FNV-1a of the tensor name: each tensor has its own stream.
std::uint64_t NameHash(std::string_view name) {
  std::uint64_t h = 0xCBF29CE484222325ULL;
  for (const char c : name) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001B3ULL;
  return h;
}

}  // namespace

InitStream::InitStream(std::uint64_t seed, std::string_view name)
    : key_(SplitMix64(SplitMix64(seed) ^ NameHash(name))) {}

double InitStream::Uniform(std::uint64_t counter) const {
  return (static_cast<double>(SplitMix64(key_ + counter) >> 11) + 0.5) * 0x1p-53;
}

double InitStream::Normal(std::uint64_t e) const {
  const double u1 = Uniform(2 * e), u2 = Uniform(2 * e + 1);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

void FillNormal(TinyLmTensor& t, std::uint64_t seed, double stddev) {
  const InitStream stream(seed, t.name);
  for (std::size_t e = 0; e < t.values.size(); ++e) t.values[e] = static_cast<float>(stddev * stream.Normal(e));
}

void FillUniform(TinyLmTensor& t, std::uint64_t seed, double low, double high) {
  const InitStream stream(seed, t.name);
  for (std::size_t e = 0; e < t.values.size(); ++e) {
    t.values[e] = static_cast<float>(low + (high - low) * stream.Uniform(e));
  }
}

void FillConstant(TinyLmTensor& t, float value) { std::fill(t.values.begin(), t.values.end(), value); }

}  // namespace tiny_lm

namespace {

using tiny_lm::kOp;
using tiny_lm::SchemeTensor;

constexpr double kStd = 0.02;

// Calls f(tensor, declaration) for every tensor the config's model has, in
// the one fixed order (TinyLmTensorList's): token_embd, the scheme's
// model-wide tensors, per block attn_norm, attn_qkv, attn_output, the
// scheme's tensors of the layer, ffn_norm, ffn_up, ffn_down; output_norm.
// `Params` is TinyLmParams or its const; params.blocks and every scheme
// list must already have their sizes (Sized below).
template <class Params, class F>
void ForEachTensor(const TinyLmConfig& config, const tiny_lm::SchemeTrainer& trainer, Params& params, F&& f) {
  using Shape = std::vector<std::int64_t>;
  const std::int64_t d = config.d_model;
  const double residual_std = kStd / std::sqrt(2.0 * static_cast<double>(config.layers));
  const auto normal = [](double stddev) {
    return [stddev](TinyLmTensor& t, std::uint64_t seed) { tiny_lm::FillNormal(t, seed, stddev); };
  };
  const auto ones = [](TinyLmTensor& t, std::uint64_t) { tiny_lm::FillConstant(t, 1.0f); };
  f(params.token_embd, SchemeTensor{"token_embd.weight", Shape{TinyLmConfig::kVocab, d}, true, normal(kStd)});
  const std::vector<SchemeTensor> model_wide = trainer.Tensors(tiny_lm::kModelWide);
  for (std::size_t i = 0; i < model_wide.size(); ++i) f(params.scheme[i], model_wide[i]);
  for (std::int64_t l = 0; l < config.layers; ++l) {
    auto& block = params.blocks[static_cast<std::size_t>(l)];
    const std::string prefix = "blk." + std::to_string(l) + ".";
    f(block.attn_norm, SchemeTensor{prefix + "attn_norm.weight", Shape{d}, false, ones});
    f(block.attn_qkv, SchemeTensor{prefix + "attn_qkv.weight", Shape{3 * d, d}, true, normal(kStd)});
    f(block.attn_output, SchemeTensor{prefix + "attn_output.weight", Shape{d, d}, true, normal(residual_std)});
    const std::vector<SchemeTensor> own = trainer.Tensors(l);
    for (std::size_t i = 0; i < own.size(); ++i) f(block.scheme[i], own[i]);
    f(block.ffn_norm, SchemeTensor{prefix + "ffn_norm.weight", Shape{d}, false, ones});
    f(block.ffn_up, SchemeTensor{prefix + "ffn_up.weight", Shape{config.ffn_hidden, d}, true, normal(kStd)});
    f(block.ffn_down,
      SchemeTensor{prefix + "ffn_down.weight", Shape{d, config.ffn_hidden}, true, normal(residual_std)});
  }
  f(params.output_norm, SchemeTensor{"output_norm.weight", Shape{d}, false, ones});
}

// Params with the config's number of blocks and scheme tensors, all empty.
TinyLmParams Sized(const TinyLmConfig& config, const tiny_lm::SchemeTrainer& trainer) {
  TinyLmParams params;
  params.scheme.resize(trainer.Tensors(tiny_lm::kModelWide).size());
  params.blocks.resize(static_cast<std::size_t>(config.layers));
  for (std::int64_t l = 0; l < config.layers; ++l) {
    params.blocks[static_cast<std::size_t>(l)].scheme.resize(trainer.Tensors(l).size());
  }
  return params;
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

template <class Params>
auto& FindTensor(Params& params, std::string_view name) {
  using Tensor = std::remove_reference_t<decltype((params.token_embd))>;  // const for const params
  std::vector<Tensor*> all{&params.token_embd, &params.output_norm};
  for (auto& t : params.scheme) all.push_back(&t);
  for (auto& block : params.blocks) {
    for (Tensor* t :
         {&block.attn_norm, &block.attn_qkv, &block.attn_output, &block.ffn_norm, &block.ffn_up, &block.ffn_down}) {
      all.push_back(t);
    }
    for (auto& t : block.scheme) all.push_back(&t);
  }
  for (Tensor* t : all) {
    if (t->name == name) return *t;
  }
  ThrowError(kOp, "tensor", FormatValue(name), "is not a tensor of this model");
}

}  // namespace

TinyLmTensor& TinyLmParams::Tensor(std::string_view name) { return FindTensor(*this, name); }
const TinyLmTensor& TinyLmParams::Tensor(std::string_view name) const { return FindTensor(*this, name); }

TinyLmParams ZeroTinyLmParams(const TinyLmConfig& config) {
  const std::unique_ptr<tiny_lm::SchemeTrainer> trainer = tiny_lm::MakeSchemeTrainer(config);  // validates
  TinyLmParams params = Sized(config, *trainer);
  ForEachTensor(config, *trainer, params, [](TinyLmTensor& t, const SchemeTensor& declared) {
    t.name = declared.name;
    t.shape = declared.shape;
    t.values.assign(static_cast<std::size_t>(Elements(declared.shape)), 0.0f);
    t.decays = declared.decays;
  });
  return params;
}

TinyLmParams InitTinyLm(const TinyLmConfig& config, std::uint64_t seed) {
  const std::unique_ptr<tiny_lm::SchemeTrainer> trainer = tiny_lm::MakeSchemeTrainer(config);
  TinyLmParams params = ZeroTinyLmParams(config);
  ForEachTensor(config, *trainer, params,
                [seed](TinyLmTensor& t, const SchemeTensor& declared) { declared.init(t, seed); });
  return params;
}

void ValidateTinyLmParams(const TinyLmConfig& config, const TinyLmParams& params) {
  const std::unique_ptr<tiny_lm::SchemeTrainer> trainer = tiny_lm::MakeSchemeTrainer(config);  // validates
  const TinyLmParams sized = Sized(config, *trainer);
  Require(params.blocks.size() == sized.blocks.size(), kOp, "params.blocks.size()", params.blocks.size(),
          "must equal layers = " + std::to_string(config.layers));
  const auto require_count = [&](std::size_t have, std::size_t want, const std::string& where) {
    Require(have == want, kOp, where + ".size()", have,
            "must be " + std::to_string(want) + ": the " + std::string(PositionSchemeName(config.scheme)) +
                " scheme's tensors there");
  };
  require_count(params.scheme.size(), sized.scheme.size(), "params.scheme");
  for (std::size_t l = 0; l < sized.blocks.size(); ++l) {
    require_count(params.blocks[l].scheme.size(), sized.blocks[l].scheme.size(),
                  "params.blocks[" + std::to_string(l) + "].scheme");
  }
  ForEachTensor(config, *trainer, params, [](const TinyLmTensor& t, const SchemeTensor& declared) {
    const std::string& name = declared.name;
    Require(t.name == name, kOp, "tensor name", t.name, "must be " + QuoteForMessage(name) + " for this config");
    Require(t.shape == declared.shape, kOp, name + " shape", Verbatim{ShapeText(t.shape)},
            "must be " + ShapeText(declared.shape) + " for this config");
    Require(static_cast<std::int64_t>(t.values.size()) == Elements(declared.shape), kOp, name + " values.size()",
            t.values.size(), "must be the product of its shape " + ShapeText(declared.shape));
  });
}

std::int64_t TinyLmParameterCount(const TinyLmConfig& config) {
  const std::unique_ptr<tiny_lm::SchemeTrainer> trainer = tiny_lm::MakeSchemeTrainer(config);  // validates
  const TinyLmParams shapes_only = Sized(config, *trainer);  // declarations are walked, no values allocated
  std::int64_t count = 0;
  ForEachTensor(config, *trainer, shapes_only,
                [&](const TinyLmTensor&, const SchemeTensor& declared) { count += Elements(declared.shape); });
  return count;
}

std::vector<TinyLmTensor*> TinyLmTensorList(const TinyLmConfig& config, TinyLmParams& params) {
  ValidateTinyLmParams(config, params);
  const std::unique_ptr<tiny_lm::SchemeTrainer> trainer = tiny_lm::MakeSchemeTrainer(config);
  std::vector<TinyLmTensor*> list;
  ForEachTensor(config, *trainer, params, [&](TinyLmTensor& t, const SchemeTensor&) { list.push_back(&t); });
  return list;
}

std::vector<const TinyLmTensor*> TinyLmTensorList(const TinyLmConfig& config, const TinyLmParams& params) {
  ValidateTinyLmParams(config, params);
  const std::unique_ptr<tiny_lm::SchemeTrainer> trainer = tiny_lm::MakeSchemeTrainer(config);
  std::vector<const TinyLmTensor*> list;
  ForEachTensor(config, *trainer, params, [&](const TinyLmTensor& t, const SchemeTensor&) { list.push_back(&t); });
  return list;
}

}  // namespace posenc
