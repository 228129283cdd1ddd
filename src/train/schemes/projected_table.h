// Per-head relative tables projected from position embeddings by a trained
// matrix (XLNet's W_R of the distance sinusoids, DeBERTa's projections of
// its relative embeddings), and the backward of the projection.
//
//   table[h][m][e] = sum_c W[h hd + e][c] E[m][c]    E [rows, d], W [d, d] (out, in)
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "posenc/tiny_lm.h"

namespace posenc::tiny_lm {

// [heads, rows, hd] in float64.
inline std::vector<double> ProjectPerHead(std::span<const double> embeddings, std::int64_t rows, const TinyLmTensor& w,
                                          std::int64_t heads, std::int64_t hd) {
  const std::int64_t d = heads * hd;
  std::vector<double> table(static_cast<std::size_t>(heads * rows * hd), 0.0);
  for (std::int64_t m = 0; m < rows; ++m) {
    const double* e = embeddings.data() + m * d;
    for (std::int64_t o = 0; o < d; ++o) {
      const float* w_row = w.values.data() + o * d;
      double sum = 0.0;
      for (std::int64_t c = 0; c < d; ++c) sum += static_cast<double>(w_row[c]) * e[c];
      table[((o / hd) * rows + m) * hd + o % hd] = sum;
    }
  }
  return table;
}

// dtable [heads, rows, hd] -> dw (+=, into a float tensor [d, d]) and, when
// non-null, dembeddings (+=, [rows, d]).
inline void ProjectPerHeadBackward(std::span<const double> dtable, std::span<const double> embeddings,
                                   std::int64_t rows, const TinyLmTensor& w, std::int64_t heads, std::int64_t hd,
                                   TinyLmTensor& dw, std::vector<double>* dembeddings) {
  const std::int64_t d = heads * hd;
  std::vector<double> dw_sum(static_cast<std::size_t>(d * d), 0.0);
  for (std::int64_t m = 0; m < rows; ++m) {
    const double* e = embeddings.data() + m * d;
    for (std::int64_t o = 0; o < d; ++o) {
      const double g = dtable[((o / hd) * rows + m) * hd + o % hd];
      if (g == 0.0) continue;
      double* dw_row = dw_sum.data() + o * d;
      for (std::int64_t c = 0; c < d; ++c) dw_row[c] += g * e[c];
      if (dembeddings == nullptr) continue;
      const float* w_row = w.values.data() + o * d;
      double* de = dembeddings->data() + m * d;
      for (std::int64_t c = 0; c < d; ++c) de[c] += g * static_cast<double>(w_row[c]);
    }
  }
  for (std::size_t e = 0; e < dw_sum.size(); ++e) dw.values[e] += static_cast<float>(dw_sum[e]);
}

}  // namespace posenc::tiny_lm
