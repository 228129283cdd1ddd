// 95% intervals of a mean over a few independent units — models trained
// from different seeds, windows of distinct texts — and of a paired
// difference between two variants measured on the same units (the same
// seed, the same window): what a table prints beside "2.075" so that a
// verdict can say whether two rows differ or are within noise. The rule of
// docs/results/README.md ("Statistics"), in one place:
//
//   mean ± t_{(1 + level) / 2, n - 1} · s / √n
//
// with n the number of independent units (never the answers or bytes
// inside one), s the sample standard deviation (n - 1 in the denominator)
// and t Student's quantile (Boost.Math). A paired difference is the
// interval of the per-unit differences a[i] - b[i]: what two variants share
// (the seed's initialization and batches, the text's difficulty) cancels.
//
// When the units are all equal (or there is one), s is 0 and the t interval
// is the point itself: no estimate of the spread, not certainty. Such an
// interval is marked `degenerate`. For a quantity with known bounds (a rate
// in [0, 1], a difference of rates in [-1, 1]) BoundedMeanInterval replaces
// it by a distribution-free bound from the n equal units: with all n at x,
// the exact (Clopper-Pearson) bound on the chance that a unit lies at or
// above x is b = ((1 - level) / 2)^(1/n), so the mean is at least
// lo + (x - lo)·b, and likewise at most hi - (hi - x)·b. Three seeds all at
// 100% give [29.2%, 100%]; five give [47.8%, 100%].
#pragma once

#include <cstdint>
#include <span>

namespace posenc {

struct MeanInterval {
  std::int64_t count = 0;
  double mean = 0.0;
  // The sample standard deviation; 0 for one value or all equal.
  double sd = 0.0;
  double low = 0.0, high = 0.0;
  // The units were all equal, or one: nothing estimates their spread. A
  // bounded interval is then the distribution-free bound above; an
  // unbounded one is the point (low = high = mean), which tells nothing.
  bool degenerate = false;
  bool bounded = false;  // low and high lie in the quantity's known range

  bool HasSpread() const { return count >= 2; }
  // The interval holds 0: the data cannot tell the difference from none.
  bool ContainsZero() const { return low <= 0.0 && high >= 0.0; }
  // The interval tells the value from 0: it excludes 0 and rests on an
  // estimated spread or on a bound (never on a degenerate point). "A beats
  // B" is printed only where A - B's paired interval does this.
  bool ExcludesZero() const { return !ContainsZero() && (bounded || !degenerate); }
};

// The known range of a quantity: [0, 1] for a rate.
struct ValueRange {
  double low = 0.0, high = 0.0;
};

// Throws posenc::Error for no values, a value that is not finite, and a
// level outside (0, 1).
MeanInterval StudentMeanInterval(std::span<const double> values, double level = 0.95);
// The interval of a[i] - b[i]. Throws posenc::Error as above and for
// spans of different sizes.
MeanInterval PairedDifferenceInterval(std::span<const double> a, std::span<const double> b, double level = 0.95);

// The Student t interval clipped to `range`, and when the units are all
// equal the distribution-free bound above. Throws posenc::Error as above,
// for an empty range and for a value outside it.
MeanInterval BoundedMeanInterval(std::span<const double> values, ValueRange range, double level = 0.95);
// The interval of a[i] - b[i] for a and b in `range`: the differences lie
// in [range.low - range.high, range.high - range.low].
MeanInterval BoundedPairedDifferenceInterval(std::span<const double> a, std::span<const double> b, ValueRange range,
                                             double level = 0.95);

}  // namespace posenc
