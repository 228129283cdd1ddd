// ALiBi, T5 and URPE in attention: additive biases on the logits. ALiBi
// keeps its slopes (the kernel adds slope * distance); T5 becomes a table of
// bias by relative position over the span this call can produce, and URPE
// that table and a second one of its Toeplitz weights.
#include <algorithm>
#include <cmath>
#include <limits>
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
  for (std::size_t h = 0; h < e.slopes.size(); ++h) {
    // A NaN or infinite slope (the kernel's float32 one too) times the
    // diagonal's distance 0 is NaN.
    Require(std::abs(e.slopes[h]) <= std::numeric_limits<float>::max(), kOp, "alibi.slopes[" + std::to_string(h) + "]",
            e.slopes[h], "must be finite in float32");
  }
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

void ValidateEncoding(const UrpeEncoding& e, const EncodingCall& call) {
  e.buckets.Validate();
  const std::int64_t size = e.buckets.num_buckets * call.q_heads;
  Require(static_cast<std::int64_t>(e.bias.size()) == size, kOp, "urpe.bias.size()", e.bias.size(),
          "must equal num_buckets * q_heads = " + std::to_string(size));
  Require(static_cast<std::int64_t>(e.scale.size()) == size, kOp, "urpe.scale.size()", e.scale.size(),
          "must equal num_buckets * q_heads = " + std::to_string(size));
}

namespace {

// The relative positions (key - query) this call can produce, from
// plan.relative_min, padded past the largest key (AttentionPlan).
void SetRelativeSpan(AttentionPlan& plan) {
  const auto [q_min, q_max] = std::minmax_element(plan.q_positions.begin(), plan.q_positions.end());
  const auto [k_min, k_max] = std::minmax_element(plan.k_positions.begin(), plan.k_positions.end());
  plan.relative_min = plan.kv_len ? *k_min - *q_max : 0;
  plan.relative_span = (plan.kv_len ? *k_max - *q_min - plan.relative_min + 1 : 1) + AttentionPlan::kRelativePadding;
}

// [q_heads][relative_span] of the bucket weights [num_buckets, q_heads] (HF's layout).
std::vector<float> BucketTable(const T5BucketSpec& buckets, const std::vector<double>& weights,
                               const AttentionPlan& plan) {
  std::vector<float> table(static_cast<std::size_t>(plan.q_heads * plan.relative_span));
  for (std::int64_t r = 0; r < plan.relative_span; ++r) {
    const std::int64_t bucket = T5RelativeBucket(buckets, plan.relative_min + r);
    for (std::int64_t h = 0; h < plan.q_heads; ++h) {
      table[h * plan.relative_span + r] = static_cast<float>(weights[bucket * plan.q_heads + h]);
    }
  }
  return table;
}

}  // namespace

void LowerEncoding(const T5BiasEncoding& e, const AttentionInputs&, AttentionPlan& plan) {
  SetRelativeSpan(plan);
  plan.bias = BiasKind::kRelativeTable;
  plan.relative_table = BucketTable(e.buckets, e.weights, plan);
}

void LowerEncoding(const UrpeEncoding& e, const AttentionInputs&, AttentionPlan& plan) {
  SetRelativeSpan(plan);
  plan.bias = BiasKind::kRelativeTable;
  plan.relative_table = BucketTable(e.buckets, e.bias, plan);
  plan.probability_scale = BucketTable(e.buckets, e.scale, plan);
}

}  // namespace posenc::detail
