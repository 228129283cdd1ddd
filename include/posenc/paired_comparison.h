// Which of several variants is best, and which are within noise of it,
// by paired comparison over the units they share (the same seeds, the same
// windows): the verdict rule of docs/results/README.md ("Statistics").
// "A beats B" only where the paired interval of A - B excludes 0
// (MeanInterval::ExcludesZero); otherwise the two are within noise, and no
// order is drawn between them. Overlapping intervals of the two means are
// not the test: what the variants share (a seed's initialization, a text's
// difficulty) widens each mean's interval but cancels in the difference.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <vector>

#include "posenc/mean_interval.h"

namespace posenc {

// Each variant's value at each unit, the units in one order for all
// variants; nullopt where the variant did not run on that unit.
using UnitValues = std::vector<std::optional<double>>;

struct PairedComparisonOptions {
  bool higher_is_better = true;     // an accuracy; false for a loss
  std::optional<ValueRange> range;  // the values' known range, e.g. [0, 1] for an accuracy
  double level = 0.95;
};

struct VariantComparison {
  std::size_t variant = 0;
  // The best one's lead over the variant on the units both ran (best -
  // variant, or variant - best where lower is better: positive when the
  // best is ahead); nullopt when they share no unit.
  std::optional<MeanInterval> difference;
  // The best one does not beat it (the interval holds 0, or rests on a
  // degenerate point, or no unit is shared).
  bool within_noise = true;
};

struct BestWithinNoise {
  std::size_t best = 0;  // the variant with the best mean over its units
  double best_mean = 0.0;
  std::vector<VariantComparison> others;  // every other variant that ran anywhere, in order

  std::vector<std::size_t> WithinNoise() const;
};

// The variants that ran on no unit take no part. Throws posenc::Error when
// no variant ran anywhere, when variants hold different numbers of units,
// and as the intervals do (mean_interval.h).
BestWithinNoise FindBestWithinNoise(std::span<const UnitValues> variants, const PairedComparisonOptions& options);

}  // namespace posenc
