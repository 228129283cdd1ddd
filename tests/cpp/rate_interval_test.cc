// Intervals of a success rate (rate_interval.h): Wilson's against the values
// Newcombe (1998, Statistics in Medicine 17: 857-872, Table I) publishes,
// the bootstrap against what its two levels must show.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

TEST(RateInterval, BootstrapOfOneSeedIsTheAnswersSpread) {
  const std::vector<SeedOutcomes> one{{.successes = 50, .trials = 100}};
  const RateInterval ci = SeedBootstrapInterval(one, 4000, 1);
  EXPECT_DOUBLE_EQ(ci.rate, 0.5);
  // The normal approximation: 0.5 +- 1.96 * 0.05.
  EXPECT_NEAR(ci.low, 0.402, 0.02);
  EXPECT_NEAR(ci.high, 0.598, 0.02);
  const std::vector<SeedOutcomes> none{{.successes = 0, .trials = 30}};
  const RateInterval zero = SeedBootstrapInterval(none);
  EXPECT_EQ(zero.low, 0.0);
  EXPECT_EQ(zero.high, 0.0);
}

TEST(RateInterval, SeedsThatDisagreeWidenTheInterval) {
  // The same pooled rate 0.5: three seeds that agree, three that do not.
  const std::vector<SeedOutcomes> agree{{50, 100}, {50, 100}, {50, 100}};
  const std::vector<SeedOutcomes> disagree{{10, 100}, {50, 100}, {90, 100}};
  const RateInterval a = SeedBootstrapInterval(agree), d = SeedBootstrapInterval(disagree);
  EXPECT_DOUBLE_EQ(a.rate, 0.5);
  EXPECT_DOUBLE_EQ(d.rate, 0.5);
  EXPECT_LT(a.high - a.low, 0.15);
  EXPECT_GT(d.high - d.low, 0.4);
  EXPECT_LE(d.low, 0.25);
  EXPECT_GE(d.high, 0.75);
  // A pure function of its inputs.
  EXPECT_EQ(SeedBootstrapInterval(disagree).low, d.low);
}

TEST(RateInterval, BadInputNamesTheRule) {
  ExpectError([] { WilsonInterval(3, 0); }, {"trials = 0", ">= 1"});
  ExpectError([] { WilsonInterval(5, 4); }, {"successes = 5", "[0, trials = 4]"});
  ExpectError([] { SeedBootstrapInterval({}); }, {"seeds", "at least one"});
  const std::vector<SeedOutcomes> bad{{1, 2}, {3, 2}};
  ExpectError([&] { SeedBootstrapInterval(bad); }, {"seeds[1].successes = 3"});
  const std::vector<SeedOutcomes> ok{{1, 2}};
  ExpectError([&] { SeedBootstrapInterval(ok, 10); }, {"resamples = 10", ">= 100"});
}

}  // namespace
}  // namespace posenc
