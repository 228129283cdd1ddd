// KERPLE-log (Chi et al., NeurIPS 2022): the bias -r1_h log(1 + r2_h (i - j))
// per layer and head, r = softplus(raw) > 0 (the paper clamps r >= 0.01
// after each step instead; softplus keeps the loss smooth and needs nothing
// from the optimizer). Init: r1 ~ U(0, 2), r2 ~ U(0, 1), at least 0.01
// (the paper's), stored raw = softplus^-1(r) = log(expm1(r)). The kernel
// has no KERPLE: evaluation runs the trainer's attention.
#include <algorithm>
#include <cmath>

#include "train/scheme_trainer.h"
#include "train/tensor_init.h"

namespace posenc::tiny_lm {
namespace {

// Both written so that exp never overflows: softplus(x) = max(x, 0) + log1p(exp(-|x|)).
double Softplus(double x) { return std::max(x, 0.0) + std::log1p(std::exp(-std::abs(x))); }
double Sigmoid(double x) { return x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x)); }

// r ~ U(0, scale) clamped to >= 0.01, stored raw.
void FillKerple(TinyLmTensor& t, std::uint64_t seed, double scale) {
  const InitStream stream(seed, t.name);
  for (std::size_t e = 0; e < t.values.size(); ++e) {
    const double r = std::max(0.01, scale * stream.Uniform(e));
    t.values[e] = static_cast<float>(std::log(std::expm1(r)));
  }
}

class KerpleTrainer final : public SchemeTrainer {
 public:
  using SchemeTrainer::SchemeTrainer;

  // "blk.N.attn_kerple_r1.weight", "blk.N.attn_kerple_r2.weight" [heads], raw.
  std::vector<SchemeTensor> Tensors(std::int64_t layer) const override {
    if (layer == kModelWide) return {};
    const std::string prefix = "blk." + std::to_string(layer) + ".";
    return {{.name = prefix + "attn_kerple_r1.weight",
             .shape = {config().heads},
             .init = [](TinyLmTensor& t, std::uint64_t seed) { FillKerple(t, seed, 2.0); }},
            {.name = prefix + "attn_kerple_r2.weight",
             .shape = {config().heads},
             .init = [](TinyLmTensor& t, std::uint64_t seed) { FillKerple(t, seed, 1.0); }}};
  }

  LayerTerms Layer(const TinyLmParams& params, std::int64_t layer, std::int64_t length) const override {
    const TinyLmBlock& block = params.blocks[static_cast<std::size_t>(layer)];
    LayerTerms terms;
    terms.distance_bias.resize(static_cast<std::size_t>(config().heads * length));
    for (std::int64_t h = 0; h < config().heads; ++h) {
      const double r1 = Softplus(block.scheme[0].values[h]), r2 = Softplus(block.scheme[1].values[h]);
      for (std::int64_t delta = 0; delta < length; ++delta) {
        terms.distance_bias[h * length + delta] = -r1 * std::log1p(r2 * static_cast<double>(delta));
      }
    }
    return terms;
  }

  // bias = -r1 log(1 + r2 delta), r = softplus(raw), dr/draw = sigmoid(raw).
  void LayerBackward(const TinyLmParams& params, std::int64_t layer, std::int64_t length, const LayerTermGrads& dterms,
                     TinyLmParams& grads) const override {
    const TinyLmBlock& block = params.blocks[static_cast<std::size_t>(layer)];
    TinyLmBlock& grad = grads.blocks[static_cast<std::size_t>(layer)];
    for (std::int64_t h = 0; h < config().heads; ++h) {
      const double raw1 = block.scheme[0].values[h], raw2 = block.scheme[1].values[h];
      const double r1 = Softplus(raw1), r2 = Softplus(raw2);
      double d1 = 0, d2 = 0;
      for (std::int64_t delta = 0; delta < length; ++delta) {
        const double g = dterms.distance_bias[h * length + delta];
        const auto x = static_cast<double>(delta);
        d1 -= g * std::log1p(r2 * x);
        d2 -= g * r1 * x / (1.0 + r2 * x);
      }
      grad.scheme[0].values[h] += static_cast<float>(d1 * Sigmoid(raw1));
      grad.scheme[1].values[h] += static_cast<float>(d2 * Sigmoid(raw2));
    }
  }

  std::optional<PositionEncoding> KernelEncoding(const TinyLmParams& /*params*/,
                                                 std::int64_t /*layer*/) const override {
    return std::nullopt;
  }

  double ScratchBytes(std::int64_t batch) const override {  // float64 [B H, T] partials of the bias
    return sizeof(double) * static_cast<double>(batch * config().heads * config().PositionExtent());
  }
};

}  // namespace

std::unique_ptr<SchemeTrainer> MakeSchemeTrainer(const KerpleScheme& /*scheme*/, const TinyLmConfig& config) {
  return std::make_unique<KerpleTrainer>(config);
}

}  // namespace posenc::tiny_lm
