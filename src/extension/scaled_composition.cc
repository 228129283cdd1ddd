// Frequency methods over a model's own scaling. With w_k the model's
// inv_freq at the target length L (its llama3, YaRN, linear, LongRoPE, NTK
// or factor-scaled table), a its attention factor, L_train its effective
// length and s = the method's factor:
//   linear       w'_k = w_k / s
//   ntk          w'_k = w_k s^(-2k/(r-2))            (the base theta s^(r/(r-2)))
//   dynamic-ntk  ntk with s = f L / L_train - (f - 1) past L_train
//   yarn         w'_k = (1 - g_k) w_k / s + g_k w_k, g_k the ramp over the
//                model's own rotations L_train w_k / 2 pi (in log rotations)
// and the attention factor a, or for YaRN the model's YaRN at the product of
// the factors (a YaRN model) or a (0.1 ln s + 1) (any other).
#include "extension/scaled_composition.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>
#include <type_traits>
#include <variant>

#include "posenc/context_extension.h"
#include "posenc/error.h"

namespace posenc::detail {
namespace {

constexpr const char* kOp = "context extension";

// NTK-aware scaling as a divisor per pair: theta' = theta alpha^(r/(r-2))
// turns theta^(-2k/r) into theta^(-2k/r) alpha^(-2k/(r-2)), a factor that
// any table can take.
void NtkOver(RopeFrequencies& f, double alpha, std::int64_t rotary_dim) {
  const double r = static_cast<double>(rotary_dim);
  for (std::size_t k = 0; k < f.inv_freq.size(); ++k) {
    f.inv_freq[k] *= std::pow(alpha, -2.0 * static_cast<double>(k) / (r - 2.0));
  }
}

// YaRN's extrapolation weight of a pair that turns `rotations` times within
// the original length: 0 below beta_slow turns, 1 above beta_fast, linear in
// ln(rotations) between. For plain frequencies the pair index is affine in
// ln(rotations), so this is Hugging Face's ramp over the correction
// dimensions without their rounding to whole dimensions.
double YarnWeight(double rotations, double beta_slow, double beta_fast) {
  const double ramp = (std::log(rotations) - std::log(beta_slow)) / (std::log(beta_fast) - std::log(beta_slow));
  return std::clamp(ramp, 0.0, 1.0);
}

struct Composer {
  const RopeSpec& model;
  std::int64_t target_length;
  RopeFrequencies base;  // the model's, at the target length

  RopeFrequencies operator()(const LinearScaling& s) const {
    RopeFrequencies f = base;
    for (double& w : f.inv_freq) w /= s.factor;
    return f;
  }
  RopeFrequencies operator()(const NtkAwareScaling& s) const {
    RopeFrequencies f = base;
    NtkOver(f, s.alpha, model.RotaryDim());
    return f;
  }
  RopeFrequencies operator()(const DynamicNtkScaling& s) const {
    RopeFrequencies f = base;
    if (target_length > s.original_max_position) {
      const double length = static_cast<double>(target_length) / static_cast<double>(s.original_max_position);
      NtkOver(f, s.factor * length - (s.factor - 1.0), model.RotaryDim());
    }
    return f;
  }
  RopeFrequencies operator()(const YarnScaling& s) const {
    RopeFrequencies f = base;
    const double length = static_cast<double>(s.original_max_position);
    for (double& w : f.inv_freq) {
      const double g = YarnWeight(length * w / (2.0 * std::numbers::pi), s.beta_slow, s.beta_fast);
      w = (1.0 - g) * w / s.factor + g * w;
    }
    const auto* model_yarn = std::get_if<YarnScaling>(&model.scaling);
    if (model_yarn && !model_yarn->attention_factor) {
      // One interpolation by the product of the factors: the model's own
      // temperature formula at it, as Hugging Face computes it for a YaRN
      // config whose factor is raised (multiplying would count the model's
      // part twice).
      RopeSpec total = model;
      auto& yarn = std::get<YarnScaling>(total.scaling);
      yarn.factor *= s.factor;
      f.attention_factor = ComputeRopeFrequencies(total).attention_factor;
    } else {
      f.attention_factor *= s.factor <= 1.0 ? 1.0 : 0.1 * std::log(s.factor) + 1.0;
    }
    return f;
  }
  template <class Other>
  RopeFrequencies operator()(const Other& /*other*/) const {
    ThrowError(kOp, "method scaling", FormatValue(std::string(RopeScalingName(Other{}))),
               "is not a frequency method's scaling (linear, ntk, dynamic or yarn)");
  }
};

}  // namespace

RopeFrequencies ComposeOverModelScaling(const RopeSpec& model, const RopeScaling& method, std::string_view method_name,
                                        std::int64_t target_length) {
  if (std::holds_alternative<DynamicNtkScaling>(model.scaling)) {
    // The position methods, from the methods' own kinds: a new one is named without an edit here.
    std::string position_methods;
    for (const ExtensionMethod& method : AllExtensionMethods()) {
      if (ExtensionMethodKind(method) != ExtensionKind::kPositions) continue;
      position_methods += (position_methods.empty() ? "" : ", ") + std::string(ExtensionMethodName(method));
    }
    ThrowError(kOp, "method", FormatValue(std::string(method_name)),
               "does not compose with the model's rope scaling \"dynamic\": dynamic NTK recomputes its base from "
               "the current length, so there is no fixed table to rescale (a position method composes: " +
                   position_methods + ")");
  }
  const bool ntk = std::holds_alternative<NtkAwareScaling>(method) || std::holds_alternative<DynamicNtkScaling>(method);
  Require(!ntk || model.RotaryDim() > 2, kOp, "rotary_dim", model.RotaryDim(),
          "must be > 2 for NTK scaling (exponent r/(r-2))");
  return std::visit(Composer{model, target_length, ComputeRopeFrequencies(model, target_length)}, method);
}

}  // namespace posenc::detail
