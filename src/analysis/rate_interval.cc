// Intervals of a success rate (include/posenc/rate_interval.h).
#include "posenc/rate_interval.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "posenc/error.h"
#include "util/split_mix64.h"

namespace posenc {
namespace {

constexpr const char* kOp = "interval";
constexpr double kZ = 1.959963984540054;  // the normal's 97.5th percentile

void CheckOutcomes(std::int64_t successes, std::int64_t trials, const std::string& what) {
  Require(trials >= 1, kOp, what + "trials", trials, "must be >= 1");
  Require(successes >= 0 && successes <= trials, kOp, what + "successes", successes,
          "must be in [0, trials = " + std::to_string(trials) + "]");
}

// Uniform in [0, 1) from the top 53 bits of a word.
double Unit(std::uint64_t word) { return static_cast<double>(word >> 11) * 0x1.0p-53; }

}  // namespace

RateInterval WilsonInterval(std::int64_t successes, std::int64_t trials) {
  CheckOutcomes(successes, trials, "");
  const auto n = static_cast<double>(trials);
  const double p = static_cast<double>(successes) / n, z2 = kZ * kZ;
  const double centre = (p + z2 / (2 * n)) / (1 + z2 / n);
  const double half = kZ / (1 + z2 / n) * std::sqrt(p * (1 - p) / n + z2 / (4 * n * n));
  return {.rate = p, .low = std::max(0.0, centre - half), .high = std::min(1.0, centre + half)};
}

RateInterval SeedBootstrapInterval(std::span<const SeedOutcomes> seeds, std::int64_t resamples,
                                   std::uint64_t random_seed) {
  Require(!seeds.empty(), kOp, "seeds", Verbatim{"(none)"}, "must hold at least one seed's outcomes");
  Require(resamples >= 100, kOp, "resamples", resamples, "must be >= 100 (percentiles of fewer draws are noise)");
  std::int64_t successes = 0, trials = 0;
  for (std::size_t s = 0; s < seeds.size(); ++s) {
    CheckOutcomes(seeds[s].successes, seeds[s].trials, "seeds[" + std::to_string(s) + "].");
    successes += seeds[s].successes;
    trials += seeds[s].trials;
  }
  std::uint64_t counter = SplitMix64(random_seed);
  const auto next = [&] { return SplitMix64(counter++); };
  const auto count = static_cast<std::uint64_t>(seeds.size());
  std::vector<double> rates(static_cast<std::size_t>(resamples));
  for (double& rate : rates) {
    std::int64_t drawn_successes = 0, drawn_trials = 0;
    for (std::uint64_t i = 0; i < count; ++i) {
      const SeedOutcomes& s = seeds[next() % count];
      const double p = static_cast<double>(s.successes) / static_cast<double>(s.trials);
      for (std::int64_t t = 0; t < s.trials; ++t) drawn_successes += Unit(next()) < p ? 1 : 0;
      drawn_trials += s.trials;
    }
    rate = static_cast<double>(drawn_successes) / static_cast<double>(drawn_trials);
  }
  std::sort(rates.begin(), rates.end());
  // The nearest-rank percentiles.
  const auto at = [&](double q) {
    const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(resamples)));
    return rates[std::clamp<std::size_t>(rank, 1, rates.size()) - 1];
  };
  return {.rate = static_cast<double>(successes) / static_cast<double>(trials), .low = at(0.025), .high = at(0.975)};
}

}  // namespace posenc
