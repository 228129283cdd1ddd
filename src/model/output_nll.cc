#include "model/output_nll.h"

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/log_sum_exp.h"
#include "kernels/logit_range.h"
#include "posenc/error.h"
#include "posenc/parallel.h"

namespace posenc::model {
namespace {
// Rows a pass: the weights are read (and the integer kernel's panels
// unpacked) once a pass; a chunk of logits is [2,048 x 1,024] floats, 8 MiB,
// which the reduction reads back from the cache, and so are the ExpSums of a
// 262,144-token vocabulary (2,048 x 256 x 16 bytes).
constexpr std::int64_t kPassRows = 2048;
constexpr std::int64_t kRowsPerChunk = 16;  // of a ParallelFor over rows
constexpr std::int64_t kNone = -1;
static_assert(detail::kLogSumExpChunk % kColumnChunkAlignment == 0, "a log-sum-exp chunk is whole product chunks");
}  // namespace

void OutputNegativeLogLikelihood(std::span<const float> hidden, const PackedWeights& output, DotActivations activations,
                                 std::span<const std::int32_t> targets, std::span<const std::int64_t> positions,
                                 const char* op, std::span<double> nll) {
  const std::int64_t d = output.cols(), vocab = output.rows();
  const auto m = static_cast<std::int64_t>(targets.size());
  constexpr std::int64_t kChunk = detail::kLogSumExpChunk;
  const std::int64_t chunks = (vocab + kChunk - 1) / kChunk;
  Require(static_cast<std::int64_t>(hidden.size()) == m * d, op, "hidden.size()", hidden.size(),
          "must be rows * d = " + std::to_string(m) + " * " + std::to_string(d));
  Require(positions.size() == targets.size() && nll.size() == targets.size(), op, "nll.size()", nll.size(),
          "must be the number of targets, " + std::to_string(m) + ", as positions.size() must");
  for (std::int64_t r = 0; r < m; ++r) {
    Require(
        targets[r] < vocab, op, [&] { return "targets[" + std::to_string(r) + "]"; }, targets[r],
        [&] { return "must be < the vocabulary size " + std::to_string(vocab) + " (or < 0: no target)"; });
  }
  std::vector<detail::ExpSum> sums;
  std::vector<float> target_logit;
  std::vector<std::int64_t> out_of_range;  // a row's first column out of range in this chunk
  for (std::int64_t first = 0; first < m; first += kPassRows) {
    const std::int64_t rows = std::min(kPassRows, m - first);
    sums.resize(static_cast<std::size_t>(rows * chunks));
    target_logit.assign(static_cast<std::size_t>(rows), 0.0F);
    out_of_range.assign(static_cast<std::size_t>(rows), kNone);
    const auto consume = [&](std::int64_t col, std::int64_t width, std::span<const float> logits) {
      const std::int64_t c = col / kChunk;
      ParallelFor(rows, kRowsPerChunk, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t r = begin; r < end; ++r) {
          const float* row = logits.data() + r * width;
          const std::int64_t j = detail::FirstOutOfRange(row, width, detail::kLogitLimit);
          if (j < width) {
            out_of_range[r] = col + j;
            continue;
          }
          sums[r * chunks + c] = detail::ChunkExpSum(row, width);
          const std::int32_t target = targets[first + r];
          if (target >= col && target < col + width) target_logit[r] = row[target - col];
        }
      });
      for (std::int64_t r = 0; r < rows; ++r) {
        if (const std::int64_t j = out_of_range[r]; j != kNone) {
          detail::ThrowLogitOutOfRange(op, positions[first + r], j, logits[r * width + j - col]);
        }
      }
    };
    MatMulColumnChunks(hidden.subspan(first * d, rows * d), rows, output, kChunk, activations, consume);
    ParallelFor(rows, kRowsPerChunk, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t r = begin; r < end; ++r) {
        if (targets[first + r] < 0) continue;
        nll[first + r] =
            detail::CombineExpSums(std::span(sums).subspan(r * chunks, chunks)) - static_cast<double>(target_logit[r]);
      }
    });
  }
}

}  // namespace posenc::model
