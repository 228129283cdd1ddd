// Intervals of a mean and of a paired difference (mean_interval.h) against
// published values: Student's t table, and R's t.test on Student's own
// sleep data (Cushny & Peebles 1905; R's `sleep`, the example of
// ?t.test: t.test(extra[1:10], extra[11:20], paired = TRUE) gives mean
// difference -1.58, 95% interval [-2.4598858, -0.7001142]); the bound of
// equal units from Clopper-Pearson's n-of-n bound, computed by hand.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "posenc/error.h"
#include "posenc/mean_interval.h"
#include "test_util.h"

namespace posenc {
namespace {

using testing::ExpectError;

TEST(MeanInterval, PairedSleepDataMatchesRsTTest) {
  const std::vector<double> drug1{0.7, -1.6, -0.2, -1.2, -0.1, 3.4, 3.7, 0.8, 0.0, 2.0};
  const std::vector<double> drug2{1.9, 0.8, 1.1, 0.1, -0.1, 4.4, 5.5, 1.6, 4.6, 3.4};
  const MeanInterval d = PairedDifferenceInterval(drug1, drug2);
  EXPECT_EQ(d.count, 10);
  EXPECT_NEAR(d.mean, -1.58, 1e-12);
  EXPECT_NEAR(d.low, -2.4598858, 1e-7);
  EXPECT_NEAR(d.high, -0.7001142, 1e-7);
  EXPECT_FALSE(d.ContainsZero());
  // R: t = -4.0621 = mean / (sd / sqrt(10)).
  EXPECT_NEAR(d.mean / (d.sd / std::sqrt(10.0)), -4.0621, 1e-4);
  // Unpaired, each drug's interval holds 0 and they overlap: the pairing is what tells them apart.
  EXPECT_TRUE(StudentMeanInterval(drug1).ContainsZero());
  EXPECT_LT(StudentMeanInterval(drug2).low, StudentMeanInterval(drug1).high);
}

TEST(MeanInterval, HalfWidthIsStudentsTableQuantile) {
  // Two values 0 and 2: mean 1, sd sqrt(2), half width t * sqrt(2) / sqrt(2) = t(1 df).
  // t_{0.975}: 12.706 (1 df), 4.303 (2), 2.776 (4), 2.262 (9); t_{0.95}(4) = 2.132.
  EXPECT_NEAR(StudentMeanInterval(std::vector<double>{0.0, 2.0}).high - 1.0, 12.706, 5e-4);
  struct Case {
    int n;
    double level, t;
  };
  for (const Case c : {Case{3, 0.95, 4.303}, Case{5, 0.95, 2.776}, Case{10, 0.95, 2.262}, Case{5, 0.90, 2.132}}) {
    std::vector<double> values(static_cast<std::size_t>(c.n), 0.0);
    values[0] = 1.0;  // mean 1/n; squares (1 - 1/n)^2 + (n - 1)/n^2 = (n - 1)/n, so sd = sqrt(1/n)
    const MeanInterval m = StudentMeanInterval(values, c.level);
    EXPECT_NEAR((m.high - m.mean) / (m.sd / std::sqrt(static_cast<double>(c.n))), c.t, 5e-4) << c.n;
    EXPECT_NEAR(m.sd, std::sqrt(1.0 / c.n), 1e-12) << c.n;
  }
}

TEST(MeanInterval, OneValueIsItsOwnInterval) {
  const MeanInterval m = StudentMeanInterval(std::vector<double>{2.5});
  EXPECT_EQ(m.count, 1);
  EXPECT_FALSE(m.HasSpread());
  EXPECT_EQ(m.low, 2.5);
  EXPECT_EQ(m.high, 2.5);
  EXPECT_EQ(m.sd, 0.0);
  // A point without a spread, not certainty: no verdict rests on it.
  EXPECT_TRUE(m.degenerate);
  EXPECT_FALSE(m.ExcludesZero());
  EXPECT_TRUE(PairedDifferenceInterval(std::vector<double>{1.0}, std::vector<double>{1.0}).ContainsZero());
}

TEST(MeanInterval, EqualUnitsAreDegenerate) {
  const MeanInterval m = StudentMeanInterval(std::vector<double>{0.3, 0.3, 0.3});
  EXPECT_TRUE(m.degenerate);
  EXPECT_EQ(m.low, 0.3);
  EXPECT_FALSE(m.ExcludesZero());  // unbounded: the point [0.3, 0.3] is no evidence
  EXPECT_FALSE(StudentMeanInterval(std::vector<double>{0.3, 0.3, 0.31}).degenerate);
  EXPECT_TRUE(StudentMeanInterval(std::vector<double>{0.3, 0.3, 0.31}).ExcludesZero());
}

TEST(MeanInterval, BoundedIsClippedAndBoundsEqualUnits) {
  // Within the range, the t interval itself: 0.4, 0.5, 0.6 in [0, 1].
  const std::vector<double> spread{0.4, 0.5, 0.6};
  const MeanInterval t = StudentMeanInterval(spread), b = BoundedMeanInterval(spread, {.low = 0, .high = 1});
  EXPECT_EQ(b.low, t.low);
  EXPECT_EQ(b.high, t.high);
  EXPECT_TRUE(b.bounded);
  // Clipped: 0.0, 0.0, 0.3 (mean 0.1, t reaches below 0).
  EXPECT_EQ(BoundedMeanInterval(std::vector<double>{0.0, 0.0, 0.3}, {.low = 0, .high = 1}).low, 0.0);
  // Three equal units at 2 in [-1, 5]: the exact bound b = 0.025^(1/3) = 0.2924018 on the chance of a
  // unit at or above 2, so the mean is at least -1 + 3 b and at most 5 - 3 b.
  const MeanInterval e = BoundedMeanInterval(std::vector<double>{2.0, 2.0, 2.0}, {.low = -1, .high = 5});
  EXPECT_TRUE(e.degenerate);
  EXPECT_NEAR(e.low, -1 + 3 * 0.2924018, 1e-7);
  EXPECT_NEAR(e.high, 5 - 3 * 0.2924018, 1e-7);
  EXPECT_TRUE(e.ContainsZero());
  // At 90% the bound is 0.05^(1/3) = 0.3684031.
  EXPECT_NEAR(BoundedMeanInterval(std::vector<double>{1.0, 1.0, 1.0}, {.low = 0, .high = 1}, 0.90).low, 0.3684031,
              1e-7);
  // Paired: differences of values in [0, 1] lie in [-1, 1]; five seeds all +1 exclude 0
  // (-1 + 2 * 0.025^(1/5) = -1 + 2 * 0.4781762 < 0 does not: five is too few).
  const std::vector<double> ones(5, 1.0), zeros(5, 0.0);
  const MeanInterval d = BoundedPairedDifferenceInterval(ones, zeros, {.low = 0, .high = 1});
  EXPECT_NEAR(d.low, -1 + 2 * 0.4781762, 1e-7);
  EXPECT_FALSE(d.ExcludesZero());
  const std::vector<double> ones6(6, 1.0), zeros6(6, 0.0);  // 0.025^(1/6) = 0.5407419
  const MeanInterval d6 = BoundedPairedDifferenceInterval(ones6, zeros6, {.low = 0, .high = 1});
  EXPECT_NEAR(d6.low, -1 + 2 * 0.5407419, 1e-7);
  EXPECT_TRUE(d6.ExcludesZero());
}

TEST(MeanInterval, BadInputNamesTheParameter) {
  ExpectError([] { StudentMeanInterval(std::vector<double>{}); }, {"values", "at least one value"});
  ExpectError([] { StudentMeanInterval(std::vector<double>{1.0, std::nan("")}); }, {"values[1]", "finite"});
  ExpectError([] { StudentMeanInterval(std::vector<double>{1.0, 2.0}, 1.0); }, {"level", "(0, 1)"});
  ExpectError(
      [] {
        PairedDifferenceInterval(std::vector<double>{1.0, 2.0}, std::vector<double>{1.0});
      },
      {"b", "paired"});
  ExpectError([] { BoundedMeanInterval(std::vector<double>{0.5}, {.low = 1, .high = 1}); }, {"range.high", "above"});
  ExpectError(
      [] {
        BoundedMeanInterval(std::vector<double>{0.5, 1.5}, {.low = 0, .high = 1});
      },
      {"values[1] = 1.5", "must be in [0"});
}

}  // namespace
}  // namespace posenc
