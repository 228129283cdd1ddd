// Randomized positions (Ruoss et al. 2023, include/posenc/tiny_lm.h): an
// ordered random subset of [0, range), drawn by Floyd's algorithm (each
// subset of `length` positions equally likely, `length` draws whatever the
// range).
#include <algorithm>
#include <set>

#include "posenc/error.h"
#include "posenc/tiny_lm.h"
#include "train/tiny_lm_internal.h"
#include "util/split_mix64.h"

namespace posenc {

std::vector<std::int64_t> RandomizedPositions(std::int64_t range, std::int64_t length, std::uint64_t seed) {
  tiny_lm::RequireInRange(range, 1, tiny_lm::kMaxLength, "position_range", "");
  tiny_lm::RequireInRange(length, 1, range, "length", " (distinct positions from [0, position_range))");
  // Floyd: for j = range - length .. range - 1, draw t uniform in [0, j];
  // take t, or j when t is taken already.
  std::set<std::int64_t> chosen;
  std::uint64_t counter = 0;
  for (std::int64_t j = range - length; j < range; ++j) {
    // Uniform in [0, j] up to (j + 1) / 2^64.
    const auto t = static_cast<std::int64_t>(SplitMix64(seed + counter++) % static_cast<std::uint64_t>(j + 1));
    chosen.insert(chosen.contains(t) ? j : t);
  }
  return {chosen.begin(), chosen.end()};
}

namespace tiny_lm {

std::vector<std::int64_t> EvaluationPositions(const TinyLmConfig& config, std::int64_t length, std::int64_t first) {
  if (config.position_range == 0) return {};
  Require(length <= config.position_range, kOp, "length", length,
          "must be <= position_range = " + std::to_string(config.position_range) +
              " (a model trained at randomized positions runs at an ordered subset of [0, position_range))");
  constexpr std::uint64_t kEvaluationSalt = 0x6576616c75617465ULL;  // "evaluate"
  return RandomizedPositions(
      config.position_range, length,
      SplitMix64(SplitMix64(kEvaluationSalt + static_cast<std::uint64_t>(length)) + static_cast<std::uint64_t>(first)));
}

}  // namespace tiny_lm

}  // namespace posenc
