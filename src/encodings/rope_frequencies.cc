#include "posenc/rope_frequencies.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include "posenc/error.h"

namespace posenc {
namespace {

// theta^(-2k/r) for k < r/2, in double. (Hugging Face forms this in float32;
// the two differ by up to ~1e-7 relative.)
std::vector<double> PlainInverseFrequencies(double theta, std::int64_t rotary_dim) {
  std::vector<double> inv_freq(static_cast<std::size_t>(rotary_dim / 2));
  for (std::size_t k = 0; k < inv_freq.size(); ++k) {
    inv_freq[k] = 1.0 / std::pow(theta, static_cast<double>(2 * k) / static_cast<double>(rotary_dim));
  }
  return inv_freq;
}

// NTK-aware base change: the slowest pair is interpolated by `scale` while
// the fastest stays put.
double NtkBase(double theta, double scale, std::int64_t rotary_dim) {
  const double r = static_cast<double>(rotary_dim);
  return theta * std::pow(scale, r / (r - 2.0));
}

// YaRN's mscale(s, m) = 0.1 m ln(s) + 1 for s > 1, else 1.
double YarnMscale(double factor, double mscale) { return factor <= 1.0 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0; }

// The pair index at which a frequency completes `rotations` turns within the
// original length: r ln(L0 / (2 pi rotations)) / (2 ln theta).
double YarnCorrectionDim(double rotations, std::int64_t rotary_dim, double theta, std::int64_t original_length) {
  return static_cast<double>(rotary_dim) *
         std::log(static_cast<double>(original_length) / (rotations * 2.0 * std::numbers::pi)) /
         (2.0 * std::log(theta));
}

std::vector<double> YarnWeights(const YarnScaling& yarn, double theta, std::int64_t rotary_dim) {
  double low = YarnCorrectionDim(yarn.beta_fast, rotary_dim, theta, yarn.original_max_position);
  double high = YarnCorrectionDim(yarn.beta_slow, rotary_dim, theta, yarn.original_max_position);
  if (yarn.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(rotary_dim - 1));
  if (low == high) high += 0.001;  // avoid dividing by zero, as the reference code does
  std::vector<double> weights(static_cast<std::size_t>(rotary_dim / 2));
  for (std::size_t k = 0; k < weights.size(); ++k) {
    const double ramp = std::clamp((static_cast<double>(k) - low) / (high - low), 0.0, 1.0);
    weights[k] = (1.0 - ramp) * yarn.ext_factor;
  }
  return weights;
}

struct FrequencyBuilder {
  const RopeSpec& spec;
  std::int64_t seq_len;

  std::int64_t r() const { return spec.RotaryDim(); }
  RopeFrequencies Plain(double theta) const { return {PlainInverseFrequencies(theta, r()), 1.0}; }

  RopeFrequencies operator()(const NoScaling&) const { return Plain(spec.theta); }

  RopeFrequencies operator()(const LinearScaling& s) const {
    RopeFrequencies f = Plain(spec.theta);
    for (double& w : f.inv_freq) w /= s.factor;
    return f;
  }

  RopeFrequencies operator()(const NtkAwareScaling& s) const { return Plain(NtkBase(spec.theta, s.alpha, r())); }

  RopeFrequencies operator()(const DynamicNtkScaling& s) const {
    if (seq_len <= s.original_max_position) return Plain(spec.theta);
    const double scale =
        s.factor * static_cast<double>(seq_len) / static_cast<double>(s.original_max_position) - (s.factor - 1.0);
    return Plain(NtkBase(spec.theta, scale, r()));
  }

  RopeFrequencies operator()(const YarnScaling& s) const {
    RopeFrequencies f = Plain(spec.theta);
    const std::vector<double> extrapolate = YarnWeights(s, spec.theta, r());
    for (std::size_t k = 0; k < f.inv_freq.size(); ++k) {
      const double interpolated = f.inv_freq[k] / s.factor;
      f.inv_freq[k] = interpolated * (1.0 - extrapolate[k]) + f.inv_freq[k] * extrapolate[k];
    }
    if (s.attention_factor) {
      f.attention_factor = *s.attention_factor;
    } else if (s.mscale && s.mscale_all_dim && *s.mscale != 0 && *s.mscale_all_dim != 0) {
      f.attention_factor = YarnMscale(s.factor, *s.mscale) / YarnMscale(s.factor, *s.mscale_all_dim);
    } else {
      f.attention_factor = YarnMscale(s.factor, 1.0);
    }
    f.attention_factor *= s.attn_factor;
    return f;
  }

