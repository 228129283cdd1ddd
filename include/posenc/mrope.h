// Multimodal RoPE (M-RoPE, Qwen2-VL: Wang et al. 2024): every token has three
// positions, temporal, height and width (a text token the same one three
// times, which is plain RoPE). The rotary pairs are cut into three
// consecutive sections (RopeModelConfig::mrope_section, e.g. [16, 24, 24]
// of 64 pairs); pair k rotates by the position of its section's axis:
//   angle_k = positions[axis(k)] * inv_freq[k]
// as Hugging Face's apply_multimodal_rotary_pos_emb applies it (its cos/sin
// [.., head_dim] cut by mrope_section * 2, chunk i taken from axis i mod 3).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "posenc/rope.h"

namespace posenc {

struct MultimodalRopeCall {
  std::vector<RopeOperand> operands;  // [batch, seq, heads, head_dim] each, as RopeCall's
  // temporal, height, width: one position per token on each axis.
  std::array<TokenPositions, 3> positions{TokenPositions::Offset(0), TokenPositions::Offset(0),
                                          TokenPositions::Offset(0)};
  std::vector<std::int64_t> section;  // pairs per axis, summing to rotary_dim / 2
};

// Throws posenc::Error unless `section` is three counts >= 0 summing to
// rotary_dim / 2 and the call fits the spec on every axis (ValidateRopeCall).
// Both implementations call it first.
void ValidateMultimodalRope(const RopeSpec& spec, const RopeFrequencies& frequencies, const MultimodalRopeCall& call);

// The fast kernel: ApplyRope once per axis, on that axis's pairs (the others'
// frequencies zero, a rotation by 0 that leaves them bit-identical), the
// attention factor applied once. Forward direction.
void ApplyMultimodalRope(const RopeSpec& spec, const RopeFrequencies& frequencies, const MultimodalRopeCall& call);

namespace reference {
// Float64, one pair at a time with its axis's position, rounded once.
void ApplyMultimodalRope(const RopeSpec& spec, const RopeFrequencies& frequencies, const MultimodalRopeCall& call);
}  // namespace reference

}  // namespace posenc
