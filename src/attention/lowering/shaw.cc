// Shaw et al. relative keys and values (and BERT's relative_key_query) in
// attention: q . a^K per query row and k . a^K per key, for every clipped
// relative row; the kernel gathers them by distance and adds the value term
// from each row's softmax mass.
#include <string>

#include "attention/lowering/encoding_lowering.h"
#include "posenc/error.h"
#include "posenc/parallel.h"

namespace posenc::detail {
namespace {
constexpr const char* kOp = "attention";
}  // namespace

void ValidateEncoding(const ShawEncoding& e, const EncodingCall& call) {
  e.spec.Validate();
  const std::int64_t rows = e.spec.Rows();
  if (e.spec.key_term || e.spec.query_term) {
    Require(static_cast<std::int64_t>(e.rel_k.size()) == rows * call.head_dim, kOp, "shaw.rel_k.size()", e.rel_k.size(),
            "must equal (2K+1) * head_dim = " + std::to_string(rows * call.head_dim));
  }
  if (e.spec.value_term) {
    Require(static_cast<std::int64_t>(e.rel_v.size()) == rows * call.v_dim, kOp, "shaw.rel_v.size()", e.rel_v.size(),
            "must equal (2K+1) * v_dim = " + std::to_string(rows * call.v_dim));
  }
}

void LowerEncoding(const ShawEncoding& e, const AttentionInputs&, AttentionPlan& plan) {
  const std::int64_t rows = e.spec.Rows(), dim = plan.head_dim;
  plan.shaw = e.spec;
  plan.shaw_rows = rows;
  const auto dot = [&](const float* x, std::int64_t r) {
    double sum = 0;
    for (std::int64_t d = 0; d < dim; ++d) sum += x[d] * e.rel_k[r * dim + d];
    return sum;
  };
  if (e.spec.key_term) {
    // Scaled like the q . k it is added to (q is scaled after lowering).
    const std::int64_t q_rows = plan.batch * plan.q_len * plan.q_heads;
    plan.shaw_qr.resize(static_cast<std::size_t>(q_rows * rows));
    ParallelFor(q_rows, 16, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) {
        const double scale = plan.q_factor[i / plan.q_heads];
        for (std::int64_t r = 0; r < rows; ++r) {
          plan.shaw_qr[i * rows + r] = static_cast<float>(scale * dot(plan.q1.data() + i * dim, r));
        }
      }
    });
  }
  if (e.spec.query_term) {
    plan.shaw_kr.resize(static_cast<std::size_t>(plan.batch * plan.kv_heads * rows * plan.kv_len));
    ParallelFor(plan.batch * plan.kv_heads, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t bh = begin; bh < end; ++bh) {
        const std::int64_t b = bh / plan.kv_heads, h = bh % plan.kv_heads;
        for (std::int64_t j = 0; j < plan.kv_len; ++j) {
          const float* k = plan.k1.data() + ((b * plan.kv_len + j) * plan.kv_heads + h) * dim;
          for (std::int64_t r = 0; r < rows; ++r) {
            plan.shaw_kr[(bh * rows + r) * plan.kv_len + j] = static_cast<float>(dot(k, r));
          }
        }
      }
    });
  }
  if (e.spec.value_term) plan.shaw_rel_v.assign(e.rel_v.begin(), e.rel_v.end());
}

}  // namespace posenc::detail
