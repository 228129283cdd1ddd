// The vocabulary's names (position_scheme.h), the dispatch to each scheme's
// trainer, and what a scheme that does not act at a place does there.
#include "train/scheme_trainer.h"

#include <array>
#include <string>
#include <variant>

#include "posenc/error.h"
#include "posenc/position_scheme.h"
#include "train/tiny_lm_internal.h"

namespace posenc {
namespace {

// Each alternative default-constructed, in the variant's order.
template <std::size_t... I>
constexpr std::array<PositionScheme, sizeof...(I)> EveryScheme(std::index_sequence<I...> /*indices*/) {
  return {PositionScheme(std::in_place_index<I>)...};
}

const std::array<PositionScheme, std::variant_size_v<PositionScheme>>& Schemes() {
  static const auto schemes = EveryScheme(std::make_index_sequence<std::variant_size_v<PositionScheme>>());
  return schemes;
}

}  // namespace

std::string_view PositionSchemeName(const PositionScheme& scheme) {
  return std::visit([](const auto& s) { return s.kName; }, scheme);
}

std::span<const PositionScheme> AllPositionSchemes() { return Schemes(); }

std::string PositionSchemeList() {
  std::string list;
  for (const PositionScheme& scheme : Schemes())
    list += (list.empty() ? "" : ", ") + std::string(PositionSchemeName(scheme));
  return list;
}

PositionScheme ParsePositionScheme(std::string_view name, const char* op, const char* parameter) {
  for (const PositionScheme& scheme : Schemes()) {
    if (name == PositionSchemeName(scheme)) return scheme;
  }
  ThrowError(op, parameter, FormatValue(name), "must be one of " + PositionSchemeList());
}

namespace tiny_lm {

std::unique_ptr<SchemeTrainer> MakeSchemeTrainer(const TinyLmConfig& config) {
  return std::visit([&](const auto& scheme) { return MakeSchemeTrainer(scheme, config); }, config.scheme);
}

std::vector<double> SchemeTrainer::InputPositions(const TinyLmParams& /*params*/, std::int64_t /*length*/) const {
  return {};
}

void SchemeTrainer::InputPositionsBackward(const TinyLmParams& /*params*/, std::span<const double> /*dpositions*/,
                                           std::int64_t /*length*/, TinyLmParams& /*grads*/) const {}

std::vector<double> SchemeTrainer::InputEmbedding(const TinyLmParams& /*params*/,
                                                  std::span<const std::uint8_t> /*inputs*/,
                                                  std::span<const std::int64_t> /*positions*/) const {
  return {};
}

void SchemeTrainer::InputEmbeddingBackward(const TinyLmParams& /*params*/, std::span<const std::uint8_t> /*inputs*/,
                                           std::span<const std::int64_t> /*positions*/, std::span<const double> /*dx*/,
                                           TinyLmParams& /*grads*/) const {}

std::vector<std::vector<double>> SchemeTrainer::LayerInputPositions(const TinyLmParams& /*params*/,
                                                                    std::int64_t /*length*/) const {
  return {};
}

void SchemeTrainer::LayerInputPositionsBackward(const TinyLmParams& /*params*/, std::int64_t /*length*/,
                                                const std::vector<std::vector<double>>& /*dpositions*/,
                                                TinyLmParams& /*grads*/) const {}

LayerTerms SchemeTrainer::Layer(const TinyLmParams& /*params*/, std::int64_t /*layer*/, std::int64_t /*length*/) const {
  return {};
}

void SchemeTrainer::LayerBackward(const TinyLmParams& /*params*/, std::int64_t /*layer*/, std::int64_t /*length*/,
                                  const LayerTermGrads& /*dterms*/, TinyLmParams& /*grads*/) const {}

void SchemeTrainer::CheckLength(std::int64_t /*length*/, bool /*gradients*/) const {}

double SchemeTrainer::ScratchBytes(std::int64_t /*batch*/) const { return 0.0; }

KernelAttention SchemeKernelAttention(const TinyLmConfig& config, const TinyLmParams& params) {
  const std::unique_ptr<SchemeTrainer> trainer = MakeSchemeTrainer(config);
  std::vector<AttentionOptions> layers;
  for (std::int64_t l = 0; l < config.layers; ++l) {
    std::optional<PositionEncoding> encoding = trainer->KernelEncoding(params, l);
    if (!encoding) return {};
    layers.push_back({.encoding = std::move(*encoding)});
  }
  return [layers = std::move(layers)](std::int64_t layer) { return layers[static_cast<std::size_t>(layer)]; };
}

}  // namespace tiny_lm
}  // namespace posenc
