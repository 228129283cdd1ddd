// posenc::detail::LogSumExp (a perplexity pass's normalizer) against its
// one-at-a-time reference on every target, and both against identities
// that do not restate the formula.
#include "kernels/log_sum_exp.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "test_util.h"

namespace posenc {
namespace {

using testing::ForEachTarget;

// Lengths around every target's lanes and the 16-vector blocks, and a vocabulary.
constexpr std::int64_t kLengths[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33, 255, 256, 257, 1000, 49152, 50021};

std::vector<float> Logits(std::int64_t n, float spread, float offset, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(offset, spread);
  std::vector<float> x(static_cast<std::size_t>(n));
  for (float& v : x) v = normal(rng);
  return x;
}

TEST(LogSumExp, MatchesTheReferenceOnEveryTarget) {
  for (const std::int64_t n : kLengths) {
    for (const float spread : {0.1f, 3.0f, 30.0f}) {
      for (const float offset : {-80.0f, 0.0f, 90.0f}) {
        const std::vector<float> x = Logits(n, spread, offset, static_cast<std::uint32_t>(n));
        const double expected = detail::LogSumExpReference(x.data(), n);
        SCOPED_TRACE("n=" + std::to_string(n) + " spread=" + std::to_string(spread));
        ForEachTarget([&] { EXPECT_NEAR(detail::LogSumExp(x.data(), n), expected, 2e-6); });
      }
    }
  }
}

// n equal logits c: c + log n exactly; logits log p of a distribution: 0.
TEST(LogSumExp, EqualLogitsAndLogProbabilities) {
  for (const std::int64_t n : kLengths) {
    const std::vector<float> equal(static_cast<std::size_t>(n), 2.5f);
    std::vector<float> log_p(static_cast<std::size_t>(n));
    for (float& v : log_p) v = static_cast<float>(-std::log(static_cast<double>(n)));
    SCOPED_TRACE("n=" + std::to_string(n));
    const double uniform =
        std::log(static_cast<double>(n)) + static_cast<double>(static_cast<float>(-std::log(static_cast<double>(n))));
    for (double (*fn)(const float*, std::int64_t) : {&detail::LogSumExp, &detail::LogSumExpReference}) {
      ForEachTarget([&] {
        EXPECT_NEAR(fn(equal.data(), n), 2.5 + std::log(static_cast<double>(n)), 1e-6);
        EXPECT_NEAR(fn(log_p.data(), n), uniform, 1e-6);
      });
    }
  }
}

// -inf logits (a masked vocabulary) weigh nothing.
TEST(LogSumExp, MinusInfinityWeighsNothing) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  for (const std::int64_t n : kLengths) {
    if (n < 2) continue;
    std::vector<float> x = Logits(n, 2.0f, 0.0f, 3);
    for (std::size_t i = 0; i < x.size(); i += 3) x[i] = -kInf;
    std::vector<float> kept;
    for (const float v : x) {
      if (v != -kInf) kept.push_back(v);
    }
    const double expected = detail::LogSumExpReference(kept.data(), static_cast<std::int64_t>(kept.size()));
    SCOPED_TRACE("n=" + std::to_string(n));
    EXPECT_NEAR(detail::LogSumExpReference(x.data(), n), expected, 1e-9);
    ForEachTarget([&] { EXPECT_NEAR(detail::LogSumExp(x.data(), n), expected, 2e-6); });
  }
}

// A whole chunk of -inf, and every chunk but one: weighs nothing.
TEST(LogSumExp, MinusInfinityChunksWeighNothing) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  constexpr std::int64_t kChunk = detail::kLogSumExpChunk;
  const std::int64_t n = 3 * kChunk + 17;
  for (const std::int64_t kept : {std::int64_t{0}, kChunk, 3 * kChunk}) {
    std::vector<float> x(static_cast<std::size_t>(n), -kInf);
    const std::int64_t count = kept == 3 * kChunk ? 17 : kChunk;
    const std::vector<float> values = Logits(count, 2.0f, 1.0f, 9);
    std::copy(values.begin(), values.end(), x.begin() + kept);
    const double expected = detail::LogSumExpReference(values.data(), count);
    SCOPED_TRACE("kept from " + std::to_string(kept));
    ForEachTarget([&] { EXPECT_NEAR(detail::LogSumExp(x.data(), n), expected, 2e-6); });
  }
}

// The chunks' combination by hand: {max 0, sum 1} and {max log 3, sum 1}
// are exp terms 1 and 3 (log 4); a -inf chunk adds nothing; a NaN chunk or
// nothing but -inf is NaN.
TEST(LogSumExp, CombinesChunksAsTheirExpTerms) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  const auto log3 = static_cast<float>(std::log(3.0));
  const std::vector<detail::ExpSum> two{{0.0f, 1.0}, {log3, 1.0}}, with_empty{{-kInf, 0.0}, {0.0f, 1.0}, {log3, 1.0}};
  const double expected = static_cast<double>(log3) + std::log(1.0 + std::exp(-static_cast<double>(log3)));
  EXPECT_NEAR(expected, std::log(4.0), 1e-7);
  EXPECT_DOUBLE_EQ(detail::CombineExpSums(two), expected);
  EXPECT_DOUBLE_EQ(detail::CombineExpSums(with_empty), expected);
  EXPECT_TRUE(std::isnan(detail::CombineExpSums(std::vector<detail::ExpSum>{{0.0f, 1.0}, {std::nanf(""), 0.0}})));
  EXPECT_TRUE(std::isnan(detail::CombineExpSums(std::vector<detail::ExpSum>{{-kInf, 0.0}, {-kInf, 0.0}})));
}

TEST(LogSumExp, NanForANanOrPlusInfinity) {
  constexpr float kNan = std::numeric_limits<float>::quiet_NaN(), kInf = std::numeric_limits<float>::infinity();
  for (const std::int64_t n : kLengths) {
    for (const float bad : {kNan, kInf}) {
      for (const std::int64_t at : {std::int64_t{0}, n / 2, n - 1}) {
        std::vector<float> x = Logits(n, 1.0f, 0.0f, 7);
        x[static_cast<std::size_t>(at)] = bad;
        SCOPED_TRACE("n=" + std::to_string(n) + " at=" + std::to_string(at) + " bad=" + std::to_string(bad));
        EXPECT_TRUE(std::isnan(detail::LogSumExpReference(x.data(), n)));
        ForEachTarget([&] { EXPECT_TRUE(std::isnan(detail::LogSumExp(x.data(), n))); });
      }
    }
    const std::vector<float> none(static_cast<std::size_t>(n), -kInf);  // every logit -inf
    EXPECT_TRUE(std::isnan(detail::LogSumExpReference(none.data(), n)));
    ForEachTarget([&] { EXPECT_TRUE(std::isnan(detail::LogSumExp(none.data(), n))); });
  }
}

}  // namespace
}  // namespace posenc
