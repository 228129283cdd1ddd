// Frequency methods over a model's own RoPE scaling, in float64, one pair at
// a time from the formulas of docs/composition.md (written from the papers'
// forms, not from scaled_composition.cc): the oracle of the compositions'
// tests. The model's own table comes from ComputeRopeFrequencies, which
// tests/python holds to Hugging Face's ROPE_INIT_FUNCTIONS.
#include <cmath>
#include <numbers>
#include <string>
#include <variant>

#include "posenc/context_extension.h"
#include "posenc/error.h"

namespace posenc::reference {
namespace {

// YaRN's sqrt(1/t) = 0.1 ln s + 1 (Peng et al. 2023, section 3.4).
double Temperature(double s) { return s > 1 ? 0.1 * std::log(s) + 1 : 1.0; }

}  // namespace

RopeFrequencies ComposedFrequencies(const RopeSpec& model_rope, const ExtensionMethod& method,
                                    std::int64_t train_length, std::int64_t target_length) {
  const RopeFrequencies model = ComputeRopeFrequencies(model_rope, target_length);
  RopeFrequencies out = model;
  const double r = static_cast<double>(model_rope.RotaryDim());
  const double l_train = static_cast<double>(train_length);
  const double l = static_cast<double>(target_length);
  std::visit(
      [&](const auto& m) {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, LinearMethod>) {
          // Position interpolation: position p reads as p / s.
          for (double& w : out.inv_freq) w = w / *m.factor;
        } else if constexpr (std::is_same_v<M, NtkMethod> || std::is_same_v<M, DynamicNtkMethod>) {
          // The base theta becomes theta alpha^(r/(r-2)); pair k's angle
          // scales by (theta' / theta)^(-2k/r).
          double alpha = *m.factor;
          if constexpr (std::is_same_v<M, DynamicNtkMethod>) {
            alpha = l > l_train ? *m.factor * l / l_train - (*m.factor - 1) : 1.0;
          }
          const double base_ratio = std::pow(alpha, r / (r - 2));
          for (std::size_t k = 0; k < out.inv_freq.size(); ++k) {
            out.inv_freq[k] *= std::pow(base_ratio, -2.0 * static_cast<double>(k) / r);
          }
        } else if constexpr (std::is_same_v<M, YarnMethod>) {
          const double s = *m.factor;
          for (double& w : out.inv_freq) {
            // Wavelength lambda, turns within L_train; the ramp in
            // log2(turns) from beta_slow = 1 (0 turns of log) to beta_fast
            // = 32 (5).
            const double lambda = 2 * std::numbers::pi / w;
            const double turns = l_train / lambda;
            const double gamma = std::min(1.0, std::max(0.0, std::log2(turns) / 5.0));
            w = gamma * w + (1 - gamma) * (w / s);
          }
          const auto* yarn = std::get_if<YarnScaling>(&model_rope.scaling);
          if (yarn && !yarn->attention_factor) {
            const double total = yarn->factor * s;
            double mscale = Temperature(total);
            if (yarn->mscale && yarn->mscale_all_dim && *yarn->mscale != 0 && *yarn->mscale_all_dim != 0) {
              const auto m_of = [&](double x) { return total > 1 ? 0.1 * x * std::log(total) + 1 : 1.0; };
              mscale = m_of(*yarn->mscale) / m_of(*yarn->mscale_all_dim);
            }
            out.attention_factor = mscale * yarn->attn_factor;
          } else {
            out.attention_factor = model.attention_factor * Temperature(s);
          }
        } else {
          ThrowError("context extension", "method", FormatValue(std::string(m.kName)),
                     "is not a frequency method (linear, ntk, dynamic-ntk, yarn)");
        }
      },
      method);
  return out;
}

}  // namespace posenc::reference
