// FIRE (Li et al., ICLR 2024, "Functional Interpolation for Relative
// Positions Improves Long Context Transformers"), per layer:
//   b_h(i, j) = MLP_h(u),  u = psi(i - j) / (psi(max(i, threshold)) + eps),
//   psi(x) = log(|c| x + 1),   MLP_h(u) = sum_w down_hw ReLU(up_w u + up_bias_w)
// i the query's position (from 0). The threshold is |l| * train_length,
// l trained from 1 (the authors train a multiplier of their init length the
// same way), c trained from FireScheme::c. For queries below the threshold
// u depends on the distance alone; past it the log position of the query
// normalizes u into [0, 1], so the MLP never sees an input it was not
// trained on: that is the interpolation.
//
// Tensors of layer N: blk.N.attn_fire_up.weight [W], .bias [W] (nn.Linear(1, W)'s,
// U(-1, 1)), blk.N.attn_fire_down.weight [heads, W] (nn.Linear(W, heads)'s,
// U(-1/sqrt W, 1/sqrt W)), blk.N.attn_fire_c [1], blk.N.attn_fire_threshold
// [1]. None decays. The authors' output layer also has a bias; it is left
// out: a constant per head added to every logit of a softmax row changes
// nothing (its gradient is exactly 0). The kernel has no FIRE: evaluation
// runs the trainer's attention (a bias per (head, query, key)).
#include <algorithm>
#include <cmath>
#include <string>

#include "posenc/error.h"
#include "train/scheme_trainer.h"
#include "train/tensor_init.h"
#include "train/tiny_lm_internal.h"

namespace posenc::tiny_lm {
namespace {

constexpr double kEps = 1e-6;  // the authors' eps in the denominator

enum FireTensor : std::size_t { kUpWeight, kUpBias, kDownWeight, kC, kThreshold };

class FireTrainer final : public SchemeTrainer {
 public:
  FireTrainer(const FireScheme& scheme, const TinyLmConfig& config) : SchemeTrainer(config), scheme_(scheme) {
    RequireInRange(scheme.mlp_width, 1, kMaxWidth, "fire_mlp_width", "");
    Require(std::isfinite(scheme.c) && scheme.c > 0, kOp, "fire_c", scheme.c,
            "must be a finite number > 0 (psi(x) = log(c x + 1) grows with the distance)");
  }

  std::vector<SchemeTensor> Tensors(std::int64_t layer) const override {
    if (layer == kModelWide) return {};
    const std::string prefix = "blk." + std::to_string(layer) + ".attn_fire_";
    const std::int64_t width = scheme_.mlp_width;
    const auto uniform = [](double bound) {
      return [bound](TinyLmTensor& t, std::uint64_t seed) { FillUniform(t, seed, -bound, bound); };
    };
    const auto constant = [](double value) {
      return [value](TinyLmTensor& t, std::uint64_t /*seed*/) { FillConstant(t, static_cast<float>(value)); };
    };
    const double down = 1.0 / std::sqrt(static_cast<double>(width));
    return {{.name = prefix + "up.weight", .shape = {width}, .init = uniform(1.0)},
            {.name = prefix + "up.bias", .shape = {width}, .init = uniform(1.0)},
            {.name = prefix + "down.weight", .shape = {config().heads, width}, .init = uniform(down)},
            {.name = prefix + "c", .shape = {1}, .init = constant(scheme_.c)},
            {.name = prefix + "threshold", .shape = {1}, .init = constant(1.0)}};
  }

  LayerTerms Layer(const TinyLmParams& params, std::int64_t layer, std::int64_t length) const override {
    const Mlp mlp(*this, params, layer);
    const std::int64_t heads = config().heads;
    LayerTerms terms;
    terms.pair_bias.assign(static_cast<std::size_t>(heads * length * length), 0.0);
    std::vector<double> hidden(static_cast<std::size_t>(scheme_.mlp_width));
    for (std::int64_t i = 0; i < length; ++i) {
      for (std::int64_t delta = 0; delta <= i; ++delta) {
        const double u = mlp.Input(i, delta).u;
        for (std::int64_t w = 0; w < scheme_.mlp_width; ++w) hidden[w] = std::max(0.0, mlp.up_w[w] * u + mlp.up_b[w]);
        for (std::int64_t h = 0; h < heads; ++h) {
          double b = 0;
          for (std::int64_t w = 0; w < scheme_.mlp_width; ++w) b += mlp.down_w[h * scheme_.mlp_width + w] * hidden[w];
          terms.pair_bias[(h * length + i) * length + delta] = b;
        }
      }
    }
    return terms;
  }

