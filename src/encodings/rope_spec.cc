#include "posenc/rope_spec.h"

#include <cmath>
#include <string>

#include "posenc/error.h"

namespace posenc {
namespace {

constexpr const char* kOp = "rope";

void RequirePositiveFactor(double factor, const char* name) {
  Require(std::isfinite(factor) && factor > 0, kOp, name, factor, "must be a finite number > 0");
}

void RequireOriginalLength(std::int64_t length, const char* name) {
  Require(length > 0, kOp, name, length, "must be > 0 (the training context length)");
}

void RequireFactorList(const std::vector<double>& factors, std::int64_t pairs, const char* name) {
  Require(static_cast<std::int64_t>(factors.size()) == pairs, kOp, std::string(name) + ".size()", factors.size(),
          "must equal rotary_dim / 2 = " + std::to_string(pairs));
  for (std::size_t k = 0; k < factors.size(); ++k) {
    Require(std::isfinite(factors[k]) && factors[k] > 0, kOp, std::string(name) + "[" + std::to_string(k) + "]",
            factors[k], "must be a finite number > 0");
  }
}

struct ScalingValidator {
  std::int64_t pairs;
  void operator()(const NoScaling&) const {}
  void operator()(const LinearScaling& s) const { RequirePositiveFactor(s.factor, "factor"); }
  void operator()(const NtkAwareScaling& s) const { RequirePositiveFactor(s.alpha, "alpha"); }
  void operator()(const DynamicNtkScaling& s) const {
    RequirePositiveFactor(s.factor, "factor");
    RequireOriginalLength(s.original_max_position, "original_max_position");
  }
  void operator()(const YarnScaling& s) const {
    RequirePositiveFactor(s.factor, "factor");
    RequireOriginalLength(s.original_max_position, "original_max_position");
    Require(std::isfinite(s.beta_slow) && s.beta_slow > 0, kOp, "beta_slow", s.beta_slow,
            "must be a finite number > 0");
    Require(std::isfinite(s.beta_fast) && s.beta_fast > s.beta_slow, kOp, "beta_fast", s.beta_fast,
            "must be greater than beta_slow = " + FormatValue(s.beta_slow));
    if (s.attention_factor) RequirePositiveFactor(*s.attention_factor, "attention_factor");
    if (s.mscale) Require(std::isfinite(*s.mscale), kOp, "mscale", *s.mscale, "must be finite");
    if (s.mscale_all_dim) {
      Require(std::isfinite(*s.mscale_all_dim), kOp, "mscale_all_dim", *s.mscale_all_dim, "must be finite");
    }
    Require(std::isfinite(s.ext_factor) && s.ext_factor >= 0, kOp, "ext_factor", s.ext_factor,
            "must be a finite number >= 0");
    RequirePositiveFactor(s.attn_factor, "attn_factor");
  }
  void operator()(const Llama3Scaling& s) const {
    RequirePositiveFactor(s.factor, "factor");
    RequirePositiveFactor(s.low_freq_factor, "low_freq_factor");
    Require(std::isfinite(s.high_freq_factor) && s.high_freq_factor > s.low_freq_factor, kOp, "high_freq_factor",
            s.high_freq_factor, "must be greater than low_freq_factor = " + FormatValue(s.low_freq_factor));
    RequireOriginalLength(s.original_max_position, "original_max_position");
  }
  void operator()(const LongRopeScaling& s) const {
    RequireFactorList(s.short_factor, pairs, "short_factor");
    RequireFactorList(s.long_factor, pairs, "long_factor");
    RequireOriginalLength(s.original_max_position, "original_max_position");
    RequirePositiveFactor(s.factor, "factor");
    if (s.attention_factor) RequirePositiveFactor(*s.attention_factor, "attention_factor");
    if (s.short_mscale) RequirePositiveFactor(*s.short_mscale, "short_mscale");
    if (s.long_mscale) RequirePositiveFactor(*s.long_mscale, "long_mscale");
  }
  void operator()(const FrequencyFactorScaling& s) const { RequireFactorList(s.factors, pairs, "factors"); }
};

}  // namespace

std::string_view RopeLayoutName(RopeLayout layout) {
  return layout == RopeLayout::kInterleaved ? "interleaved" : "half-split";
}

RopeLayout ParseRopeLayout(std::string_view name) {
  if (name == "interleaved" || name == "gptj" || name == "traditional") return RopeLayout::kInterleaved;
  if (name == "half-split" || name == "neox") return RopeLayout::kHalfSplit;
  ThrowError(kOp, "layout", FormatValue(name), "must be \"interleaved\" or \"half-split\"");
}

std::string_view RopeScalingName(const RopeScaling& scaling) {
  constexpr std::string_view kNames[] = {"none", "linear", "ntk", "dynamic", "yarn", "llama3", "longrope", "factors"};
  static_assert(std::size(kNames) == std::variant_size_v<RopeScaling>);
  return kNames[scaling.index()];
}

void RopeSpec::Validate() const {
  Require(std::isfinite(theta) && theta > 1, kOp, "theta", theta, "must be a finite number > 1");
  Require(head_dim > 0, kOp, "head_dim", head_dim, "must be > 0");
  // The rules with numbers are built only for a check that fails (Require's
  // lazy form): every RoPE call validates its spec, two a layer in a decode step.
  Require(head_dim <= kMaxHeadDim, kOp, "head_dim", head_dim, [] {
    return "must be <= " + std::to_string(kMaxHeadDim) + " (attention heads are at most a few hundred wide)";
  });
  Require(rotary_dim >= 0 && rotary_dim <= head_dim, kOp, "rotary_dim", rotary_dim,
          [&] { return "must be in [0, head_dim = " + std::to_string(head_dim) + "] (0 means head_dim)"; });
  const std::int64_t r = RotaryDim();
  Require(r % 2 == 0, kOp, rotary_dim == 0 ? "head_dim" : "rotary_dim", r, "must be even (dimensions rotate in pairs)");
  // NTK-style methods raise the base to r/(r-2).
  const bool ntk =
      std::holds_alternative<NtkAwareScaling>(scaling) || std::holds_alternative<DynamicNtkScaling>(scaling);
  Require(!ntk || r > 2, kOp, "rotary_dim", r, "must be > 2 for NTK scaling (exponent r/(r-2))");
  std::visit(ScalingValidator{r / 2}, scaling);
}

std::int64_t RotaryDimFromFactor(std::int64_t head_dim, double partial_rotary_factor) {
  Require(std::isfinite(partial_rotary_factor) && partial_rotary_factor > 0 && partial_rotary_factor <= 1, kOp,
          "partial_rotary_factor", partial_rotary_factor, "must be in (0, 1]");
  // int(head_dim * factor) as Hugging Face does, robust to a factor printed
  // as r/d with rounding (0.6666... of 96 is 64, not 63).
  const auto r = static_cast<std::int64_t>(static_cast<double>(head_dim) * partial_rotary_factor + 1e-9);
  Require(r % 2 == 0 && r > 0, kOp, "partial_rotary_factor", partial_rotary_factor,
          "must give an even rotary_dim, got int(" + std::to_string(head_dim) + " * factor) = " + std::to_string(r));
  return r;
}

}  // namespace posenc
