// The best variant and those within noise of it (paired_comparison.h): the
// paired difference decides, not the overlap of the two means' intervals.
// Expected values by hand with t(0.975, 2) = 4.302653 from the table.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "posenc/error.h"
#include "posenc/paired_comparison.h"
#include "test_util.h"

namespace posenc {
namespace {

using testing::ExpectError;

TEST(PairedComparison, PairingTellsApartWhatOverlappingMeansDoNot) {
  // Three seeds; the seed moves both variants (0.5, 0.7, 0.9), B trails A by 2-3 points in each.
  const std::vector<UnitValues> variants{
      {0.50, 0.70, 0.90},  // A
      {0.48, 0.68, 0.87},  // B: A - B = 0.02, 0.02, 0.03
      {0.52, 0.66, 0.91},  // C: A - C = -0.02, 0.04, -0.01
  };
  const BestWithinNoise r = FindBestWithinNoise(variants, {.range = ValueRange{0, 1}});
  EXPECT_EQ(r.best, 0u);
  EXPECT_NEAR(r.best_mean, 0.7, 1e-12);
  ASSERT_EQ(r.others.size(), 2u);
  // A - B: mean 0.07 / 3, sd 0.01 / sqrt(3) = 0.0057735, half width 4.302653 * 0.0057735 / sqrt(3).
  const MeanInterval& ab = *r.others[0].difference;
  EXPECT_NEAR(ab.mean, 0.07 / 3, 1e-12);
  EXPECT_NEAR(ab.high - ab.mean, 4.302653 * 0.0057735027 / std::sqrt(3.0), 1e-6);
  EXPECT_GT(ab.low, 0.0);
  EXPECT_FALSE(r.others[0].within_noise);
  EXPECT_TRUE(r.others[1].within_noise);
  EXPECT_EQ(r.WithinNoise(), std::vector<std::size_t>{2});
  // Yet A's and B's own intervals over the seeds overlap almost entirely.
  const MeanInterval a = StudentMeanInterval(std::vector<double>{0.50, 0.70, 0.90});
  const MeanInterval b = StudentMeanInterval(std::vector<double>{0.48, 0.68, 0.87});
  EXPECT_LT(a.low, b.high);
}

TEST(PairedComparison, LowerIsBetterAndMissingUnits) {
  // Losses; D did not run at all, E ran on one seed only.
  const std::vector<UnitValues> variants{
      {2.10, 2.00, 2.20},
      {2.00, 1.95, 2.05},
      {std::nullopt, std::nullopt, std::nullopt},
      {std::nullopt, 1.90, std::nullopt},
  };
  const BestWithinNoise r = FindBestWithinNoise(variants, {.higher_is_better = false});
  EXPECT_EQ(r.best, 3u);           // its one value is the lowest mean
  ASSERT_EQ(r.others.size(), 2u);  // D takes no part
  EXPECT_EQ(r.others[0].variant, 0u);
  // One shared unit: a point, no spread, so no verdict.
  EXPECT_EQ(r.others[0].difference->count, 1);
  EXPECT_NEAR(r.others[0].difference->mean, 0.10, 1e-12);  // positive: the best is ahead
  EXPECT_TRUE(r.others[0].within_noise);
  EXPECT_TRUE(r.others[1].within_noise);
}

TEST(PairedComparison, EqualSeedsAreNoEvidenceOfAnOrder) {
  // Two variants at 100% in all three seeds, one at 0% in all three: the differences are all 0 and
  // all 1. Neither is a zero-width verdict: three equal units bound a difference in [-1, 1] only to
  // [-1 + 2 * 0.2924018, 1].
  const std::vector<UnitValues> variants{{1.0, 1.0, 1.0}, {1.0, 1.0, 1.0}, {0.0, 0.0, 0.0}};
  const BestWithinNoise r = FindBestWithinNoise(variants, {.range = ValueRange{0, 1}});
  EXPECT_EQ(r.best, 0u);
  EXPECT_TRUE(r.others[0].within_noise);
  EXPECT_TRUE(r.others[1].within_noise);
  EXPECT_NEAR(r.others[1].difference->low, -1 + 2 * 0.2924018, 1e-7);
  // With six seeds the bound excludes 0.
  const std::vector<UnitValues> six{{1.0, 1.0, 1.0, 1.0, 1.0, 1.0}, {0.0, 0.0, 0.0, 0.0, 0.0, 0.0}};
  EXPECT_FALSE(FindBestWithinNoise(six, {.range = ValueRange{0, 1}}).others[0].within_noise);
}

TEST(PairedComparison, BadInputNamesTheRule) {
  ExpectError([] { FindBestWithinNoise({}, {}); }, {"variants", "at least one"});
  const std::vector<UnitValues> none{{std::nullopt}};
  ExpectError([&] { FindBestWithinNoise(none, {}); }, {"variants", "at least one"});
  const std::vector<UnitValues> ragged{{1.0, 2.0}, {1.0}};
  ExpectError([&] { FindBestWithinNoise(ragged, {}); }, {"variants[1].size() = 1", "paired"});
}

}  // namespace
}  // namespace posenc
