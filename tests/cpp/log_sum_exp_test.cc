// posenc::detail::LogSumExp (a perplexity pass's normalizer) against its
// one-at-a-time reference on every target, and both against identities
// that do not restate the formula.
#include "kernels/log_sum_exp.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
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
    for (std::size_t i = 0; i < log_p.size(); ++i) log_p[i] = static_cast<float>(-std::log(static_cast<double>(n)));
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
