// Coverage by simulation: a 95% interval must hold the true mean in 93-97%
// of simulated experiments with 3 and with 5 units (issue 47, and the
// Statistics section of docs/results/README.md). 20,000 experiments a case
// from a fixed seed: the coverage's standard error is 0.15 points, so a
// correct interval sits at 95 +- 0.5 and the check does not flicker. The
// two-level percentile bootstrap the tasks report used before is kept
// here, transcribed, to show the check can fail: over 3 seeds it covers
// far less than 95%.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "posenc/mean_interval.h"
#include "posenc/rate_interval.h"

namespace posenc {
namespace {

constexpr int kExperiments = 20000;

// Draws made here from mt19937_64's words (fixed by the standard), not
// std:: distributions (whose algorithms differ between libraries).
class Draws {
 public:
  explicit Draws(std::uint64_t seed) : engine_(seed) {}
  double Uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  double Normal() {  // Box-Muller
    const double u = 1.0 - Uniform(), v = Uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * std::numbers::pi * v);
  }
  std::int64_t Binomial(std::int64_t n, double p) {
    std::int64_t k = 0;
    for (std::int64_t i = 0; i < n; ++i) k += Uniform() < p ? 1 : 0;
    return k;
  }

 private:
  std::mt19937_64 engine_;
};

struct Interval {
  double low, high;
};

// The share of experiments whose interval holds `truth`, printed.
double Coverage(const char* what, int units, double truth, Draws& draws,
                const std::function<Interval(int, Draws&)>& experiment, int experiments = kExperiments) {
  int covered = 0;
  for (int e = 0; e < experiments; ++e) {
    const Interval ci = experiment(units, draws);
    covered += ci.low <= truth && truth <= ci.high ? 1 : 0;
  }
  const double coverage = static_cast<double>(covered) / experiments;
  std::printf("coverage %-44s %d units: %.2f%%\n", what, units, 100 * coverage);
  return coverage;
}

void ExpectNominal(double coverage) {
  EXPECT_GE(coverage, 0.93);
  EXPECT_LE(coverage, 0.97);
}

// Seeds whose models differ (each its own true accuracy, uniform in
// mean +- spread) and each scored on `answers` answers: the tasks' data.
std::vector<SeedOutcomes> Seeds(int units, double mean, double spread, std::int64_t answers, Draws& draws) {
  std::vector<SeedOutcomes> seeds(static_cast<std::size_t>(units));
  for (SeedOutcomes& s : seeds) {
    const double p = mean + spread * (2 * draws.Uniform() - 1);
    s = {.successes = draws.Binomial(answers, p), .trials = answers};
  }
  return seeds;
}

// The tasks report's interval before issue 47 (rate_interval.cc at
// a13f3f4): resample the seeds, then each chosen seed's answers as a
// binomial at its observed rate; the 2.5th and 97.5th percentiles.
Interval TwoLevelBootstrap(const std::vector<SeedOutcomes>& seeds, int resamples, Draws& draws) {
  std::vector<double> rates(static_cast<std::size_t>(resamples));
  for (double& rate : rates) {
    std::int64_t successes = 0, trials = 0;
    for (std::size_t i = 0; i < seeds.size(); ++i) {
      const SeedOutcomes& s = seeds[static_cast<std::size_t>(draws.Uniform() * static_cast<double>(seeds.size()))];
      successes += draws.Binomial(s.trials, static_cast<double>(s.successes) / static_cast<double>(s.trials));
      trials += s.trials;
    }
    rate = static_cast<double>(successes) / static_cast<double>(trials);
  }
  std::sort(rates.begin(), rates.end());
  const auto at = [&](double q) {
    const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(resamples)));
    return rates[std::clamp<std::size_t>(rank, 1, rates.size()) - 1];
  };
  return {at(0.025), at(0.975)};
}

TEST(IntervalCoverage, StudentTOverNormalUnits) {
  Draws draws(47);
  for (const int units : {3, 5}) {
    ExpectNominal(Coverage("t, normal units (mean 2, sd 0.3)", units, 2.0, draws, [](int n, Draws& d) {
      std::vector<double> values(static_cast<std::size_t>(n));
      for (double& v : values) v = 2.0 + 0.3 * d.Normal();
      const MeanInterval m = StudentMeanInterval(values);
      return Interval{m.low, m.high};
    }));
  }
}

