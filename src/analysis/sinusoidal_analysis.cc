// Sinusoidal analyses: the shift map T(Delta) built from the frequencies and
// checked against the table and solved back from it by least squares, the
// position dot-product matrix, and the binary counter they generalize.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>
#include <utility>
#include <vector>

#include "posenc/analysis.h"
#include "posenc/error.h"

namespace posenc {
namespace {

// Per pair, the least-squares 2x2 block B with B (sin kw, cos kw) ~=
// (sin (k+D)w, cos (k+D)w) over k = first .. first+count-1, by a QR
// factorization of the [count, 2] matrix of rows (modified Gram-Schmidt,
// orthogonalized twice: slow pairs make the two columns nearly parallel over
// a short window). row(i) is the encoding of position first + i and
// shifted(i) that of first + i + D, for i < count.
template <class Row, class Shifted>
std::vector<double> SolveShift(const SinusoidalSpec& spec, Row row, Shifted shifted, std::int64_t count) {
  const auto d = static_cast<std::size_t>(spec.dim);
  const auto n = static_cast<std::size_t>(count);
  std::vector<double> t(d * d, 0.0);
  std::vector<double> q1(n), q2(n);
  auto dot = [n](const std::vector<double>& a, const std::vector<double>& b) {
    double s = 0.0;
    for (std::size_t i = 0; i < n; ++i) s += a[i] * b[i];
    return s;
  };
  for (std::int64_t j = 0; j < spec.Pairs(); ++j) {
    const auto si = static_cast<std::size_t>(spec.SinIndex(j));
    const auto ci = static_cast<std::size_t>(spec.CosIndex(j));
    std::vector<double> a_sin(n), a_cos(n), t_sin(n), t_cos(n);
    for (std::size_t i = 0; i < n; ++i) {
      const double* p = row(static_cast<std::int64_t>(i));
      const double* target = shifted(static_cast<std::int64_t>(i));
      a_sin[i] = p[si];
      a_cos[i] = p[ci];
      t_sin[i] = target[si];
      t_cos[i] = target[ci];
    }
    // Columns: cos first (never small), then sin.
    const double r11 = std::sqrt(dot(a_cos, a_cos));
    for (std::size_t i = 0; i < n; ++i) q1[i] = a_cos[i] / r11;
    q2 = a_sin;
    double r12 = 0.0;
    for (int pass = 0; pass < 2; ++pass) {
      const double c = dot(q1, q2);
      for (std::size_t i = 0; i < n; ++i) q2[i] -= c * q1[i];
      r12 += c;
    }
    const double r22 = std::sqrt(dot(q2, q2));
    Require(r22 > 0.0, "sinusoidal_shift", "count", count,
            "leaves pair " + std::to_string(j) + " rank-deficient; use more positions");
    for (std::size_t i = 0; i < n; ++i) q2[i] /= r22;
    // Row r of the block: coefficients (on cos, on sin) that give target r.
    auto solve = [&](const std::vector<double>& target, double& on_cos, double& on_sin) {
      const double b1 = dot(q1, target), b2 = dot(q2, target);
      on_sin = b2 / r22;
      on_cos = (b1 - r12 * on_sin) / r11;
    };
    solve(t_sin, t[si * d + ci], t[si * d + si]);
    solve(t_cos, t[ci * d + ci], t[ci * d + si]);
  }
  return t;
}

double MaxAbsDifference(const std::vector<double>& a, const std::vector<double>& b) {
  double m = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

}  // namespace

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

std::vector<double> SolveSinusoidalShiftMatrix(const SinusoidalSpec& spec, double delta, std::int64_t first,
                                               std::int64_t count) {
  constexpr const char* kOp = "sinusoidal_shift";
  spec.Validate();
  Require(std::isfinite(delta) && std::abs(delta) <= 1e9, kOp, "delta", delta, "must be finite, |delta| <= 1e9");
  Require(std::abs(first) <= (std::int64_t{1} << 40), kOp, "first", first, "must be within 2^40 of 0");
  Require(count >= 2 && count <= 65536, kOp, "count", count, "must be in [2, 65536]");
  // Rows first + i, then first + i + delta: one table of real positions.
  std::vector<double> positions;
  for (std::int64_t i = 0; i < count; ++i) positions.push_back(static_cast<double>(first + i));
  for (std::int64_t i = 0; i < count; ++i) positions.push_back(static_cast<double>(first + i) + delta);
  const std::vector<double> table = SinusoidalTable(spec, positions);
  const auto d = static_cast<std::size_t>(spec.dim);
  return SolveShift(
      spec, [&](std::int64_t i) { return table.data() + static_cast<std::size_t>(i) * d; },
      [&](std::int64_t i) { return table.data() + static_cast<std::size_t>(count + i) * d; }, count);
}

SinusoidalLinearMap ComputeSinusoidalLinearMap(const SinusoidalSpec& spec, std::int64_t positions,
                                               std::int64_t max_shift) {
  constexpr const char* kOp = "sinusoidal_linear_map";
  spec.Validate();
  Require(positions >= 4, kOp, "positions", positions,
          "must be >= 4 (two halves of at least two positions to solve T from)");
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
  const std::int64_t half = positions / 2;
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
    // T solved from each half of the positions, against the constructed T.
    double deviation = 0.0;
    for (const auto& [begin, count] : {std::pair{std::int64_t{0}, half}, std::pair{half, positions - half}}) {
      const std::vector<double> solved = SolveShift(
          spec, [&, begin = begin](std::int64_t i) { return at(begin + i); },
          [&, begin = begin](std::int64_t i) { return at(begin + i + delta); }, count);
      deviation = std::max(deviation, MaxAbsDifference(solved, t));
    }
    out.solved_deviation_by_shift.push_back(deviation);
    out.max_solved_deviation = std::max(out.max_solved_deviation, deviation);
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

std::vector<double> BinaryDigits(std::int64_t positions, std::int64_t bits) {
  constexpr const char* kOp = "binary_digits";
  Require(positions > 0 && positions <= 65536, kOp, "positions", positions, "must be in [1, 65536]");
  Require(bits > 0 && bits <= 62, kOp, "bits", bits, "must be in [1, 62]");
  std::vector<double> out(static_cast<std::size_t>(positions * bits));
  for (std::int64_t k = 0; k < positions; ++k) {
    for (std::int64_t b = 0; b < bits; ++b) {
      out[static_cast<std::size_t>(k * bits + b)] = static_cast<double>((k >> b) & 1);
    }
  }
  return out;
}

}  // namespace posenc
