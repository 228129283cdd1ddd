#include "model/model_ops.h"

#include <algorithm>
#include <cmath>

#include "kernels/log_sum_exp.h"
#include "model/gated_row.h"
#include "posenc/parallel.h"

namespace posenc::model {
namespace {
// Rows per parallel chunk for row-wise work of ~d..vocab floats per row.
constexpr std::int64_t kRowsPerChunk = 16;

// dst = row / sqrt(mean row^2 + eps) * weight over d floats (dst may be row).
// The squares are summed in double in kLanes interleaved sums, then those in
// a fixed tree: one chain of d dependent double adds held Gemma 3's prefill
// (four norms a layer over 2,048 rows) to a few percent of its time; the
// compiler vectorizes the lanes. The order is fixed, so any split of the
// rows over threads gives the same bits.
void NormRow(const float* row, const float* weight, std::int64_t d, double eps, float* dst) {
  constexpr std::int64_t kLanes = 8;
  double lanes[kLanes] = {};
  std::int64_t j = 0;
  for (; j + kLanes <= d; j += kLanes) {
    for (std::int64_t l = 0; l < kLanes; ++l) lanes[l] += static_cast<double>(row[j + l]) * row[j + l];
  }
  double sum_sq = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
  for (; j < d; ++j) sum_sq += static_cast<double>(row[j]) * row[j];
  const auto scale = static_cast<float>(1.0 / std::sqrt(sum_sq / static_cast<double>(d) + eps));
  for (std::int64_t j = 0; j < d; ++j) dst[j] = row[j] * scale * weight[j];
}
}  // namespace

void GatherRows(const PackedWeights& table, std::span<const std::int32_t> tokens, std::span<float> out) {
  const auto n = static_cast<std::int64_t>(tokens.size());
  const std::int64_t d = table.cols();
  ParallelFor(n, kRowsPerChunk, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) table.Row(tokens[i], out.subspan(i * d, d));
  });
}

void RmsNorm(std::span<const float> x, std::span<const float> weight, double eps, std::span<float> out) {
  const auto d = static_cast<std::int64_t>(weight.size());
  const auto n = static_cast<std::int64_t>(x.size()) / d;
  ParallelFor(n, kRowsPerChunk, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) NormRow(x.data() + i * d, weight.data(), d, eps, out.data() + i * d);
  });
}

void AddInPlace(std::span<float> x, std::span<const float> y) {
  const auto n = static_cast<std::int64_t>(x.size());
  ParallelFor(n, std::int64_t{1} << 14, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) x[i] += y[i];
  });
}

void AddBias(std::span<float> x, std::span<const float> bias) {
  const auto width = static_cast<std::int64_t>(bias.size());
  ParallelFor(static_cast<std::int64_t>(x.size()) / width, kRowsPerChunk, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      for (std::int64_t j = 0; j < width; ++j) x[i * width + j] += bias[j];
    }
  });
}

void RmsNormHeads(std::span<float> rows, std::int64_t row_stride, std::int64_t begin, std::int64_t count,
                  std::span<const float> weight, double eps) {
  const auto hd = static_cast<std::int64_t>(weight.size());
  const auto n = static_cast<std::int64_t>(rows.size()) / row_stride;
  ParallelFor(n, kRowsPerChunk, [&](std::int64_t first, std::int64_t end) {
    for (std::int64_t i = first; i < end; ++i) {
      for (std::int64_t h = 0; h < count; ++h) {
        float* head = rows.data() + i * row_stride + begin + h * hd;
        NormRow(head, weight.data(), hd, eps, head);
      }
    }
  });
}

void Scale(std::span<float> x, float scale) {
  const auto n = static_cast<std::int64_t>(x.size());
  ParallelFor(n, std::int64_t{1} << 14, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) x[i] *= scale;
  });
}

void GatedUnit(std::span<const float> gate_up, std::int64_t ffn, GateActivation activation, std::span<float> out) {
  // Split over the outputs, not the rows, so that the threads share a
  // decode step's single row too (an exp each: ~1,500 of them a layer
  // would otherwise run on one core while the other waits).
  constexpr std::int64_t kOutputsPerChunk = 512;
  ParallelFor(static_cast<std::int64_t>(out.size()), kOutputsPerChunk, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t at = begin; at < end;) {
      const std::int64_t i = at / ffn, first = at % ffn, last = std::min(ffn, first + (end - at));
      const float* gate = gate_up.data() + i * 2 * ffn;
      const float* up = gate + ffn;
      float* dst = out.data() + i * ffn;
      GatedRow(gate + first, up + first, last - first, activation, dst + first);
      at += last - first;
    }
  });
}

void NegativeLogLikelihood(std::span<const float> logits, std::int64_t vocab, std::span<const std::int32_t> targets,
                           std::span<double> nll) {
  const auto rows = static_cast<std::int64_t>(targets.size());
  ParallelFor(rows, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      if (targets[r] < 0) continue;
      const float* row = logits.data() + r * vocab;
      nll[r] = detail::LogSumExp(row, vocab) - static_cast<double>(row[targets[r]]);
    }
  });
}

}  // namespace posenc::model
