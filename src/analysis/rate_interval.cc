// Intervals and the paired test of success rates (include/posenc/rate_interval.h).
#include "posenc/rate_interval.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "posenc/error.h"

namespace posenc {
namespace {

constexpr const char* kOp = "interval";
constexpr double kZ = 1.959963984540054;  // the normal's 97.5th percentile

void CheckOutcomes(std::int64_t successes, std::int64_t trials, const std::string& what) {
  Require(trials >= 1, kOp, what + "trials", trials, "must be >= 1");
  Require(successes >= 0 && successes <= trials, kOp, what + "successes", successes,
          "must be in [0, trials = " + std::to_string(trials) + "]");
}

}  // namespace

RateInterval WilsonInterval(std::int64_t successes, std::int64_t trials) {
  CheckOutcomes(successes, trials, "");
  const auto n = static_cast<double>(trials);
  const double p = static_cast<double>(successes) / n, z2 = kZ * kZ;
  const double centre = (p + z2 / (2 * n)) / (1 + z2 / n);
  const double half = kZ / (1 + z2 / n) * std::sqrt(p * (1 - p) / n + z2 / (4 * n * n));
  return {.rate = p, .low = std::max(0.0, centre - half), .high = std::min(1.0, centre + half)};
}

MeanInterval SeedRateInterval(std::span<const SeedOutcomes> seeds, double level) {
  Require(!seeds.empty(), kOp, "seeds", Verbatim{"(none)"}, "must hold at least one seed's outcomes");
  std::vector<double> rates(seeds.size());
  for (std::size_t s = 0; s < seeds.size(); ++s) {
    CheckOutcomes(seeds[s].successes, seeds[s].trials, "seeds[" + std::to_string(s) + "].");
    rates[s] = static_cast<double>(seeds[s].successes) / static_cast<double>(seeds[s].trials);
  }
  return BoundedMeanInterval(rates, {.low = 0.0, .high = 1.0}, level);
}

McNemarTest McNemarExactTest(std::int64_t only_a, std::int64_t only_b) {
  Require(only_a >= 0, kOp, "only_a", only_a, "must be >= 0 (a count of trials)");
  Require(only_b >= 0, kOp, "only_b", only_b, "must be >= 0 (a count of trials)");
  McNemarTest out{.only_a = only_a, .only_b = only_b};
  // Under no difference each discordant trial is a fair coin: twice the
  // binomial tail of the rarer side, Pr[X <= k] for X ~ B(n, 1/2).
  const std::int64_t n = out.only_a + out.only_b, k = std::min(out.only_a, out.only_b);
  const auto log_choose = [&](std::int64_t i) {
    return std::lgamma(static_cast<double>(n + 1)) - std::lgamma(static_cast<double>(i + 1)) -
           std::lgamma(static_cast<double>(n - i + 1));
  };
  double tail = 0.0;
  for (std::int64_t i = 0; i <= k; ++i) tail += std::exp(log_choose(i) - static_cast<double>(n) * std::log(2.0));
  out.p_value = std::min(1.0, 2.0 * tail);
  return out;
}

}  // namespace posenc
