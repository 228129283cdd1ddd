// RoPE analyses: per-pair wavelengths, the RoFormer decay bound against
// measured scores, relative invariance (float64 and the float32 kernel), and
// score matrices. All brute force in float64 from the frequency table.
#include <algorithm>
#include <cmath>
#include <complex>
#include <numbers>
#include <random>

#include "posenc/analysis.h"
#include "posenc/error.h"
#include "posenc/rope.h"
#include "posenc/rope_frequencies.h"

namespace posenc {
namespace {

constexpr double kTwoPi = 2.0 * std::numbers::pi;

RopeDimsMethod DimsFor(const RopeSpec& spec, std::string method, double factor, std::int64_t original_length) {
  const RopeFrequencies freqs = ComputeRopeFrequencies(spec, original_length);
  RopeDimsMethod out{std::move(method), factor, {}};
  out.dims.reserve(freqs.inv_freq.size());
  for (std::size_t i = 0; i < freqs.inv_freq.size(); ++i) {
    const double w = freqs.inv_freq[i];
    const double wavelength = kTwoPi / w;
    out.dims.push_back(
        {static_cast<std::int64_t>(i), w, wavelength, static_cast<double>(original_length) / wavelength});
  }
  return out;
}

std::vector<double> Normal(std::mt19937_64& rng, std::int64_t n) {
  std::normal_distribution<double> dist(0.0, 1.0);
  std::vector<double> v(static_cast<std::size_t>(n));
  for (double& x : v) x = dist(rng);
  return v;
}

double Dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Rotates a [rows, head_dim] float32 block (one head per row) by position
// ids with the fast kernel; the result in double.
std::vector<double> RotateF32(const RopeSpec& spec, const RopeFrequencies& freqs, const std::vector<double>& rows,
                              std::vector<std::int64_t> ids) {
  const std::int64_t n = static_cast<std::int64_t>(ids.size());
  std::vector<float> buffer(rows.begin(), rows.end());
  RopeCall call;
  call.operands.push_back(
      RopeOperand::InPlace(TensorView::Contiguous(buffer.data(), DType::kF32, {1, n, 1, spec.head_dim})));
  call.positions = TokenPositions::Ids(std::move(ids));
  ApplyRope(spec, freqs, call);
  return {buffer.begin(), buffer.end()};
}

}  // namespace

RopeDims ComputeRopeDims(const RopeSpec& spec, std::int64_t original_length, double comparison_factor,
                         const std::vector<double>& longrope_factors) {
  constexpr const char* kOp = "rope_dims";
  spec.Validate();
  Require(original_length > 0, kOp, "original_length", original_length, "must be > 0");
  Require(comparison_factor == 0.0 || (std::isfinite(comparison_factor) && comparison_factor >= 1.0), kOp,
          "comparison_factor", comparison_factor, "must be 0 (none) or a finite number >= 1");
  if (!longrope_factors.empty()) {
    Require(static_cast<std::int64_t>(longrope_factors.size()) == spec.Pairs(), kOp, "longrope_factors.size()",
            longrope_factors.size(), "must equal rotary_dim / 2 = " + std::to_string(spec.Pairs()));
    for (double f : longrope_factors) {
      Require(std::isfinite(f) && f > 0.0, kOp, "longrope_factors", f, "must be finite and > 0");
    }
  }
  RopeDims out;
  out.original_length = original_length;
  out.configured = DimsFor(spec, std::string(RopeScalingName(spec.scaling)), 1.0, original_length);
  if (comparison_factor == 0.0) return out;

  const double f = comparison_factor;
  RopeSpec plain = spec;
  plain.scaling = NoScaling{};
  auto with = [&plain](RopeScaling scaling) {
    RopeSpec s = plain;
    s.scaling = std::move(scaling);
    return s;
  };
  out.comparisons.push_back(DimsFor(plain, "plain", 1.0, original_length));
  out.comparisons.push_back(DimsFor(with(LinearScaling{f}), "linear", f, original_length));
  out.comparisons.push_back(DimsFor(with(NtkAwareScaling{f}), "ntk", f, original_length));
  YarnScaling yarn;
  yarn.factor = f;
  yarn.original_max_position = original_length;
  out.comparisons.push_back(DimsFor(with(yarn), "yarn", f, original_length));
  Llama3Scaling llama3;
  llama3.factor = f;
  llama3.original_max_position = original_length;
  out.comparisons.push_back(DimsFor(with(llama3), "llama3", f, original_length));
  // LongRoPE: searched per-pair factors, the long set (beyond the original
  // length). Only when some are known.
  std::vector<double> factors = longrope_factors;
  if (factors.empty()) {
    if (const auto* own = std::get_if<LongRopeScaling>(&spec.scaling)) factors = own->long_factor;
  }
  if (!factors.empty()) {
    LongRopeScaling longrope;
    longrope.short_factor = factors;
    longrope.long_factor = factors;
    longrope.original_max_position = original_length;
    longrope.factor = f;
    RopeDimsMethod m = DimsFor(with(longrope), "longrope", f, original_length);
    out.comparisons.push_back(std::move(m));
  }
  return out;
}

double RopeDecayBound(const std::vector<double>& inv_freq, double distance) {
  Require(!inv_freq.empty(), "rope_decay", "inv_freq.size()", 0, "must be > 0");
  // S_j for j = 1 .. d/2 as running sums of e^{i Delta theta_i}.
  std::complex<double> s = 0.0;
  double total = 0.0;
  for (double theta : inv_freq) {
    s += std::polar(1.0, std::fmod(distance * theta, kTwoPi));
    total += std::abs(s);
  }
  return total / static_cast<double>(inv_freq.size());
}

std::vector<std::int64_t> LogSpacedDistances(std::int64_t max_distance, std::int64_t count) {
  constexpr const char* kOp = "rope_decay";
  Require(max_distance >= 1 && max_distance <= (std::int64_t{1} << 24), kOp, "max_distance", max_distance,
          "must be in [1, 16777216] on a log scale");
  Require(count >= 2 && count <= (std::int64_t{1} << 20), kOp, "count", count, "must be in [2, 1048576]");
  std::vector<std::int64_t> out;
  const double top = std::log(static_cast<double>(max_distance));
  for (std::int64_t i = 0; i < count; ++i) {
    const double x = std::exp(top * static_cast<double>(i) / static_cast<double>(count - 1));
    const auto d = std::clamp<std::int64_t>(std::llround(x), 1, max_distance);
    if (out.empty() || d > out.back()) out.push_back(d);
  }
  if (out.back() != max_distance) out.push_back(max_distance);
  return out;
}

RopeDecay ComputeRopeDecay(const RopeSpec& spec, const RopeDecayOptions& options) {
  constexpr const char* kOp = "rope_decay";
  spec.Validate();
  std::vector<std::int64_t> distances = options.distances;
  if (distances.empty()) {
    Require(options.max_distance >= 0, kOp, "max_distance", options.max_distance, "must be >= 0");
    Require(options.max_distance <= (std::int64_t{1} << 24), kOp, "max_distance", options.max_distance,
            "must be <= 16777216");
    Require(options.step > 0, kOp, "step", options.step, "must be > 0");
    for (std::int64_t delta = 0; delta <= options.max_distance; delta += options.step) {
      distances.push_back(delta);
    }
  }
  Require(distances.size() <= (std::size_t{1} << 20), kOp, "distances.size()", distances.size(), "must be <= 1048576");
  for (std::int64_t delta : distances) {
    Require(delta >= 0 && delta <= (std::int64_t{1} << 24), kOp, "distance", delta, "must be in [0, 16777216]");
  }
  Require(options.samples > 0, kOp, "samples", options.samples, "must be > 0");
  Require(options.samples <= 100000, kOp, "samples", options.samples, "must be <= 100000");
  const std::vector<double> inv_freq = ComputeRopeFrequencies(spec).inv_freq;
  const std::vector<double> ones(static_cast<std::size_t>(spec.head_dim), 1.0);

  std::mt19937_64 rng(options.seed);
  std::vector<std::vector<double>> qs, ks;
  std::vector<double> query_positions;
  std::uniform_int_distribution<std::int64_t> position(0, 4096);
  for (std::int64_t s = 0; s < options.samples; ++s) {
    qs.push_back(Normal(rng, spec.head_dim));
    ks.push_back(Normal(rng, spec.head_dim));
    query_positions.push_back(static_cast<double>(position(rng)));
  }

  RopeDecay out;
  out.rotary_dim = spec.RotaryDim();
  for (std::int64_t delta : distances) {
    RopeDecayPoint point;
    point.distance = delta;
    point.bound = RopeDecayBound(inv_freq, static_cast<double>(delta));
    double ones_sum = 0.0, random_sum = 0.0;
    for (std::int64_t s = 0; s < options.samples; ++s) {
      // Key at m, query Delta tokens later.
      const double m = query_positions[static_cast<std::size_t>(s)];
      const double n = m + static_cast<double>(delta);
      ones_sum +=
          std::abs(Dot(reference::RotateHead(spec, inv_freq, ones, n), reference::RotateHead(spec, inv_freq, ones, m)));
      random_sum += std::abs(
          Dot(reference::RotateHead(spec, inv_freq, qs[s], n), reference::RotateHead(spec, inv_freq, ks[s], m)));
    }
    point.ones = ones_sum / static_cast<double>(options.samples);
    point.random = random_sum / static_cast<double>(options.samples);
    out.points.push_back(point);
  }
  return out;
}

RopeInvariance ComputeRopeInvariance(const RopeSpec& spec, std::int64_t max_position, std::int64_t step,
                                     std::uint64_t seed) {
  constexpr const char* kOp = "rope_invariance";
  spec.Validate();
  Require(max_position >= 0, kOp, "max_position", max_position, "must be >= 0");
  Require(max_position <= (std::int64_t{1} << 24), kOp, "max_position", max_position, "must be <= 16777216");
  Require(step > 0, kOp, "step", step, "must be > 0");
  Require(max_position / step <= 512, kOp, "step", step,
          "must leave at most 513 grid positions (max_position / step <= 512)");
  // The rotation alone, as in the float64 check: the kernel would scale each
  // rotated vector by the attention factor (YaRN, LongRoPE), the scores
  // <R_m q, R_n k> by its square but <R_{m-n} q, k> (k unrotated) only once.
  RopeFrequencies freqs = ComputeRopeFrequencies(spec);
  freqs.attention_factor = 1.0;
  std::mt19937_64 rng(seed);
  const std::vector<double> q = Normal(rng, spec.head_dim);
  const std::vector<double> k = Normal(rng, spec.head_dim);
  const std::int64_t d = spec.head_dim;

  std::vector<std::int64_t> grid;
  for (std::int64_t p = 0; p <= max_position; p += step) grid.push_back(p);
  const std::size_t g = grid.size();

  RopeInvariance out{max_position, step, 0.0, 0.0, 0.0};
  // float64: rotate once per grid position, compare every pair (m, n).
  std::vector<std::vector<double>> rq, rk;
  for (std::int64_t p : grid) {
    rq.push_back(reference::RotateHead(spec, freqs.inv_freq, q, static_cast<double>(p)));
    rk.push_back(reference::RotateHead(spec, freqs.inv_freq, k, static_cast<double>(p)));
  }
  for (std::size_t a = 0; a < g; ++a) {
    for (std::size_t b = 0; b < g; ++b) {
      const double lhs = Dot(rq[a], rk[b]);
      const double rel = static_cast<double>(grid[a] - grid[b]);
      const double rhs = Dot(reference::RotateHead(spec, freqs.inv_freq, q, rel), k);
      out.max_error_f64 = std::max(out.max_error_f64, std::abs(lhs - rhs));
      out.max_abs_score = std::max(out.max_abs_score, std::abs(rhs));
    }
  }

  // float32 through the fast kernel. Positions must not be negative, so
  // <R_{m-n} q, k> is taken as <q, R_{n-m} k> when m < n.
  std::vector<double> q_rows, k_rows;
  for (std::size_t i = 0; i < g; ++i) {
    q_rows.insert(q_rows.end(), q.begin(), q.end());
    k_rows.insert(k_rows.end(), k.begin(), k.end());
  }
  const std::vector<double> fq = RotateF32(spec, freqs, q_rows, grid);
  const std::vector<double> fk = RotateF32(spec, freqs, k_rows, grid);
  auto row = [d](const std::vector<double>& block, std::size_t i) {
    return std::vector<double>(block.begin() + static_cast<std::ptrdiff_t>(i * d),
                               block.begin() + static_cast<std::ptrdiff_t>((i + 1) * d));
  };
  auto rounded = [](const std::vector<double>& v) {
    std::vector<double> r(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) r[i] = static_cast<double>(static_cast<float>(v[i]));
    return r;
  };
  const std::vector<double> q_f = rounded(q), k_f = rounded(k);
  for (std::size_t a = 0; a < g; ++a) {
    for (std::size_t b = 0; b < g; ++b) {
      const double lhs = Dot(row(fq, a), row(fk, b));
      // grid[a] - grid[b] = (a - b) * step = grid[a - b] when a >= b: the
      // relative side reuses the kernel's rotations of q (or k) by grid[i].
      const double rhs = a >= b ? Dot(row(fq, a - b), k_f) : Dot(q_f, row(fk, b - a));
      out.max_error_f32 = std::max(out.max_error_f32, std::abs(lhs - rhs));
    }
  }
  return out;
}

std::vector<double> RopeScoreMatrix(const RopeSpec& spec, const std::vector<double>& q, const std::vector<double>& k,
                                    std::int64_t positions) {
  constexpr const char* kOp = "rope_scores";
  spec.Validate();
  Require(positions > 0, kOp, "positions", positions, "must be > 0");
  Require(positions <= 8192, kOp, "positions", positions, "must be <= 8192");
  Require(static_cast<std::int64_t>(q.size()) == spec.head_dim, kOp, "q.size()", q.size(), "must equal head_dim");
  Require(static_cast<std::int64_t>(k.size()) == spec.head_dim, kOp, "k.size()", k.size(), "must equal head_dim");
  const std::vector<double> inv_freq = ComputeRopeFrequencies(spec).inv_freq;
  const auto n = static_cast<std::size_t>(positions);
  std::vector<std::vector<double>> rq(n), rk(n);
  for (std::size_t p = 0; p < n; ++p) {
    rq[p] = reference::RotateHead(spec, inv_freq, q, static_cast<double>(p));
    rk[p] = reference::RotateHead(spec, inv_freq, k, static_cast<double>(p));
  }
  std::vector<double> out(n * n);
  for (std::size_t m = 0; m < n; ++m) {
    for (std::size_t j = 0; j < n; ++j) out[m * n + j] = Dot(rq[m], rk[j]);
  }
  return out;
}

}  // namespace posenc
