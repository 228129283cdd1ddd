// RoPE and ReRoPE / Leaky ReRoPE in attention: q and k are rotated once per
// token before the tiles (O(n d)); ReRoPE adds a second, far-distance copy
// of each, and the kernel picks per (query, key) which pair to use.
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "attention/lowering/encoding_lowering.h"
#include "posenc/error.h"
#include "posenc/rope.h"

namespace posenc::detail {
namespace {

constexpr const char* kOp = "attention";

void ValidateRotary(const char* name, const RopeSpec& spec, const RopeFrequencies& frequencies,
                    const EncodingCall& call) {
  spec.Validate();
  Require(spec.head_dim == call.head_dim, kOp, std::string(name) + ".head_dim", spec.head_dim,
          "must equal the q/k head_dim = " + std::to_string(call.head_dim));
  Require(static_cast<std::int64_t>(frequencies.inv_freq.size()) == spec.Pairs(), kOp,
          std::string(name) + ".inv_freq.size()", frequencies.inv_freq.size(), "must equal rotary_dim / 2");
}

// The attention factor is folded into the softmax scale (squared), so the
// rotations themselves use a unit factor.
RopeFrequencies Unit(RopeFrequencies f) {
  f.attention_factor = 1.0;
  return f;
}

void RotateInPlace(const RopeSpec& spec, const RopeFrequencies& frequencies, std::vector<float>& data,
                   std::array<std::int64_t, 4> shape, const TokenPositions& positions) {
  const TensorView view = TensorView::Contiguous(data.data(), DType::kF32, shape);
  ApplyRope(spec, frequencies, RopeCall{{RopeOperand::InPlace(view)}, positions});
}

// The two-score-matrix encodings (ReRoPE, Self-Extend): q2/k2 start as
// unrotated copies for the far part; q1/k1 become RoPE at the true
// positions, used for the near keys (`near`).
void LowerNearPair(const RopeSpec& spec, const RopeFrequencies& unit, NearRule near, const AttentionInputs& in,
                   AttentionPlan& plan) {
  plan.near = near;
  plan.q2 = plan.q1;
  plan.k2 = plan.k1;
  RotateInPlace(spec, unit, plan.q1, in.q.shape, *in.q_positions);
  RotateInPlace(spec, unit, plan.k1, in.k.shape, in.k_positions);
}

}  // namespace

void ValidateEncoding(const RopeEncoding& e, const EncodingCall& call) {
  ValidateRotary("rope", e.spec, e.frequencies, call);
}

void ValidateEncoding(const ReRopeEncoding& e, const EncodingCall& call) {
  ValidateRotary("rerope", e.spec, e.frequencies, call);
  Require(e.window > 0, kOp, "rerope.window", e.window, "must be > 0");
  if (e.leak) {
    Require(std::isfinite(*e.leak) && *e.leak > 1, kOp, "rerope.leak", *e.leak,
            "must be > 1 (the growth 1/k beyond the window; k = 1 is plain RoPE)");
  }
  Require(call.mask.causal, kOp, "mask.causal", Verbatim{"false"}, "ReRoPE is defined for causal attention");
}

void ValidateEncoding(const SelfExtendEncoding& e, const EncodingCall& call) {
  ValidateRotary("self_extend", e.spec, e.frequencies, call);
  Require(e.group >= 1, kOp, "self_extend.group", e.group, "must be >= 1 (1: plain RoPE)");
  Require(e.window >= 1, kOp, "self_extend.window", e.window, "must be >= 1");
  Require(call.mask.causal, kOp, "mask.causal", Verbatim{"false"}, "Self-Extend is defined for causal attention");
  if (e.form == SelfExtendForm::kKvShift) {
    Require(e.window % e.group == 0, kOp, "self_extend.window", e.window,
            "must be a multiple of group = " + std::to_string(e.group) +
                " for the KV-shift form (llama.cpp asserts grp_attn_w % grp_attn_n == 0)");
  }
}

void LowerEncoding(const RopeEncoding& e, const AttentionInputs& in, AttentionPlan& plan) {
  RotateInPlace(e.spec, Unit(e.frequencies), plan.q1, in.q.shape, *in.q_positions);
  RotateInPlace(e.spec, Unit(e.frequencies), plan.k1, in.k.shape, in.k_positions);
}

// q1/k1: RoPE at the true positions (distances below the window). q2/k2:
// the far part — q at the window and k unrotated (ReRoPE), or q at
// p/k + w(1 - 1/k) and k at j/k (Leaky ReRoPE).
void LowerEncoding(const ReRopeEncoding& e, const AttentionInputs& in, AttentionPlan& plan) {
  const std::array<std::int64_t, 4> q_shape = in.q.shape, k_shape = in.k.shape;
  const RopeFrequencies unit = Unit(e.frequencies);
  LowerNearPair(e.spec, unit, {.window = e.window}, in, plan);
  // Every query token at one position (the window, or 1 for a constant shift).
  const auto all_at = [&](std::int64_t position) {
    return TokenPositions::Ids(std::vector<std::int64_t>(static_cast<std::size_t>(q_shape[0] * q_shape[1]), position));
  };
  if (!e.leak) {
    RotateInPlace(e.spec, unit, plan.q2, q_shape, all_at(e.window));
    return;
  }
  // Leaky: q at p/k + w(1 - 1/k) = rotation by p with frequencies/k, then a
  // constant rotation by w(1 - 1/k) (angles in one plane add); k at j/k.
  const double leak = *e.leak, w = static_cast<double>(e.window);
  RopeFrequencies slow = unit, shift = unit;
  for (double& f : slow.inv_freq) f /= leak;
  for (double& f : shift.inv_freq) f *= w * (1 - 1 / leak);
  RotateInPlace(e.spec, slow, plan.q2, q_shape, *in.q_positions);
  RotateInPlace(e.spec, shift, plan.q2, q_shape, all_at(1));
  RotateInPlace(e.spec, slow, plan.k2, k_shape, in.k_positions);
}

// q1/k1: RoPE at the true positions (the near keys). q2/k2: the grouped
// positions, k at floor(j/G) and q at floor(p/G) + W - floor(W/G)
// (published) or at p - floor(p/W) (W - W/G) (llama.cpp's KV shifts).
void LowerEncoding(const SelfExtendEncoding& e, const AttentionInputs& in, AttentionPlan& plan) {
  const std::array<std::int64_t, 4> q_shape = in.q.shape, k_shape = in.k.shape;
  const RopeFrequencies unit = Unit(e.frequencies);
  const bool kv_shift = e.form == SelfExtendForm::kKvShift;
  LowerNearPair(e.spec, unit, {.window = e.window, .keys = kv_shift ? NearKeys::kCurrentBlock : NearKeys::kLastWindow},
                in, plan);
  const std::int64_t w = e.window, g = e.group;
  const auto mapped = [](const std::vector<std::int64_t>& positions, auto position_of) {
    std::vector<std::int64_t> out(positions.size());
    for (std::size_t t = 0; t < positions.size(); ++t) out[t] = position_of(positions[t]);
    return TokenPositions::Ids(std::move(out));
  };
  const auto grouped_query = [&](std::int64_t p) { return kv_shift ? p - p / w * (w - w / g) : p / g + w - w / g; };
  RotateInPlace(e.spec, unit, plan.q2, q_shape, mapped(plan.q_positions, grouped_query));
  RotateInPlace(e.spec, unit, plan.k2, k_shape, mapped(plan.k_positions, [&](std::int64_t j) { return j / g; }));
}

}  // namespace posenc::detail
