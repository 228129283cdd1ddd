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
  // One inverse frequency per pair; the per-target code lays them out in
  // its own vector-padded table order.
  std::vector<double> inv_freq;
  float sine_sign;  // -1 rotates backwards (R^T)
  float scale;      // multiplies the rotated values (attention factor)
  const RopeCall* call;
  std::int64_t seq;
};

// Rotates tokens [begin, end) of the flattened (batch, seq) range.
void RopeTokenRange(const RopeKernelPlan& plan, std::int64_t begin, std::int64_t end);

}  // namespace posenc::detail