  RopeFrequencies operator()(const Llama3Scaling& s) const {
    RopeFrequencies f = Plain(spec.theta);
    const double original = static_cast<double>(s.original_max_position);
    const double low_freq_wavelength = original / s.low_freq_factor;
    const double high_freq_wavelength = original / s.high_freq_factor;
    for (double& w : f.inv_freq) {
      const double wavelength = 2.0 * std::numbers::pi / w;
      if (wavelength > low_freq_wavelength) {
        w /= s.factor;  // slow dimensions: interpolate
      } else if (wavelength >= high_freq_wavelength) {
        const double smooth = (original / wavelength - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        w = (1.0 - smooth) * w / s.factor + smooth * w;
      }  // fast dimensions: unchanged
    }
    return f;
  }

  RopeFrequencies operator()(const LongRopeScaling& s) const {
    RopeFrequencies f = Plain(spec.theta);
    const bool long_set = seq_len > s.original_max_position;
    const auto& rescale = long_set ? s.long_factor : s.short_factor;
    for (std::size_t k = 0; k < f.inv_freq.size(); ++k) f.inv_freq[k] /= rescale[k];
    if (const auto& mscale = long_set ? s.long_mscale : s.short_mscale) {
      f.attention_factor = *mscale;
    } else if (s.attention_factor) {
      f.attention_factor = *s.attention_factor;
    } else if (s.factor > 1.0) {
      f.attention_factor = std::sqrt(1.0 + std::log(s.factor) / std::log(static_cast<double>(s.original_max_position)));
    }
    return f;
  }

  RopeFrequencies operator()(const FrequencyFactorScaling& s) const {
    RopeFrequencies f = Plain(spec.theta);
    for (std::size_t k = 0; k < f.inv_freq.size(); ++k) f.inv_freq[k] /= s.factors[k];
    return f;
  }
};

struct OriginalLength {
  template <class Scaling>
  std::int64_t operator()(const Scaling& s) const {
    if constexpr (requires { s.original_max_position; }) {
      return s.original_max_position;
    } else {
      return 0;
    }
  }
};

}  // namespace

RopeFrequencies ComputeRopeFrequencies(const RopeSpec& spec, std::int64_t seq_len) {
  spec.Validate();
  Require(seq_len >= 0, "rope", "seq_len", seq_len, "must not be negative");
  return std::visit(FrequencyBuilder{spec, seq_len}, spec.scaling);
}

std::vector<double> YarnExtrapolationWeights(const RopeSpec& spec) {
  spec.Validate();
  const auto* yarn = std::get_if<YarnScaling>(&spec.scaling);
  return yarn ? YarnWeights(*yarn, spec.theta, spec.RotaryDim()) : std::vector<double>{};
}

std::int64_t OriginalContextLength(const RopeSpec& spec) { return std::visit(OriginalLength{}, spec.scaling); }

std::int64_t EffectiveContextLength(const RopeSpec& spec) {
  const auto scaled = [](std::int64_t original, double factor) {
    const double length = static_cast<double>(original) * factor;
    Require(length >= 1 && length < 9007199254740992.0, "rope", "factor", factor,
            "must give original_max_position x factor in [1, 2^53) tokens (original_max_position = " +
                std::to_string(original) + ")");
    return static_cast<std::int64_t>(std::llround(length));
  };
  if (const auto* y = std::get_if<YarnScaling>(&spec.scaling)) return scaled(y->original_max_position, y->factor);
  if (const auto* l = std::get_if<Llama3Scaling>(&spec.scaling)) return scaled(l->original_max_position, l->factor);
  if (const auto* l = std::get_if<LongRopeScaling>(&spec.scaling)) return scaled(l->original_max_position, l->factor);
  return 0;
}

}  // namespace posenc
