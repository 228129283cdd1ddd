// Internal: the rules both attention implementations (the kernel and the
// float64 reference) share, written once: which keys a query sees, the log-n
// factor, the RoPE attention factor's square and the softmax scale. Each
// encoding's own rules are in encodings/.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "attention/attention_plan.h"
#include "attention/lowering/encoding_lowering.h"
#include "posenc/attention.h"

namespace posenc::detail {

// Key at position j visible to a query at position p (before kv_lengths).
inline bool KeyVisible(const AttentionMask& mask, std::int64_t p, std::int64_t j) {
  if (mask.causal && j > p) return false;
  if (mask.window <= 0) return true;
  if (j < mask.sinks) return true;  // the Λ mask's first S tokens
  const std::int64_t distance = mask.causal ? p - j : (p > j ? p - j : j - p);
  return distance < mask.window;
}

// The first key position a query at p (>= 0) scores from the near pair;
// rule.window > 0.
inline std::int64_t NearStart(const NearRule& rule, std::int64_t p) {
  if (rule.keys == NearKeys::kLastWindow) return p - rule.window + 1;
  return p / rule.window * rule.window;
}

// Log-n scaling of a query at position p.
inline double LognFactor(std::int64_t train_length, std::int64_t p) {
  if (train_length <= 0) return 1.0;
  return std::max(1.0, std::log(static_cast<double>(p + 1)) / std::log(static_cast<double>(train_length)));
}

// The score multiplier of RoPE-family encodings: q and k are each scaled by
// the attention factor, so logits by its square.
inline double AttentionFactorSquared(const PositionEncoding& encoding) {
  const double factor = std::visit([](const auto& e) { return AttentionFactor(e); }, encoding);
  return factor * factor;
}

inline double SoftmaxScale(const AttentionOptions& options, std::int64_t head_dim) {
  return options.softmax_scale.value_or(1.0 / std::sqrt(static_cast<double>(head_dim)));
}

}  // namespace posenc::detail
