// The tiny model's config rules and the checks of a loss call.
#include <cmath>
#include <string>
#include <variant>

#include "posenc/error.h"
#include "posenc/tiny_lm.h"
#include "train/scheme_trainer.h"
#include "train/tiny_lm_internal.h"

namespace posenc {
namespace {

using tiny_lm::kMaxLength;
using tiny_lm::kMaxWidth;
using tiny_lm::kOp;
using tiny_lm::RequireInRange;

constexpr std::int64_t kMaxLayers = 1024;
constexpr std::int64_t kMaxTokens = std::int64_t{1} << 24;  // batch * length: logits are 256 floats a token

}  // namespace

std::string_view LearnedPastTableName(LearnedPastTable policy) {
  return policy == LearnedPastTable::kHierarchical ? "hierarchical" : "error";
}

LearnedPastTable ParseLearnedPastTable(std::string_view name) {
  if (name == "error") return LearnedPastTable::kError;
  if (name == "hierarchical") return LearnedPastTable::kHierarchical;
  ThrowError(kOp, "learned_past_table", FormatValue(name), "must be one of error, hierarchical");
}

void ValidateTinyLmConfig(const TinyLmConfig& config) {
  Require(!config.scheme.valueless_by_exception(), kOp, "scheme", Verbatim{"(valueless)"}, "must hold a scheme");
  Require(config.learned_past_table == LearnedPastTable::kError ||
              config.learned_past_table == LearnedPastTable::kHierarchical,
          kOp, "learned_past_table", static_cast<int>(config.learned_past_table), "must be kError or kHierarchical");
  RequireInRange(config.d_model, 1, kMaxWidth, "d_model", "");
  RequireInRange(config.layers, 1, kMaxLayers, "layers", "");
  RequireInRange(config.heads, 1, config.d_model, "heads", " (at most d_model: a head is at least 1 wide)");
  Require(config.d_model % config.heads == 0, kOp, "heads", config.heads,
          "must divide d_model = " + std::to_string(config.d_model) + " (heads are d_model / heads wide)");
  RequireInRange(config.ffn_hidden, 1, 4 * kMaxWidth, "ffn_hidden", "");
  RequireInRange(config.train_length, 2, kMaxLength, "train_length",
                 " (a sequence of one token has nothing to attend to)");
  Require(std::isfinite(config.norm_eps) && config.norm_eps > 0, kOp, "norm_eps", config.norm_eps,
          "must be a finite number > 0 (RMSNorm divides by sqrt(mean(x^2) + eps))");
  Require(config.position_range == 0 ||
              (config.position_range >= config.train_length && config.position_range <= kMaxLength),
          kOp, "position_range", config.position_range,
          "must be 0 (positions 0..T-1) or in [train_length = " + std::to_string(config.train_length) + ", " +
              std::to_string(kMaxLength) + "] (a pass's positions are an ordered subset of [0, position_range))");
  tiny_lm::MakeSchemeTrainer(config);  // the scheme's own rules
}

RopeSpec TinyLmRopeSpec(const TinyLmConfig& config) {
  const std::optional<RopeSpec> spec = tiny_lm::MakeSchemeTrainer(config)->Rotation();
  if (!spec) {
    ThrowError(kOp, "scheme", FormatValue(PositionSchemeName(config.scheme)),
               "rotates no queries and keys: RoPE's spec is a rope model's");
  }
  return *spec;
}

namespace tiny_lm {

void RequireInRange(std::int64_t value, std::int64_t low, std::int64_t high, const char* name, const char* why) {
  Require(value >= low && value <= high, kOp, name, value,
          "must be in [" + std::to_string(low) + ", " + std::to_string(high) + "]" + why);
}

void ValidateLossCall(const TinyLmConfig& config, const TinyLmParams& params, std::span<const std::uint8_t> tokens,
                      std::int64_t batch, std::int64_t length, std::span<const std::int64_t> positions,
                      bool gradients) {
  ValidateTinyLmParams(config, params);  // the config's rules first
  RequireInRange(batch, 1, kMaxTokens, "batch", "");
  RequireInRange(length, 1, kMaxLength, "length", "");
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
  std::int64_t extent = length;  // positions 0..extent-1
  if (!positions.empty()) {
    Require(static_cast<std::int64_t>(positions.size()) == length, kOp, "positions.size()", positions.size(),
            "must be length = " + std::to_string(length) + " (one position a token, shared by the batch) or 0");
    Require(positions[0] >= 0, kOp, "positions[0]", positions[0], "must be >= 0");
    for (std::size_t t = 1; t < positions.size(); ++t) {
      Require(positions[t] > positions[t - 1], kOp, "positions[" + std::to_string(t) + "]", positions[t],
              "must be > positions[" + std::to_string(t - 1) + "] = " + std::to_string(positions[t - 1]) +
                  " (a causal model's tokens in order)");
    }
    RequireInRange(positions.back(), 0, kMaxLength - 1, "positions[length - 1]", "");
    extent = positions.back() + 1;
    if (gradients) {
      Require(extent <= config.PositionExtent(), kOp, "positions[length - 1]", positions.back(),
              "must be < " + std::to_string(config.PositionExtent()) +
                  " (max(train_length, position_range): the positions training reaches) when gradients are "
                  "requested");
    }
  }
  MakeSchemeTrainer(config)->CheckLength(extent, gradients);
}

}  // namespace tiny_lm
}  // namespace posenc
