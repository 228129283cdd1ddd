// model::OutputNegativeLogLikelihood (a perplexity pass's losses straight
// from the hidden states, the output product a chunk of columns at a time)
// against the two steps it fuses: MatMul's logits, then
// NegativeLogLikelihood. Bitwise, over vocabularies of several log-sum-exp
// chunks with a tail, float32 panels and stored rows with float32 and int8
// activations, more rows than one pass, every compiled target; rows without
// a target untouched; a logit out of range named by its position and token.
#include "model/output_nll.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "kernels/log_sum_exp.h"
#include "model/model_ops.h"
#include "posenc/dtype.h"
#include "posenc/matmul.h"
#include "random_blocks.h"
#include "test_util.h"

namespace posenc {
namespace {

using testing::ExpectError;
using testing::ForEachTarget;
using testing::UniformFloats;

// Targets in [0, vocab), every seventh row without one (-1).
std::vector<std::int32_t> Targets(std::int64_t m, std::int64_t vocab) {
  std::mt19937 rng(5);
  std::vector<std::int32_t> targets(static_cast<std::size_t>(m));
  for (std::size_t r = 0; r < targets.size(); ++r) {
    targets[r] = r % 7 == 3 ? -1 : static_cast<std::int32_t>(rng() % static_cast<std::uint32_t>(vocab));
  }
  return targets;
}

std::vector<std::int64_t> Positions(std::int64_t m) {
  std::vector<std::int64_t> positions(static_cast<std::size_t>(m));
  for (std::size_t r = 0; r < positions.size(); ++r) positions[r] = 1000 + 2 * static_cast<std::int64_t>(r);
  return positions;
}

void ExpectTheTwoSteps(const std::vector<float>& hidden, std::int64_t m, const PackedWeights& w,
                       DotActivations activations) {
  const std::int64_t vocab = w.rows();
  const std::vector<std::int32_t> targets = Targets(m, vocab);
  std::vector<float> logits(static_cast<std::size_t>(m * vocab));
  MatMul(hidden, m, w, logits, activations, FewRows::kPanels);
  std::vector<double> expected(static_cast<std::size_t>(m), -7.0), nll(expected.size(), -7.0);
  model::NegativeLogLikelihood(logits, vocab, targets, expected);
  model::OutputNegativeLogLikelihood(hidden, w, activations, targets, Positions(m), "test", nll);
  EXPECT_EQ(nll, expected);
  for (std::size_t r = 3; r < nll.size(); r += 7) EXPECT_EQ(nll[r], -7.0) << "row " << r << " has no target";
}

TEST(OutputNegativeLogLikelihood, BitwiseTheLogitsThenTheirLoss) {
  // 3,000: two whole chunks of 1,024 and a tail; 2,100 rows: two passes.
  const std::int64_t vocab = 2 * detail::kLogSumExpChunk + 952;
  for (const std::int64_t m : {1, 5, 2100}) {
    SCOPED_TRACE("m=" + std::to_string(m));
    {
      const std::int64_t k = 24;
      const PackedWeights w = PackedWeights::Pack(UniformFloats(vocab * k, 3), vocab, k);
      const std::vector<float> hidden = UniformFloats(m * k, static_cast<std::uint32_t>(m), 2.0f);
      ForEachTarget([&] { ExpectTheTwoSteps(hidden, m, w, DotActivations::kFloat32); });
    }
    for (const GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_K}) {
      const std::int64_t k = TraitsOf(type).block_elements;
      const std::vector<std::byte> bytes = testing::RandomBlocks(type, vocab, k, 7, 2.0f);
      const WeightRows part{type, vocab, bytes};
      const std::vector<float> hidden = UniformFloats(m * k, static_cast<std::uint32_t>(m + 1), 2.0f);
      for (const DotActivations activations : {DotActivations::kFloat32, DotActivations::kInt8}) {
        SCOPED_TRACE(std::string(TraitsOf(type).name) + (activations == DotActivations::kInt8 ? " int8" : " f32"));
        ForEachTarget([&] {
          const PackedWeights w = PackedWeights::FromRows({&part, 1}, k, WeightStorage::kAsStored, activations);
          ExpectTheTwoSteps(hidden, m, w, activations);
        });
      }
    }
  }
}

// A NaN weight row makes token 2,500 NaN in every row: the first row is
// named. A row of huge hidden values makes that row's logits overflow the
// limit: it is named, by its position.
TEST(OutputNegativeLogLikelihood, NamesALogitOutOfRange) {
  const std::int64_t vocab = 3000, k = 16, m = 6;
  std::vector<float> weights = UniformFloats(vocab * k, 3);
  const std::vector<float> hidden = UniformFloats(m * k, 4);
  const std::vector<std::int32_t> targets = Targets(m, vocab);
  std::vector<double> nll(static_cast<std::size_t>(m), -7.0);
  std::vector<float> nan_row = weights;
  nan_row[2500 * k + 3] = std::nanf("");
  const PackedWeights with_nan = PackedWeights::Pack(nan_row, vocab, k);
  ExpectError(
      [&] {
        model::OutputNegativeLogLikelihood(hidden, with_nan, DotActivations::kFloat32, targets, Positions(m), "test",
                                           nll);
      },
      {"logits[position 1000, token 2500]", "nan", "must be finite"});
  std::vector<float> huge = hidden;
  for (std::int64_t c = 0; c < k; ++c) huge[4 * k + c] *= 1e8f;
  const PackedWeights w = PackedWeights::Pack(weights, vocab, k);
  ExpectError(
      [&] {
        model::OutputNegativeLogLikelihood(huge, w, DotActivations::kFloat32, targets, Positions(m), "test", nll);
      },
      {"logits[position 1008, token 0]", "must be finite"});
  EXPECT_EQ(nll, std::vector<double>(static_cast<std::size_t>(m), -7.0));  // nothing written
  std::vector<std::int32_t> past = targets;
  past[2] = static_cast<std::int32_t>(vocab);
  ExpectError(
      [&] { model::OutputNegativeLogLikelihood(hidden, w, DotActivations::kFloat32, past, Positions(m), "test", nll); },
      {"targets[2] = 3000", "must be < the vocabulary size 3000"});
  ExpectError(
      [&] {
        model::OutputNegativeLogLikelihood(std::span(hidden).first(k), w, DotActivations::kFloat32, targets,
                                           Positions(m), "test", nll);
      },
      {"hidden.size() = 16", "must be rows * d = 6 * 16"});
}

}  // namespace
}  // namespace posenc
