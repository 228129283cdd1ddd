// Multimodal RoPE as three passes of the rotation kernel, one per position
// axis, each on its own section of pairs (include/posenc/mrope.h).
#include "posenc/mrope.h"

#include <numeric>
#include <string>

#include "posenc/error.h"

namespace posenc {
void ValidateMultimodalRope(const RopeSpec& spec, const RopeFrequencies& frequencies, const MultimodalRopeCall& call) {
  const std::vector<std::int64_t>& section = call.section;
  Require(section.size() == 3, "mrope", "mrope_section.size()", section.size(), "must be 3 (temporal, height, width)");
  for (std::size_t i = 0; i < section.size(); ++i) {
    Require(section[i] >= 0, "mrope", "mrope_section[" + std::to_string(i) + "]", section[i], "must be >= 0");
  }
  const std::int64_t pairs = std::accumulate(section.begin(), section.end(), std::int64_t{0});
  Require(pairs == spec.Pairs(), "mrope", "sum(mrope_section)", pairs,
          "must equal rotary_dim / 2 = " + std::to_string(spec.Pairs()));
  for (const TokenPositions& positions : call.positions) {
    ValidateRopeCall(spec, frequencies, {.operands = call.operands, .positions = positions});
  }
}

void ApplyMultimodalRope(const RopeSpec& spec, const RopeFrequencies& frequencies, const MultimodalRopeCall& call) {
  ValidateMultimodalRope(spec, frequencies, call);
  std::int64_t begin = 0;
  for (std::size_t axis = 0; axis < 3; ++axis) {
    const std::int64_t end = begin + call.section[axis];
    RopeFrequencies part = frequencies;
    for (std::int64_t k = 0; k < spec.Pairs(); ++k) {
      if (k < begin || k >= end) part.inv_freq[static_cast<std::size_t>(k)] = 0;  // a rotation by 0: unchanged
    }
    if (axis > 0) part.attention_factor = 1;  // applied by the first pass
    RopeCall pass{.operands = call.operands, .positions = call.positions[axis]};
    if (axis > 0) {
      for (RopeOperand& op : pass.operands) op.in = op.out;  // the first pass's output, in place
    }
    ApplyRope(spec, part, pass);
    begin = end;
  }
}

}  // namespace posenc
