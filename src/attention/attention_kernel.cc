// Dynamic dispatch of the tiled attention kernel (attention-inl.h).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "attention/attention_kernel.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "attention/attention-inl.h"

#if HWY_ONCE
namespace posenc::detail {

HWY_EXPORT(RunAttentionPlanImpl);

void RunAttentionPlan(const AttentionPlan& plan) { HWY_DYNAMIC_DISPATCH(RunAttentionPlanImpl)(plan); }

}  // namespace posenc::detail
#endif  // HWY_ONCE
