// The range check of a forward pass's values (logit_range.h).
#include "kernels/logit_range.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "posenc/error.h"

namespace posenc::detail {

std::int64_t FirstOutOfRange(const float* x, std::int64_t n, float limit) {
  // Blocks checked without a branch (the compiler makes vector code of the
  // OR of comparisons: a NaN compares false), then the one that failed
  // element by element: a decode step checks its 49,152 logits.
  constexpr std::int64_t kBlock = 256;
  for (std::int64_t begin = 0; begin < n; begin += kBlock) {
    const std::int64_t end = std::min(n, begin + kBlock);
    int out = 0;
    for (std::int64_t i = begin; i < end; ++i) out |= static_cast<int>(!(std::fabs(x[i]) < limit));
    if (out == 0) continue;
    for (std::int64_t i = begin; i < end; ++i) {
      if (!(std::fabs(x[i]) < limit)) return i;
    }
  }
  return n;
}

std::string LogitRangeRule() {
  return "must be finite and of magnitude < 65536 (2^16: float32 resolves a log-probability to 1/128 nat there, "
         "and past it a log-softmax measures rounding); the weights or activations hold NaN, infinity or values far "
         "out of range (a corrupt or diverged model)";
}

void ThrowLogitOutOfRange(const char* op, std::int64_t position, std::int64_t token, float value) {
  ThrowError(op, "logits[position " + std::to_string(position) + ", token " + std::to_string(token) + "]",
             FormatValue(value), LogitRangeRule());
}

}  // namespace posenc::detail
