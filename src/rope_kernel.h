// Internal: what the dispatched RoPE kernel needs, prepared once per call.
#pragma once

#include <cstdint>
#include <vector>

#include "posenc/rope.h"

namespace posenc::detail {

struct RopeKernelPlan {
  RopeLayout layout;
  std::int64_t rotary_dim;
  std::int64_t pairs;
  // inv_freq padded with zeros to a multiple of the widest vector, so the
  // table loop has no tail.
  std::vector<double> inv_freq_padded;
  float sine_sign;  // -1 rotates backwards (R^T)
  float scale;      // multiplies the rotated values (attention factor)
  const RopeCall* call;
  std::int64_t seq;
};

// Rotates tokens [begin, end) of the flattened (batch, seq) range.
void RopeTokenRange(const RopeKernelPlan& plan, std::int64_t begin, std::int64_t end);

}  // namespace posenc::detail
