// Dynamic dispatch of the RoPE kernel (rope-inl.h) and the public entry point.
#include <algorithm>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/rope.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/rope-inl.h"

#if HWY_ONCE
#include "posenc/error.h"
#include "posenc/parallel.h"

namespace posenc {
namespace detail {

HWY_EXPORT(RopeTokenRangeImpl);

void RopeTokenRange(const RopeKernelPlan& plan, std::int64_t begin, std::int64_t end) {
  HWY_DYNAMIC_DISPATCH(RopeTokenRangeImpl)(plan, begin, end);
}

}  // namespace detail

void ApplyRope(const RopeSpec& spec, const RopeFrequencies& frequencies, const RopeCall& call) {
  ValidateRopeCall(spec, frequencies, call);
  // The kernel is instantiated per dtype, once for the whole call.
  for (const RopeOperand& op : call.operands) {
    Require(op.in.dtype == call.operands.front().in.dtype, "rope", "operands.dtype", DTypeName(op.in.dtype),
            "all operands of one call must share a dtype");
  }
  const auto& first = call.operands.front().in;
  const std::int64_t tokens = first.batch() * first.seq();
  if (tokens == 0) return;

  detail::RopeKernelPlan plan{
      .layout = spec.layout,
      .rotary_dim = spec.RotaryDim(),
      .pairs = spec.Pairs(),
      .inv_freq = frequencies.inv_freq,
      .sine_sign = call.direction == RopeDirection::kForward ? 1.0f : -1.0f,
      .scale = static_cast<float>(call.direction == RopeDirection::kInverse ? 1.0 / frequencies.attention_factor
                                                                            : frequencies.attention_factor),
      .call = &call,
      .seq = first.seq(),
  };
  ParallelFor(tokens, 4, [&](std::int64_t begin, std::int64_t end) { detail::RopeTokenRange(plan, begin, end); });
}

}  // namespace posenc
#endif  // HWY_ONCE