  void LayerBackward(const TinyLmParams& params, std::int64_t layer, std::int64_t length, const LayerTermGrads& dterms,
                     TinyLmParams& grads) const override {
    const Mlp mlp(*this, params, layer);
    const std::int64_t heads = config().heads, width = scheme_.mlp_width;
    std::vector<double> d_up_w(width), d_up_b(width), d_down_w(heads * width);
    double d_c = 0, d_threshold = 0;
    std::vector<double> hidden(width), g(heads);
    for (std::int64_t i = 0; i < length; ++i) {
      for (std::int64_t delta = 0; delta <= i; ++delta) {
        const Mlp::In in = mlp.Input(i, delta);
        for (std::int64_t h = 0; h < heads; ++h) g[h] = dterms.pair_bias[(h * length + i) * length + delta];
        double du = 0;
        for (std::int64_t w = 0; w < width; ++w) {
          const double z = mlp.up_w[w] * in.u + mlp.up_b[w];
          hidden[w] = std::max(0.0, z);
          double dhidden = 0;
          for (std::int64_t h = 0; h < heads; ++h) {
            d_down_w[h * width + w] += g[h] * hidden[w];
            dhidden += g[h] * mlp.down_w[h * width + w];
          }
          const double dz = z > 0 ? dhidden : 0.0;
          d_up_w[w] += dz * in.u;
          d_up_b[w] += dz;
          du += dz * mlp.up_w[w];
        }
        d_c += du * in.du_dc;
        d_threshold += du * in.du_dthreshold;
      }
    }
    std::vector<TinyLmTensor>& out = grads.blocks[static_cast<std::size_t>(layer)].scheme;
    const auto add = [](TinyLmTensor& t, const std::vector<double>& d) {
      for (std::size_t e = 0; e < d.size(); ++e) t.values[e] += static_cast<float>(d[e]);
    };
    add(out[kUpWeight], d_up_w);
    add(out[kUpBias], d_up_b);
    add(out[kDownWeight], d_down_w);
    add(out[kC], {d_c});
    add(out[kThreshold], {d_threshold});
  }

  std::optional<PositionEncoding> KernelEncoding(const TinyLmParams& /*params*/,
                                                 std::int64_t /*layer*/) const override {
    return std::nullopt;
  }

  double ScratchBytes(std::int64_t batch) const override {  // float64 [B H, T, T] partials of the bias
    const auto length = static_cast<double>(config().train_length);
    return sizeof(double) * static_cast<double>(batch * config().heads) * length * length;
  }

 private:
  // One layer's parameters, read as float64, and the MLP's input.
  struct Mlp {
    Mlp(const FireTrainer& fire, const TinyLmParams& params, std::int64_t layer) {
      const std::vector<TinyLmTensor>& t = params.blocks[static_cast<std::size_t>(layer)].scheme;
      up_w.assign(t[kUpWeight].values.begin(), t[kUpWeight].values.end());
      up_b.assign(t[kUpBias].values.begin(), t[kUpBias].values.end());
      down_w.assign(t[kDownWeight].values.begin(), t[kDownWeight].values.end());
      c_raw = t[kC].values[0];
      threshold_raw = t[kThreshold].values[0];
      train_length = static_cast<double>(fire.config().train_length);
    }

    struct In {
      double u, du_dc, du_dthreshold;  // the derivatives with respect to the raw parameters
    };

    // u of query i and key i - delta, and its derivatives.
    In Input(std::int64_t i, std::int64_t delta) const {
      const double c = std::abs(c_raw), threshold = std::abs(threshold_raw) * train_length;
      const auto x = static_cast<double>(delta);
      const bool clamped = threshold > static_cast<double>(i);  // max(i, threshold) = threshold
      const double m = clamped ? threshold : static_cast<double>(i);
      const double a = std::log1p(c * x), b = std::log1p(c * m) + kEps;
      const double da_dc = x / (1.0 + c * x), db_dc = m / (1.0 + c * m);
      const double db_dm = clamped ? c / (1.0 + c * m) : 0.0;
      const double sign_c = c_raw < 0 ? -1.0 : 1.0, sign_t = threshold_raw < 0 ? -1.0 : 1.0;
      return {.u = a / b,
              .du_dc = sign_c * (da_dc * b - a * db_dc) / (b * b),
              .du_dthreshold = sign_t * train_length * (-a * db_dm / (b * b))};
    }

    std::vector<double> up_w, up_b, down_w;
    double c_raw = 0, threshold_raw = 0, train_length = 0;
  };

  FireScheme scheme_;
};

}  // namespace

std::unique_ptr<SchemeTrainer> MakeSchemeTrainer(const FireScheme& scheme, const TinyLmConfig& config) {
  return std::make_unique<FireTrainer>(scheme, config);
}

}  // namespace posenc::tiny_lm
