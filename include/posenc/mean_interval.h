// 95% intervals of a mean over a few independent runs — models trained
// from different seeds — and of a paired difference between two variants
// measured on the same runs (the same seed, the same held-out bytes): what
// a table prints beside "2.075" so that a verdict can say whether two rows
// differ or are within noise.
//
//   mean ± t_{(1 + level) / 2, n - 1} · s / √n
//
// with s the sample standard deviation (n - 1 in the denominator) and t
// Student's quantile (Boost.Math). A paired difference is the interval of
// the per-run differences a[i] - b[i]: what two variants share (the seed's
// initialization and batches, the text's difficulty) cancels.
#pragma once

#include <cstdint>
#include <span>

namespace posenc {

struct MeanInterval {
  std::int64_t count = 0;
  double mean = 0.0;
  // The sample standard deviation; 0 for one value, whose interval is the
  // value itself (low = high = mean): nothing to estimate a spread from.
  double sd = 0.0;
  double low = 0.0, high = 0.0;

  bool HasSpread() const { return count >= 2; }
  // The interval holds 0: the data cannot tell the difference from none.
  bool ContainsZero() const { return low <= 0.0 && high >= 0.0; }
};

// Throws posenc::Error for no values, a value that is not finite, and a
// level outside (0, 1).
MeanInterval StudentMeanInterval(std::span<const double> values, double level = 0.95);
// The interval of a[i] - b[i]. Throws posenc::Error as above and for
// spans of different sizes.
MeanInterval PairedDifferenceInterval(std::span<const double> a, std::span<const double> b, double level = 0.95);

}  // namespace posenc
