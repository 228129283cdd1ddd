// ALiBi and T5 in attention: additive biases on the logits. ALiBi keeps its
// slopes (the kernel adds slope * distance); T5 becomes a table of bias by
// relative position over the span this call can produce.
#include <algorithm>
#include <string>

#include "attention/lowering/encoding_lowering.h"
#include "posenc/error.h"

namespace posenc::detail {
namespace {
constexpr const char* kOp = "attention";
}  // namespace

void ValidateEncoding(const AlibiEncoding& e, const EncodingCall& call) {
  Require(static_cast<std::int64_t>(e.slopes.size()) == call.q_heads, kOp, "alibi.slopes.size()", e.slopes.size(),
          "must equal q_heads = " + std::to_string(call.q_heads));
}

void ValidateEncoding(const T5BiasEncoding& e, const EncodingCall& call) {
  e.buckets.Validate();
  Require(static_cast<std::int64_t>(e.weights.size()) == e.buckets.num_buckets * call.q_heads, kOp, "t5.weights.size()",
          e.weights.size(),
          "must equal num_buckets * q_heads = " + std::to_string(e.buckets.num_buckets * call.q_heads));
}

void LowerEncoding(const AlibiEncoding& e, const AttentionInputs&, AttentionPlan& plan) {
  plan.bias = e.form == AlibiForm::kDistance ? BiasKind::kAlibiDistance : BiasKind::kAlibiKeyPosition;
  plan.slopes.assign(e.slopes.begin(), e.slopes.end());
}

void LowerEncoding(const T5BiasEncoding& e, const AttentionInputs&, AttentionPlan& plan) {
  const auto [q_min, q_max] = std::minmax_element(plan.q_positions.begin(), plan.q_positions.end());
  const auto [k_min, k_max] = std::minmax_element(plan.k_positions.begin(), plan.k_positions.end());
  plan.bias = BiasKind::kRelativeTable;
  plan.relative_min = plan.kv_len ? *k_min - *q_max : 0;
  plan.relative_span = (plan.kv_len ? *k_max - *q_min - plan.relative_min + 1 : 1) + AttentionPlan::kRelativePadding;
  plan.relative_table.resize(static_cast<std::size_t>(plan.q_heads * plan.relative_span));
  for (std::int64_t r = 0; r < plan.relative_span; ++r) {
    const std::int64_t bucket = T5RelativeBucket(e.buckets, plan.relative_min + r);
    for (std::int64_t h = 0; h < plan.q_heads; ++h) {
      plan.relative_table[h * plan.relative_span + r] = static_cast<float>(e.weights[bucket * plan.q_heads + h]);
    }
  }
}

}  // namespace posenc::detail
