// Intervals of a mean and of a paired difference (include/posenc/mean_interval.h).
#include "posenc/mean_interval.h"

#include <algorithm>
#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "posenc/error.h"

namespace posenc {
namespace {

constexpr const char* kOp = "interval";

std::vector<double> Differences(std::span<const double> a, std::span<const double> b) {
  Require(a.size() == b.size(), kOp, "b", static_cast<std::int64_t>(b.size()),
          "must hold as many values as a (" + std::to_string(a.size()) + "): the differences are paired");
  std::vector<double> differences(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) differences[i] = a[i] - b[i];
  return differences;
}

}  // namespace

MeanInterval StudentMeanInterval(std::span<const double> values, double level) {
  Require(!values.empty(), kOp, "values", Verbatim{"(none)"}, "must hold at least one value");
  Require(level > 0.0 && level < 1.0, kOp, "level", level, "must be in (0, 1) (0.95: a 95% interval)");
  double sum = 0.0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    Require(std::isfinite(values[i]), kOp, "values[" + std::to_string(i) + "]", values[i], "must be finite");
    sum += values[i];
  }
  const auto n = static_cast<double>(values.size());
  MeanInterval out{.count = static_cast<std::int64_t>(values.size()), .mean = sum / n};
  out.low = out.high = out.mean;
  out.degenerate = std::all_of(values.begin(), values.end(), [&](double v) { return v == values[0]; });
  if (out.degenerate) return out;
  double squares = 0.0;
  for (const double v : values) squares += (v - out.mean) * (v - out.mean);
  out.sd = std::sqrt(squares / (n - 1.0));
  const boost::math::students_t t(n - 1.0);
  const double half = boost::math::quantile(boost::math::complement(t, (1.0 - level) / 2.0)) * out.sd / std::sqrt(n);
  out.low = out.mean - half;
  out.high = out.mean + half;
  return out;
}

MeanInterval PairedDifferenceInterval(std::span<const double> a, std::span<const double> b, double level) {
  return StudentMeanInterval(Differences(a, b), level);
}

MeanInterval BoundedMeanInterval(std::span<const double> values, ValueRange range, double level) {
  Require(range.low < range.high, kOp, "range.high", range.high,
          "must be above range.low = " + std::to_string(range.low));
  MeanInterval out = StudentMeanInterval(values, level);
  for (std::size_t i = 0; i < values.size(); ++i) {
    Require(values[i] >= range.low && values[i] <= range.high, kOp, "values[" + std::to_string(i) + "]", values[i],
            "must be in [" + std::to_string(range.low) + ", " + std::to_string(range.high) + "]");
  }
  out.bounded = true;
  if (!out.degenerate) {
    out.low = std::max(out.low, range.low);
    out.high = std::min(out.high, range.high);
    return out;
  }
  // All n units at x: the exact bound on the chance of a unit at or above
  // (at or below) x, which bounds the mean (mean_interval.h).
  const double b = std::pow((1.0 - level) / 2.0, 1.0 / static_cast<double>(out.count));
  out.low = range.low + (out.mean - range.low) * b;
  out.high = range.high - (range.high - out.mean) * b;
  return out;
}

MeanInterval BoundedPairedDifferenceInterval(std::span<const double> a, std::span<const double> b, ValueRange range,
                                             double level) {
  const double width = range.high - range.low;
  return BoundedMeanInterval(Differences(a, b), {.low = -width, .high = width}, level);
}

}  // namespace posenc
