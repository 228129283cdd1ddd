// 95% intervals of a success rate (an accuracy, a passkey's retrieval
// rate) and the exact test of two rates measured on the same trials: what
// a table prints beside "7/10" so that two rows can be told apart from
// noise. Which one applies is set by the unit of independence:
//
//   Wilson       one set of independent trials (Wilson 1927), each its own
//                draw (a passkey trial with its own filler, key and depth):
//                the score interval, which stays inside [0, 1] and is not
//                empty at 0 or n successes, unlike the normal approximation.
//   seeds        answers scored by models trained from different seeds: the
//                answers of one model are not independent of each other
//                (one model, one set of sequences), the seed is the unit.
//                Each seed's accuracy, then the bounded t interval over the
//                seeds (BoundedMeanInterval, mean_interval.h), which is
//                never the point [x, x] when the seeds agree.
//   McNemar      two methods on the same independent trials: the exact
//                (binomial) test on the discordant trials, those only one
//                method got right (McNemar 1947).
#pragma once

#include <cstdint>
#include <span>

#include "posenc/mean_interval.h"

namespace posenc {

struct RateInterval {
  double rate = 0.0;  // successes / trials
  double low = 0.0, high = 0.0;
};

// Throws posenc::Error unless 0 <= successes <= trials and trials >= 1.
RateInterval WilsonInterval(std::int64_t successes, std::int64_t trials);

struct SeedOutcomes {
  std::int64_t successes = 0, trials = 0;
};

// The mean of the seeds' accuracies with its interval over the seeds.
// Throws posenc::Error for no seeds, a seed without trials and more
// successes than trials.
MeanInterval SeedRateInterval(std::span<const SeedOutcomes> seeds, double level = 0.95);

struct McNemarTest {
  std::int64_t only_a = 0, only_b = 0;  // the discordant trials
  double p_value = 1.0;                 // two-sided; 1 with no discordant trial
};

// only_a: the trials of one trial set that method A got right and B wrong;
// only_b: the reverse (the trials both or neither got right tell nothing
// about the difference). Throws posenc::Error for a negative count.
McNemarTest McNemarExactTest(std::int64_t only_a, std::int64_t only_b);

}  // namespace posenc
