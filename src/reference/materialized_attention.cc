// The one float64 softmax-attention of the references: every logit
// materialized, then the visible ones normalized, one query row at a time.
#include "reference/materialized_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace posenc::reference {

RelativeAttentionResult MaterializedAttention(const MaterializedShape& s, const MaterializedTerms& terms) {
  constexpr double kMinusInf = -std::numeric_limits<double>::infinity();
  RelativeAttentionResult result;
  result.scores.resize(static_cast<std::size_t>(s.batch * s.heads * s.q_len * s.k_len));
  result.probs.assign(result.scores.size(), 0.0);
  result.output.assign(static_cast<std::size_t>(s.batch * s.heads * s.q_len * s.value_dim), 0.0);
  std::vector<char> visible(static_cast<std::size_t>(s.k_len));
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t h = 0; h < s.heads; ++h) {
      const double sink = terms.sink_logit ? terms.sink_logit(h) : kMinusInf;
      for (std::int64_t i = 0; i < s.q_len; ++i) {
        const std::int64_t row = (b * s.heads + h) * s.q_len + i;
        double* scores = result.scores.data() + row * s.k_len;
        double* probs = result.probs.data() + row * s.k_len;
        double* out = result.output.data() + row * s.value_dim;
        double row_max = sink;
        bool saw_nan = std::isnan(sink);
        for (std::int64_t j = 0; j < s.k_len; ++j) {
          scores[j] = terms.logit(b, h, i, j);
          visible[j] = terms.visible(b, h, i, j);
          if (!visible[j]) continue;
          row_max = std::max(row_max, scores[j]);
          saw_nan = saw_nan || std::isnan(scores[j]);
        }
        if (saw_nan) {
          std::fill_n(out, s.value_dim, std::numeric_limits<double>::quiet_NaN());
          continue;
        }
        if (row_max == kMinusInf) continue;       // nothing to attend to
        double total = std::exp(sink - row_max);  // 0 without a sink
        for (std::int64_t j = 0; j < s.k_len; ++j) {
          if (!visible[j]) continue;
          probs[j] = std::exp(scores[j] - row_max);
          total += probs[j];
        }
        for (std::int64_t j = 0; j < s.k_len; ++j) {
          if (!visible[j] || probs[j] == 0) continue;
          probs[j] /= total;
          terms.add_value(b, h, i, j, probs[j], out);
        }
      }
    }
  }
  return result;
}

}  // namespace posenc::reference