TEST(IntervalCoverage, PairedDifferenceOverUnits) {
  // Each unit moves both variants by a large shared amount (sd 1); B trails A by 0.1 plus noise.
  Draws draws(4747);
  for (const int units : {3, 5}) {
    ExpectNominal(Coverage("paired t, shared unit effect", units, 0.1, draws, [](int n, Draws& d) {
      std::vector<double> a(static_cast<std::size_t>(n)), b(a.size());
      for (std::size_t i = 0; i < a.size(); ++i) {
        const double unit = d.Normal();
        a[i] = unit + 0.1 + 0.05 * d.Normal();
        b[i] = unit + 0.05 * d.Normal();
      }
      const MeanInterval m = PairedDifferenceInterval(a, b);
      return Interval{m.low, m.high};
    }));
  }
}

TEST(IntervalCoverage, TasksRateOverSeeds) {
  // Seeds differ (true accuracy uniform in 50% +- 20%), 32 answers each; and seeds alike (all 50%).
  Draws draws(470047);
  for (const int units : {3, 5}) {
    for (const double spread : {0.2, 0.0}) {
      const std::string what =
          "seeds' rate, 50% +- " + std::to_string(static_cast<int>(100 * spread)) + "%, 32 answers";
      ExpectNominal(Coverage(what.c_str(), units, 0.5, draws, [&](int n, Draws& d) {
        const MeanInterval m = SeedRateInterval(Seeds(n, 0.5, spread, 32, d));
        return Interval{m.low, m.high};
      }));
    }
  }
}

TEST(IntervalCoverage, TasksRateNearTheEdgesIsNeverNarrow) {
  // Seeds near 100% (97% +- 3%) and near chance (3% +- 3%), 32 answers: at 3 seeds all often agree
  // (at 100% or 0%) and the bound of equal units makes the interval conservative; never below 93%.
  Draws draws(470000047);
  for (const int units : {3, 5}) {
    for (const double mean : {0.97, 0.03}) {
      const std::string what = "seeds' rate, " + std::to_string(static_cast<int>(100 * mean)) + "% +- 3%, 32 answers";
      EXPECT_GE(Coverage(what.c_str(), units, mean, draws,
                         [&](int n, Draws& d) {
                           const MeanInterval m = SeedRateInterval(Seeds(n, mean, 0.03, 32, d));
                           return Interval{m.low, m.high};
                         }),
                0.93);
    }
  }
}

TEST(IntervalCoverage, PairedRatesOverSeeds) {
  // Two variants on the same seeds: a seed's model quality (uniform in +-20%) moves both, B is 10
  // points below A, 32 answers each.
  Draws draws(4700047);
  for (const int units : {3, 5}) {
    ExpectNominal(Coverage("paired seeds' rates, A - B = 10%", units, 0.1, draws, [](int n, Draws& d) {
      std::vector<double> a(static_cast<std::size_t>(n)), b(a.size());
      for (std::size_t i = 0; i < a.size(); ++i) {
        const double seed = 0.2 * (2 * d.Uniform() - 1);
        a[i] = static_cast<double>(d.Binomial(32, 0.6 + seed)) / 32;
        b[i] = static_cast<double>(d.Binomial(32, 0.5 + seed)) / 32;
      }
      const MeanInterval m = BoundedPairedDifferenceInterval(a, b, {.low = 0, .high = 1});
      return Interval{m.low, m.high};
    }));
  }
}

TEST(IntervalCoverage, TheOldTwoLevelBootstrapFailsAtThreeSeeds) {
  // The seeds-differ case above, fewer experiments (each resamples 1000 times): its percentiles
  // over 3 seeds are about their min-max, which holds the mean in about 1 - 2 / 2^3 = 75% of them.
  Draws draws(47000047);
  const double coverage = Coverage(
      "old two-level bootstrap, 50% +- 20%", 3, 0.5, draws,
      [](int n, Draws& d) { return TwoLevelBootstrap(Seeds(n, 0.5, 0.2, 32, d), 1000, d); }, 2000);
  EXPECT_LT(coverage, 0.93);
}

}  // namespace
}  // namespace posenc
