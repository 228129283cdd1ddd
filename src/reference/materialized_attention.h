// The one float64 attention of the library's references. Every reference
// attention — posenc::reference::Attention (the fused kernel's reference, any
// encoding in attention.h) and the materialized relative forms of
// relative_attention.h (plain, biased, ALiBi, T5, Shaw, XLNet, DeBERTa) — is
// this function with its own logits, visibility and values; the softmax, the
// masking rule, sink logits and the NaN rule live here once.
//
// Index space: b < batch, h < heads, i < q_len (query), j < k_len (key).
// Result (row-major, float64):
//   scores [batch, heads, q_len, k_len]  logit(b, h, i, j) for every pair,
//          visible or not (a form's "scores before masking")
//   probs  [batch, heads, q_len, k_len]  softmax over the visible keys (and
//          the sink, which takes its share but has no entry); 0 elsewhere
//   output [batch, heads, q_len, value_dim]  sum_j probs * value(b, h, i, j)
// A row whose visible logits include a NaN is NaN (as softmax would make
// it); a row with no visible key and no sink is 0.
#pragma once

#include <cstdint>
#include <functional>

#include "posenc/relative_attention.h"

namespace posenc::reference {

struct MaterializedShape {
  std::int64_t batch = 0, heads = 0, q_len = 0, k_len = 0, value_dim = 0;
};

struct MaterializedTerms {
  // The full logit of query i and key j (scale, positional terms, capping).
  std::function<double(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j)> logit;
  // Whether query i sees key j (mask, padding, valid lengths).
  std::function<bool(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j)> visible;
  // Adds weight * (the value query i reads from key j) to out[value_dim]:
  // v_j, plus a form's value term (Shaw's a^V_ij).
  std::function<void(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j, double weight, double* out)>
      add_value;
  // Unset: no sink. Else the logit of a virtual key with a zero value that
  // joins every softmax of head h (gpt-oss).
  std::function<double(std::int64_t h)> sink_logit;
};

RelativeAttentionResult MaterializedAttention(const MaterializedShape& shape, const MaterializedTerms& terms);

}  // namespace posenc::reference
