// 95% intervals of a success rate (an accuracy, a passkey's retrieval
// rate): what a table prints beside "7/10" so that two rows can be told
// apart from noise.
//
//   Wilson       one set of independent trials (Wilson 1927): the score
//                interval, which stays inside [0, 1] and is not empty at
//                0 or n successes, unlike the normal approximation.
//   two-level    trials grouped by seed (models trained from different
//   bootstrap    seeds, each scored on the same answers): resample the seeds
//                with replacement, then each chosen seed's trials with
//                replacement (a binomial draw at its own rate), and take
//                the 2.5th and 97.5th percentiles of the pooled rate. It
//                counts both the spread between models and the finite
//                number of answers; with one seed it is the answers' alone.
#pragma once

#include <cstdint>
#include <span>

namespace posenc {

struct RateInterval {
  double rate = 0.0;  // successes / trials, pooled
  double low = 0.0, high = 0.0;
};

// Throws posenc::Error unless 0 <= successes <= trials and trials >= 1.
RateInterval WilsonInterval(std::int64_t successes, std::int64_t trials);

struct SeedOutcomes {
  std::int64_t successes = 0, trials = 0;
};

// `resamples` draws from `random_seed` (the same interval on every
// machine). Throws posenc::Error for no seeds, a seed without trials, more
// successes than trials, and resamples < 100.
RateInterval SeedBootstrapInterval(std::span<const SeedOutcomes> seeds, std::int64_t resamples = 2000,
                                   std::uint64_t random_seed = 0);

}  // namespace posenc
