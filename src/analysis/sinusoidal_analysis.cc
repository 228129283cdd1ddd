// Sinusoidal analyses: the shift map T(Delta) built from the frequencies and
// checked against the table, and the position dot-product matrix.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "posenc/analysis.h"
#include "posenc/error.h"

namespace posenc {

std::vector<double> SinusoidalShiftMatrix(const SinusoidalSpec& spec, double delta) {
  spec.Validate();
  Require(std::isfinite(delta), "sinusoidal_shift", "delta", delta, "must be finite");
  const std::vector<double> w = SinusoidalInvFreq(spec);
  const auto d = static_cast<std::size_t>(spec.dim);
  std::vector<double> t(d * d, 0.0);
  // sin((k+D)w) =  cos(Dw) sin(kw) + sin(Dw) cos(kw)
  // cos((k+D)w) = -sin(Dw) sin(kw) + cos(Dw) cos(kw)
  for (std::int64_t j = 0; j < spec.Pairs(); ++j) {
    const double angle = std::fmod(delta * w[static_cast<std::size_t>(j)], 2.0 * std::numbers::pi);
    const double c = std::cos(angle), s = std::sin(angle);
    const auto si = static_cast<std::size_t>(spec.SinIndex(j));
    const auto ci = static_cast<std::size_t>(spec.CosIndex(j));
    t[si * d + si] = c;
    t[si * d + ci] = s;
    t[ci * d + si] = -s;
    t[ci * d + ci] = c;
  }
  return t;
}

SinusoidalLinearMap ComputeSinusoidalLinearMap(const SinusoidalSpec& spec, std::int64_t positions,
                                               std::int64_t max_shift) {
  constexpr const char* kOp = "sinusoidal_linear_map";
  spec.Validate();
  Require(positions > 0, kOp, "positions", positions, "must be > 0");
  Require(positions <= 65536, kOp, "positions", positions, "must be <= 65536");
  Require(max_shift >= 0, kOp, "max_shift", max_shift, "must be >= 0");
  Require(max_shift <= 4096, kOp, "max_shift", max_shift, "must be <= 4096");
  const auto d = static_cast<std::size_t>(spec.dim);
  // Rows for positions -max_shift .. positions-1+max_shift: p_{k+Delta} for every k, Delta.
  const std::int64_t first = -max_shift;
  const std::vector<double> table = SinusoidalTable(spec, first, positions + 2 * max_shift);
  auto at = [&](std::int64_t p) { return table.data() + static_cast<std::size_t>(p - first) * d; };

  SinusoidalLinearMap out;
  out.positions = positions;
  out.max_shift = max_shift;
  std::vector<double> shifted(d);
  for (std::int64_t delta = -max_shift; delta <= max_shift; ++delta) {
    const std::vector<double> t = SinusoidalShiftMatrix(spec, static_cast<double>(delta));
    double err = 0.0;
    for (std::int64_t k = 0; k < positions; ++k) {
      const double* p = at(k);
      const double* target = at(k + delta);
      for (std::size_t r = 0; r < d; ++r) {
        double s = 0.0;
        for (std::size_t c = 0; c < d; ++c) s += t[r * d + c] * p[c];
        err = std::max(err, std::abs(s - target[r]));
      }
    }
    out.error_by_shift.push_back(err);
    out.max_error = std::max(out.max_error, err);
  }
  return out;
}

std::vector<double> SinusoidalDotMatrix(const SinusoidalSpec& spec, std::int64_t positions) {
  constexpr const char* kOp = "sinusoidal_dots";
  spec.Validate();
  Require(positions > 0, kOp, "positions", positions, "must be > 0");
  Require(positions <= 8192, kOp, "positions", positions, "must be <= 8192");
  const auto n = static_cast<std::size_t>(positions);
  const auto d = static_cast<std::size_t>(spec.dim);
  const std::vector<double> table = SinusoidalTable(spec, 0, positions);
  std::vector<double> out(n * n);
  for (std::size_t m = 0; m < n; ++m) {
    for (std::size_t j = 0; j < n; ++j) {
      double s = 0.0;
      for (std::size_t c = 0; c < d; ++c) s += table[m * d + c] * table[j * d + c];
      out[m * n + j] = s;
    }
  }
  return out;
}

}  // namespace posenc
