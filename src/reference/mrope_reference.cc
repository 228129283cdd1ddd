// Multimodal RoPE one pair at a time in float64: pair k rotates by the
// position of the axis whose section holds it (include/posenc/mrope.h).
#include <cmath>
#include <vector>

#include "posenc/mrope.h"
#include "reference/element_io.h"

namespace posenc::reference {

void ApplyMultimodalRope(const RopeSpec& spec, const RopeFrequencies& frequencies, const MultimodalRopeCall& call) {
  ValidateMultimodalRope(spec, frequencies, call);
  const std::int64_t pairs = spec.Pairs();
  std::vector<std::size_t> axis_of(static_cast<std::size_t>(pairs));
  for (std::int64_t k = 0, axis = 0, end = call.section[0]; k < pairs; ++k) {
    while (k >= end) end += call.section[static_cast<std::size_t>(++axis)];
    axis_of[static_cast<std::size_t>(k)] = static_cast<std::size_t>(axis);
  }
  for (const RopeOperand& op : call.operands) {
    const std::int64_t batch = op.in.shape[0], seq = op.in.shape[1], heads = op.in.shape[2], d = op.in.shape[3];
    for (std::int64_t b = 0; b < batch; ++b) {
      for (std::int64_t s = 0; s < seq; ++s) {
        for (std::int64_t h = 0; h < heads; ++h) {
          const std::int64_t in = op.in.Offset(b, s, h), out = op.out.Offset(b, s, h);
          std::vector<double> x(static_cast<std::size_t>(d));
          for (std::int64_t e = 0; e < d; ++e) x[static_cast<std::size_t>(e)] = ReadElement(op.in, in + e);
          std::vector<double> y = x;
          for (std::int64_t k = 0; k < pairs; ++k) {
            const auto position =
                static_cast<double>(call.positions[axis_of[static_cast<std::size_t>(k)]].At(b, s, seq));
            const double angle = position * frequencies.inv_freq[static_cast<std::size_t>(k)];
            const std::int64_t i = spec.layout == RopeLayout::kInterleaved ? 2 * k : k;
            const std::int64_t j = spec.layout == RopeLayout::kInterleaved ? 2 * k + 1 : k + pairs;
            y[i] = (x[i] * std::cos(angle) - x[j] * std::sin(angle)) * frequencies.attention_factor;
            y[j] = (x[i] * std::sin(angle) + x[j] * std::cos(angle)) * frequencies.attention_factor;
          }
          for (std::int64_t e = 0; e < d; ++e) {
            if (e >= spec.RotaryDim()) {
              CopyElement(op.in, in + e, op.out, out + e);  // past the rotary part: bit-identical
            } else {
              WriteElement(op.out, out + e, y[static_cast<std::size_t>(e)]);
            }
          }
        }
      }
    }
  }
}

}  // namespace posenc::reference
