// Applying RoPE to q and k tensors [batch, seq, heads, head_dim].
//
// Positions come as a start offset per sequence (Tiny-LLM's `offset`) or as an
// explicit position id per token (packed sequences, left padding, speculative
// decoding). Several tensors (q and k with different head counts for GQA) are
// rotated in one pass sharing the cos/sin of each token. Angles p * inv_freq
// are formed in double and reduced there to a quarter turn (p w = n pi/2 + r,
// |r| <= pi/4); sin r and cos r come from float32 polynomials and n mod 4
// picks the quadrant, so results stay accurate at positions of 10^6 and
// beyond (src/kernels/rope-inl.h); f16/bf16 tensors are computed in float32 and
// rounded once.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "posenc/rope_frequencies.h"
#include "posenc/rope_spec.h"
#include "posenc/tensor.h"
#include "posenc/token_positions.h"

namespace posenc {

// With a the attention factor (1 unless YaRN/LongRoPE) and R(p) the rotation:
// all three are the same kernel, with the sine negated for the last two.
enum class RopeDirection {
  kForward,   // y = a R(p) x
  kBackward,  // the gradient of kForward: dx = a R(p)^T dy
  kInverse,   // undoes kForward: x = R(p)^T y / a
};

// Positions of the tokens: a start offset, one offset per sequence
// (Tiny-LLM's offsets), or an explicit id per token (token_positions.h).
using RopePositions = TokenPositions;

// One tensor to rotate: `in` is read, `out` written; they may be the same
// memory (in place) but must not otherwise overlap. Same shape and dtype.
struct RopeOperand {
  ConstTensorView in;
  TensorView out;
  static RopeOperand InPlace(const TensorView& tensor) { return {tensor, tensor}; }
};

struct RopeCall {
  std::vector<RopeOperand> operands;  // e.g. {q, k}; batch and seq must agree
  RopePositions positions = RopePositions::Offset(0);
  RopeDirection direction = RopeDirection::kForward;
};

// The fast kernel: SIMD (Highway, dynamic dispatch) and multithreaded.
void ApplyRope(const RopeSpec& spec, const RopeFrequencies& frequencies, const RopeCall& call);

// Convenience: frequencies computed for the call's own length.
void ApplyRope(const RopeSpec& spec, const RopeCall& call);

namespace reference {
// RoFormer's formula, one element pair at a time, in double precision:
//   x'_i = x_i cos(p w_k) - x_j sin(p w_k),  x'_j = x_i sin(p w_k) + x_j cos(p w_k)
// scaled by the attention factor and rounded once to the output dtype.
void ApplyRope(const RopeSpec& spec, const RopeFrequencies& frequencies, const RopeCall& call);

// The one scalar rotation every float64 RoPE in the library uses (the
// reference above, the attention reference, the analyses): R_p x for one
// head x [head_dim] by the spec's layout, pairs (2k, 2k+1) interleaved or
// (k, k + rotary_dim/2) half-split, angle p * inv_freq[k] in double;
// dimensions past rotary_dim pass through. No attention factor.
std::vector<double> RotateHead(const RopeSpec& spec, std::span<const double> inv_freq, std::span<const double> x,
                               double position);
}  // namespace reference

// Throws posenc::Error unless the call fits the spec (shapes, dtypes, head_dim,
// positions, frequency table size). Both implementations call it first.
void ValidateRopeCall(const RopeSpec& spec, const RopeFrequencies& frequencies, const RopeCall& call);

}  // namespace posenc
