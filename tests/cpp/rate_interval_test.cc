// Intervals of a success rate (rate_interval.h): Wilson's against the values
// Newcombe (1998, Statistics in Medicine 17: 857-872, Table I) publishes,
// the seeds' interval against Student's t table, McNemar's exact test
// against binomial tails computed by hand. Their coverage:
// interval_coverage_test.cc.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "posenc/error.h"
#include "posenc/rate_interval.h"
#include "test_util.h"

namespace posenc {
namespace {

using testing::ExpectError;

TEST(RateInterval, WilsonMatchesNewcombesTable) {
  struct Case {
    std::int64_t successes, trials;
    double low, high;
  };
  // Newcombe's method 3 (score interval without continuity correction), 4 decimals.
  for (const Case& c : {Case{81, 263, 0.2553, 0.3662}, Case{15, 148, 0.0624, 0.1605}, Case{0, 20, 0.0, 0.1611},
                        Case{1, 29, 0.0061, 0.1718}}) {
    const RateInterval ci = WilsonInterval(c.successes, c.trials);
    EXPECT_NEAR(ci.low, c.low, 6e-5) << c.successes << "/" << c.trials;
    EXPECT_NEAR(ci.high, c.high, 6e-5) << c.successes << "/" << c.trials;
    EXPECT_DOUBLE_EQ(ci.rate, static_cast<double>(c.successes) / static_cast<double>(c.trials));
  }
  const RateInterval all = WilsonInterval(20, 20);  // the mirror of 0/20
  EXPECT_NEAR(all.low, 1 - 0.1611, 6e-5);
  EXPECT_DOUBLE_EQ(all.high, 1.0);
}

TEST(RateInterval, SeedsAreTheUnits) {
  // Each seed's accuracy, then Student's t over the seeds, t from the
  // published table: t(0.975, 2) = 4.302653, t(0.975, 4) = 2.776445.
  // 40%, 50%, 60%: mean 0.5, sd 0.1, half width 4.302653 * 0.1 / sqrt(3).
  const std::vector<SeedOutcomes> three{{40, 100}, {50, 100}, {60, 100}};
  const MeanInterval a = SeedRateInterval(three);
  EXPECT_EQ(a.count, 3);
  EXPECT_NEAR(a.mean, 0.5, 1e-12);
  EXPECT_NEAR(a.high - a.mean, 4.302653 * 0.1 / std::sqrt(3.0), 1e-6);
  EXPECT_NEAR(a.mean - a.low, 4.302653 * 0.1 / std::sqrt(3.0), 1e-6);
  EXPECT_FALSE(a.degenerate);
  // 2, 3, 3, 4, 3 of 10: mean 0.3, sd sqrt(0.02 / 4).
  const std::vector<SeedOutcomes> five{{2, 10}, {3, 10}, {3, 10}, {4, 10}, {3, 10}};
  const MeanInterval b = SeedRateInterval(five);
  EXPECT_NEAR(b.mean, 0.3, 1e-12);
  EXPECT_NEAR(b.high - b.mean, 2.776445 * std::sqrt(0.005) / std::sqrt(5.0), 1e-6);
  // The seeds' own rates, not the pooled answers: 1/10 and 30/30 pool to 31/40 = 77.5%, average 55%.
  const std::vector<SeedOutcomes> unequal{{1, 10}, {30, 30}};
  EXPECT_NEAR(SeedRateInterval(unequal).mean, 0.55, 1e-12);
  // Clipped to [0, 1]: 10%, 50%, 90% reach past both ends.
  const std::vector<SeedOutcomes> wide{{10, 100}, {50, 100}, {90, 100}};
  const MeanInterval w = SeedRateInterval(wide);
  EXPECT_EQ(w.low, 0.0);
  EXPECT_EQ(w.high, 1.0);
}

TEST(RateInterval, SeedsThatAgreeGiveABoundNotAPoint) {
  // The old two-level bootstrap printed 0/30 as [0, 0]. All n seeds at x:
  // the exact bound b = 0.025^(1/n) on the chance of a seed at (or above, or
  // below) x, so [x b, 1 - (1 - x) b]: 0.025^(1/3) = 0.2924018, 0.025^(1/5) = 0.4781762.
  const std::vector<SeedOutcomes> none{{0, 30}};
  const MeanInterval one = SeedRateInterval(none);
  EXPECT_TRUE(one.degenerate);
  EXPECT_EQ(one.low, 0.0);
  EXPECT_NEAR(one.high, 0.975, 1e-12);
  const std::vector<SeedOutcomes> zeros{{0, 30}, {0, 30}, {0, 30}};
  const MeanInterval z = SeedRateInterval(zeros);
  EXPECT_TRUE(z.degenerate);
  EXPECT_EQ(z.mean, 0.0);
  EXPECT_EQ(z.low, 0.0);
  EXPECT_NEAR(z.high, 1 - 0.2924018, 1e-7);
  const std::vector<SeedOutcomes> all{{30, 30}, {32, 32}, {8, 8}, {30, 30}, {1, 1}};
  const MeanInterval a = SeedRateInterval(all);
  EXPECT_TRUE(a.degenerate);
  EXPECT_NEAR(a.low, 0.4781762, 1e-7);
  EXPECT_EQ(a.high, 1.0);
  const std::vector<SeedOutcomes> half{{5, 10}, {16, 32}, {1, 2}};
  const MeanInterval h = SeedRateInterval(half);
  EXPECT_NEAR(h.low, 0.5 * 0.2924018, 1e-7);
  EXPECT_NEAR(h.high, 1 - 0.5 * 0.2924018, 1e-7);
}

TEST(RateInterval, McNemarIsTheExactSignTestOfTheDiscordantTrials) {
  // Under no difference each discordant trial is a fair coin:
  // 1 against 10: 2 (C(11, 0) + C(11, 1)) / 2^11 = 24 / 2048; 0 against 5: 2 / 32.
  EXPECT_NEAR(McNemarExactTest(1, 10).p_value, 24.0 / 2048.0, 1e-15);
  EXPECT_NEAR(McNemarExactTest(10, 1).p_value, 24.0 / 2048.0, 1e-15);
  EXPECT_NEAR(McNemarExactTest(0, 5).p_value, 2.0 / 32.0, 1e-15);
  // 3 against 12: 2 (1 + 15 + 105 + 455) / 2^15 = 1152 / 32768.
  EXPECT_NEAR(McNemarExactTest(3, 12).p_value, 1152.0 / 32768.0, 1e-15);
  EXPECT_EQ(McNemarExactTest(4, 4).p_value, 1.0);
  EXPECT_EQ(McNemarExactTest(0, 0).p_value, 1.0);
  const McNemarTest t = McNemarExactTest(2, 7);
  EXPECT_EQ(t.only_a, 2);
  EXPECT_EQ(t.only_b, 7);
  // Thousands of discordant trials neither underflow nor overflow: 2000 against 2000.
  EXPECT_EQ(McNemarExactTest(2000, 2000).p_value, 1.0);
  EXPECT_GT(McNemarExactTest(1900, 2100).p_value, 0.0);
  EXPECT_LT(McNemarExactTest(1900, 2100).p_value, 0.01);
}

TEST(RateInterval, BadInputNamesTheRule) {
  ExpectError([] { WilsonInterval(3, 0); }, {"trials = 0", ">= 1"});
  ExpectError([] { WilsonInterval(5, 4); }, {"successes = 5", "[0, trials = 4]"});
  ExpectError([] { SeedRateInterval({}); }, {"seeds", "at least one"});
  const std::vector<SeedOutcomes> bad{{1, 2}, {3, 2}};
  ExpectError([&] { SeedRateInterval(bad); }, {"seeds[1].successes = 3"});
  const std::vector<SeedOutcomes> empty{{0, 0}};
  ExpectError([&] { SeedRateInterval(empty); }, {"seeds[0].trials = 0", ">= 1"});
  ExpectError([] { McNemarExactTest(-1, 2); }, {"only_a = -1", ">= 0"});
}

}  // namespace
}  // namespace posenc
