#include "naive_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "posenc/parallel.h"
#include "posenc/rope.h"

namespace posenc::bench {

void NaiveCausalAttention(const AttentionInputs& in, const RopeEncoding& rope) {
  const std::int64_t n = in.q.shape[1], q_heads = in.q.shape[2], dim = in.q.shape[3];  // batch 1
  const std::int64_t kv_heads = in.k.heads(), group = q_heads / kv_heads;
  // Rotated copies of q and k, dense [n][heads][dim] (batch 1).
  std::vector<float> q(static_cast<const float*>(in.q.data), static_cast<const float*>(in.q.data) + n * q_heads * dim);
  std::vector<float> k(static_cast<const float*>(in.k.data), static_cast<const float*>(in.k.data) + n * kv_heads * dim);
  ApplyRope(rope.spec, rope.frequencies,
            RopeCall{{RopeOperand::InPlace(TensorView::Contiguous(q.data(), DType::kF32, {1, n, q_heads, dim})),
                      RopeOperand::InPlace(TensorView::Contiguous(k.data(), DType::kF32, {1, n, kv_heads, dim}))}});
  const auto* v = static_cast<const float*>(in.v.data);
  auto* out = static_cast<float*>(in.out.data);
  const float scale = 1.0f / std::sqrt(static_cast<float>(dim));
  ParallelFor(q_heads * n, 1, [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> scores(static_cast<std::size_t>(n));
    for (std::int64_t item = begin; item < end; ++item) {
      const std::int64_t h = item / n, i = item % n, kvh = h / group;
      const float* qi = q.data() + (i * q_heads + h) * dim;
      float max_score = -INFINITY;
      for (std::int64_t j = 0; j <= i; ++j) {  // the materialized causal row
        const float* kj = k.data() + (j * kv_heads + kvh) * dim;
        float dot = 0;
        for (std::int64_t d = 0; d < dim; ++d) dot += qi[d] * kj[d];
        scores[j] = dot * scale;
        max_score = std::max(max_score, scores[j]);
      }
      float sum = 0;
      for (std::int64_t j = 0; j <= i; ++j) sum += scores[j] = std::exp(scores[j] - max_score);
      float* o = out + (i * q_heads + h) * dim;
      std::fill_n(o, dim, 0.0f);
      for (std::int64_t j = 0; j <= i; ++j) {
        const float* vj = v + (j * kv_heads + kvh) * dim;
        const float p = scores[j] / sum;
        for (std::int64_t d = 0; d < dim; ++d) o[d] += p * vj[d];
      }
    }
  });
}

}  // namespace posenc::bench
