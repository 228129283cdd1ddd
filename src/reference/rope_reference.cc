// The plain RoPE: RoFormer's formula (Su et al. 2021), one pair at a time, in double precision.
// Readable on purpose; the fast kernel in rope-inl.h is tested against it.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "posenc/error.h"
#include "posenc/rope.h"
#include "reference/element_io.h"

namespace posenc::reference {

std::vector<double> RotateHead(const RopeSpec& spec, std::span<const double> inv_freq, std::span<const double> x,
                               double position) {
  constexpr const char* kOp = "rope";
  Require(static_cast<std::int64_t>(x.size()) == spec.head_dim, kOp, "x.size()", x.size(),
          "must equal head_dim = " + std::to_string(spec.head_dim));
  Require(static_cast<std::int64_t>(inv_freq.size()) == spec.Pairs(), kOp, "inv_freq.size()", inv_freq.size(),
          "must equal rotary_dim / 2 = " + std::to_string(spec.Pairs()));
  const std::int64_t pairs = spec.Pairs();
  std::vector<double> y(x.begin(), x.end());
  for (std::int64_t k = 0; k < pairs; ++k) {
    // Pair (i, j): interleaved (2k, 2k+1); half-split (k, k + r/2).
    const std::int64_t i = spec.layout == RopeLayout::kInterleaved ? 2 * k : k;
    const std::int64_t j = spec.layout == RopeLayout::kInterleaved ? 2 * k + 1 : k + pairs;
    const double angle = position * inv_freq[k];
    const double c = std::cos(angle), s = std::sin(angle);
    y[i] = x[i] * c - x[j] * s;
    y[j] = x[i] * s + x[j] * c;
  }
  return y;
}

void ApplyRope(const RopeSpec& spec, const RopeFrequencies& frequencies, const RopeCall& call) {
  ValidateRopeCall(spec, frequencies, call);
  const std::int64_t rotary_dim = spec.RotaryDim();
  const double sign = call.direction == RopeDirection::kForward ? 1.0 : -1.0;
  const double scale =
      call.direction == RopeDirection::kInverse ? 1.0 / frequencies.attention_factor : frequencies.attention_factor;

  for (const RopeOperand& op : call.operands) {
    const std::int64_t batch = op.in.shape[0], seq = op.in.shape[1], heads = op.in.shape[2], head_dim = op.in.shape[3];
    for (std::int64_t b = 0; b < batch; ++b) {
      for (std::int64_t s = 0; s < seq; ++s) {
        const double position = static_cast<double>(call.positions.At(b, s, seq));
        for (std::int64_t h = 0; h < heads; ++h) {
          const std::int64_t offset = op.in.Offset(b, s, h);
          const std::int64_t out_offset = op.out.Offset(b, s, h);
          // Read the whole head first so that in-place works.
          std::vector<double> x(static_cast<std::size_t>(head_dim));
          for (std::int64_t d = 0; d < head_dim; ++d) x[d] = ReadElement(op.in, offset + d);
          // R^T(p) = R(-p): the backward and inverse directions rotate by -p.
          std::vector<double> y = RotateHead(spec, frequencies.inv_freq, x, sign * position);
          for (double& value : y) value *= scale;
          for (std::int64_t d = 0; d < head_dim; ++d) {
            if (d >= rotary_dim) {
              CopyElement(op.in, offset + d, op.out, out_offset + d);  // bit-identical
            } else {
              WriteElement(op.out, out_offset + d, y[d]);
            }
          }
        }
      }
    }
  }
}

}  // namespace posenc::reference
