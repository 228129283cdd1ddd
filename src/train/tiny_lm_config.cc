// The tiny model's names, its config rules and the checks of a loss call.
#include <array>
#include <cmath>
#include <string>

#include "posenc/error.h"
#include "posenc/tiny_lm.h"
#include "train/tiny_lm_internal.h"

namespace posenc {
namespace {

using tiny_lm::kOp;

constexpr std::array<PositionScheme, 8> kSchemes = {
    PositionScheme::kNope, PositionScheme::kSinusoidal, PositionScheme::kLearned, PositionScheme::kShaw,
    PositionScheme::kT5,   PositionScheme::kAlibi,      PositionScheme::kRope,    PositionScheme::kKerple};

// Far above any tiny model, low enough that a typo is refused before it
// allocates gigabytes.
constexpr std::int64_t kMaxWidth = std::int64_t{1} << 16;
constexpr std::int64_t kMaxLayers = 1024;
constexpr std::int64_t kMaxLength = std::int64_t{1} << 20;
constexpr std::int64_t kMaxTokens = std::int64_t{1} << 24;  // batch * length: logits are 256 floats a token

void RequireRange(std::int64_t value, std::int64_t low, std::int64_t high, const char* name, const char* why) {
  Require(value >= low && value <= high, kOp, name, value,
          "must be in [" + std::to_string(low) + ", " + std::to_string(high) + "]" + why);
}

}  // namespace

std::string_view PositionSchemeName(PositionScheme scheme) {
  switch (scheme) {
    case PositionScheme::kNope: return "nope";
    case PositionScheme::kSinusoidal: return "sinusoidal";
    case PositionScheme::kLearned: return "learned";
    case PositionScheme::kShaw: return "shaw";
    case PositionScheme::kT5: return "t5";
    case PositionScheme::kAlibi: return "alibi";
    case PositionScheme::kRope: return "rope";
    case PositionScheme::kKerple: return "kerple";
  }
  return "?";
}

PositionScheme ParsePositionScheme(std::string_view name) {
  std::string list;
  for (const PositionScheme scheme : kSchemes) {
    if (name == PositionSchemeName(scheme)) return scheme;
    list += (list.empty() ? "" : ", ") + std::string(PositionSchemeName(scheme));
  }
  ThrowError(kOp, "scheme", FormatValue(name), "must be one of " + list);
}

std::span<const PositionScheme> AllPositionSchemes() { return kSchemes; }

std::string_view LearnedPastTableName(LearnedPastTable policy) {
  return policy == LearnedPastTable::kHierarchical ? "hierarchical" : "error";
}

LearnedPastTable ParseLearnedPastTable(std::string_view name) {
  if (name == "error") return LearnedPastTable::kError;
  if (name == "hierarchical") return LearnedPastTable::kHierarchical;
  ThrowError(kOp, "learned_past_table", FormatValue(name), "must be one of error, hierarchical");
}

void ValidateTinyLmConfig(const TinyLmConfig& config) {
  const auto scheme_index = static_cast<std::size_t>(config.scheme);
  Require(scheme_index < kSchemes.size(), kOp, "scheme", static_cast<int>(config.scheme),
          "must be a PositionScheme enumerator");
  Require(config.learned_past_table == LearnedPastTable::kError ||
              config.learned_past_table == LearnedPastTable::kHierarchical,
          kOp, "learned_past_table", static_cast<int>(config.learned_past_table), "must be kError or kHierarchical");
  RequireRange(config.d_model, 1, kMaxWidth, "d_model", "");
  RequireRange(config.layers, 1, kMaxLayers, "layers", "");
  RequireRange(config.heads, 1, config.d_model, "heads", " (at most d_model: a head is at least 1 wide)");
  Require(config.d_model % config.heads == 0, kOp, "heads", config.heads,
          "must divide d_model = " + std::to_string(config.d_model) + " (heads are d_model / heads wide)");
  RequireRange(config.ffn_hidden, 1, 4 * kMaxWidth, "ffn_hidden", "");
  RequireRange(config.train_length, 2, kMaxLength, "train_length",
               " (a sequence of one token has nothing to attend to)");
  Require(std::isfinite(config.norm_eps) && config.norm_eps > 0, kOp, "norm_eps", config.norm_eps,
          "must be a finite number > 0 (RMSNorm divides by sqrt(mean(x^2) + eps))");
  switch (config.scheme) {
    case PositionScheme::kRope:
      Require(config.HeadDim() % 2 == 0, kOp, "head_dim", config.HeadDim(),
              "must be even for rope (d_model " + std::to_string(config.d_model) + " / heads " +
                  std::to_string(config.heads) + "; dimensions rotate in pairs)");
      Require(std::isfinite(config.rope_theta) && config.rope_theta > 1, kOp, "rope_theta", config.rope_theta,
              "must be a finite number > 1");
      break;
    case PositionScheme::kShaw: RequireRange(config.shaw_clip, 1, kMaxLength, "shaw_clip", ""); break;
    case PositionScheme::kT5:
      RequireRange(config.t5_buckets, 2, kMaxWidth, "t5_buckets", " (causal: an exact and a log bucket at least)");
      Require(config.t5_max_distance > config.t5_buckets / 2 && config.t5_max_distance <= kMaxLength, kOp,
              "t5_max_distance", config.t5_max_distance,
              "must be in (t5_buckets / 2 = " + std::to_string(config.t5_buckets / 2) + ", " +
                  std::to_string(kMaxLength) + "] (past the exact buckets, or the log range is empty)");
      break;
    default: break;
  }
}

RopeSpec TinyLmRopeSpec(const TinyLmConfig& config) {
  return {.theta = config.rope_theta, .head_dim = config.HeadDim(), .layout = RopeLayout::kHalfSplit};
}

namespace tiny_lm {

void ValidateLossCall(const TinyLmConfig& config, const TinyLmParams& params, std::span<const std::uint8_t> tokens,
                      std::int64_t batch, std::int64_t length, bool gradients) {
  ValidateTinyLmConfig(config);
  ValidateTinyLmParams(config, params);
  RequireRange(batch, 1, kMaxTokens, "batch", "");
  RequireRange(length, 1, kMaxLength, "length", "");
  Require(batch * length <= kMaxTokens, kOp, "batch * length", batch * length,
          "must be <= " + std::to_string(kMaxTokens) + " tokens (the logits alone are 256 floats a token)");
  Require(static_cast<std::int64_t>(tokens.size()) == batch * (length + 1), kOp, "tokens.size()", tokens.size(),
          "must be batch * (length + 1) = " + std::to_string(batch * (length + 1)) +
              " (inputs and the next byte as target)");
  if (gradients) {
    Require(length <= config.train_length, kOp, "length", length,
            "must be <= train_length = " + std::to_string(config.train_length) +
                " when gradients are requested (longer lengths are for evaluation)");
  }
  if (config.scheme == PositionScheme::kLearned && length > config.train_length) {
    const std::int64_t rows = config.train_length;
    if (config.learned_past_table == LearnedPastTable::kError) {
      ThrowError(kOp, "position", std::to_string(rows),
                 "past the learned position table of " + std::to_string(rows) +
                     " rows (train_length); evaluate at length <= " + std::to_string(rows) +
                     " or set learned_past_table = hierarchical (Su's decomposition)");
    }
    Require(length <= rows * rows, kOp, "length", length,
            "must be <= train_length^2 = " + std::to_string(rows * rows) +
                ", the most the hierarchical decomposition of the learned table reaches");
  }
}

}  // namespace tiny_lm
}  // namespace posenc
