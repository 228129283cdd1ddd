// Internal: the values a forward pass may hand on, and the logits posenc
// scores (a log-softmax) or decodes from (an argmax).
#pragma once

#include <cstdint>
#include <string>

namespace posenc::detail {

// 2^16. Past it float32 holds a logit to 1/128 nat or worse (its spacing
// there), and a log-softmax of such logits measures rounding: at 5.7e29
// (a corrupt embedding), max + log sum exp(x - max) is max itself, so every
// token the model ranks first scores a loss of exactly 0 (perplexity 1) and
// any other an astronomic one. Trained models' logits are tens (SmolLM2's
// and Gemma 3's within +-50; a byte model's within +-30).
inline constexpr float kLogitLimit = 65536.0F;

// The index of the first x[i] that is NaN or of magnitude >= limit (so an
// infinity with limit = infinity: a finiteness check); n when there is none.
std::int64_t FirstOutOfRange(const float* x, std::int64_t n, float limit);

// The rule an out-of-range logit breaks, for errors: "must be finite and of
// magnitude < 65536 (...)".
std::string LogitRangeRule();

// Throws posenc::Error for op `op` naming "logits[position P, token J]", the
// value and LogitRangeRule: a decoder's logit of `token` at `position` out of
// range (its logits blocks and its perplexity pass's fused scoring).
[[noreturn]] void ThrowLogitOutOfRange(const char* op, std::int64_t position, std::int64_t token, float value);

}  // namespace posenc::detail
