// Analyses: closed forms (wavelength, rotations, decay bound at 0), brute
// force in float64 against the library's analyses, and bad input errors.
#include <cmath>
#include <complex>
#include <numbers>
#include <variant>
#include <vector>

#include "posenc/analysis.h"
#include "posenc/rope.h"
#include "posenc/rope_frequencies.h"
#include "test_util.h"

namespace posenc {
namespace {

using testing::ExpectError;

RopeSpec Llama2Spec() { return RopeSpec{.theta = 10000.0, .head_dim = 128}; }

RopeSpec Llama31Spec() { return RopeSpec{.theta = 500000.0, .head_dim = 128, .scaling = Llama3Scaling{}}; }

TEST(RopeDims, ClosedFormsLlama31) {
  const RopeDims dims = ComputeRopeDims(Llama31Spec(), 8192, 8.0);
  ASSERT_EQ(dims.configured.dims.size(), 64u);
  EXPECT_EQ(dims.configured.method, "llama3");
  const auto inv = ComputeRopeFrequencies(Llama31Spec(), 8192).inv_freq;
  for (const RopeDim& d : dims.configured.dims) {
    EXPECT_DOUBLE_EQ(d.inv_freq, inv[static_cast<std::size_t>(d.index)]);
    EXPECT_DOUBLE_EQ(d.wavelength, 2.0 * std::numbers::pi / d.inv_freq);
    EXPECT_DOUBLE_EQ(d.rotations, 8192.0 / d.wavelength);
  }
  // Pair 0 turns once per 2 pi tokens in every method except linear (factor 8).
  ASSERT_EQ(dims.comparisons.size(), 5u);
  const char* names[] = {"plain", "linear", "ntk", "yarn", "llama3"};
  for (std::size_t m = 0; m < 5; ++m) EXPECT_EQ(dims.comparisons[m].method, names[m]);
  EXPECT_DOUBLE_EQ(dims.comparisons[0].dims[0].wavelength, 2.0 * std::numbers::pi);
  EXPECT_NEAR(dims.comparisons[1].dims[0].wavelength, 16.0 * std::numbers::pi, 1e-12);
  // Llama-3 keeps fast pairs and divides slow ones by the factor.
  EXPECT_DOUBLE_EQ(dims.comparisons[4].dims[0].inv_freq, dims.comparisons[0].dims[0].inv_freq);
  EXPECT_NEAR(dims.comparisons[4].dims[63].inv_freq * 8.0, dims.comparisons[0].dims[63].inv_freq, 1e-18);
  // Every method's wavelength grows with the pair index.
  for (const auto& method : dims.comparisons) {
    for (std::size_t i = 1; i < method.dims.size(); ++i) {
      EXPECT_GE(method.dims[i].wavelength, method.dims[i - 1].wavelength) << method.method;
    }
  }
}

// Phi-3-mini-128k's shape (head_dim 96, 48 pairs, L = 4096) with made-up
// rising factors: the comparison divides plain frequencies by them.
RopeSpec LongRopeSpec() {
  LongRopeScaling s;
  for (int i = 0; i < 48; ++i) {
    s.short_factor.push_back(1.0 + 0.02 * i);
    s.long_factor.push_back(1.0 + 1.3 * i);
  }
  s.original_max_position = 4096;
  s.factor = 32.0;
  return RopeSpec{.theta = 10000.0, .head_dim = 96, .scaling = s};
}

TEST(RopeDims, LongRopeComparisonUsesLongFactors) {
  const RopeSpec spec = LongRopeSpec();
  const auto& own = std::get<LongRopeScaling>(spec.scaling);
  const RopeDims dims = ComputeRopeDims(spec, 4096, 32.0);
  EXPECT_EQ(dims.configured.method, "longrope");
  ASSERT_EQ(dims.comparisons.size(), 6u);
  const RopeDimsMethod& plain = dims.comparisons[0];
  const RopeDimsMethod& longrope = dims.comparisons[5];
  EXPECT_EQ(longrope.method, "longrope");
  EXPECT_EQ(longrope.factor, 32.0);
  for (std::size_t i = 0; i < 48; ++i) {
    // At the original length the configured table uses the short factors ...
    EXPECT_NEAR(dims.configured.dims[i].inv_freq * own.short_factor[i], plain.dims[i].inv_freq, 1e-15);
    // ... the comparison the long ones (beyond it).
    EXPECT_NEAR(longrope.dims[i].inv_freq * own.long_factor[i], plain.dims[i].inv_freq, 1e-15);
    EXPECT_DOUBLE_EQ(longrope.dims[i].wavelength, 2.0 * std::numbers::pi / longrope.dims[i].inv_freq);
    EXPECT_DOUBLE_EQ(longrope.dims[i].rotations, 4096.0 / longrope.dims[i].wavelength);
  }
  // Factors given explicitly win over the spec's, and work for any spec.
  std::vector<double> twos(64, 2.0);
  const RopeDims given = ComputeRopeDims(Llama2Spec(), 4096, 4.0, twos);
  ASSERT_EQ(given.comparisons.size(), 6u);
  EXPECT_NEAR(given.comparisons[5].dims[10].inv_freq * 2.0, given.comparisons[0].dims[10].inv_freq, 1e-15);
  // No factors known: no LongRoPE table (there is nothing to compare).
  EXPECT_EQ(ComputeRopeDims(Llama2Spec(), 4096, 4.0).comparisons.size(), 5u);
}

TEST(RopeDims, RejectsBadLongRopeFactors) {
  ExpectError([] { ComputeRopeDims(Llama2Spec(), 4096, 4.0, std::vector<double>(63, 1.0)); },
              {"[rope_dims] longrope_factors.size() = 63", "rotary_dim / 2 = 64"});
  std::vector<double> factors(64, 1.0);
  factors[7] = -1.0;
  ExpectError([&] { ComputeRopeDims(Llama2Spec(), 4096, 4.0, factors); }, {"longrope_factors = -1", "> 0"});
}

TEST(RopeDims, NoComparisonsWithoutFactor) { EXPECT_TRUE(ComputeRopeDims(Llama2Spec(), 4096).comparisons.empty()); }

TEST(RopeDims, RejectsBadInput) {
  ExpectError([] { ComputeRopeDims(Llama2Spec(), 0); }, {"[rope_dims] original_length = 0", "> 0"});
  ExpectError([] { ComputeRopeDims(Llama2Spec(), 4096, 0.5); }, {"comparison_factor = 0.5"});
  ExpectError([] { ComputeRopeDims(RopeSpec{.head_dim = 7}, 4096); }, {"7"});
}

TEST(RopeDecay, BoundAtZeroIsHalfOfPairsPlusOne) {
  for (std::int64_t d : {8, 64, 128, 256}) {
    const RopeSpec spec{.theta = 10000.0, .head_dim = d};
    const double p = static_cast<double>(d) / 2.0;  // d is even
    EXPECT_NEAR(RopeDecayBound(ComputeRopeFrequencies(spec).inv_freq, 0.0), (p + 1.0) / 2.0, 1e-12) << d;
  }
  const RopeDecay decay = ComputeRopeDecay(Llama2Spec(), {.max_distance = 0, .samples = 4});
  ASSERT_EQ(decay.points.size(), 1u);
  EXPECT_NEAR(decay.points[0].bound, 32.5, 1e-12);
  // All-ones q, k at Delta = 0: <R_m q, R_m k> = |q|^2 = head_dim.
  EXPECT_NEAR(decay.points[0].ones, 128.0, 1e-9);
}

TEST(RopeDecay, BruteForceAgainstFormula) {
  const RopeSpec spec = Llama2Spec();
  const RopeDecay decay = ComputeRopeDecay(spec, {.max_distance = 200, .step = 20, .samples = 8});
  const auto inv = ComputeRopeFrequencies(spec).inv_freq;
  ASSERT_EQ(decay.points.size(), 11u);
  for (const RopeDecayPoint& point : decay.points) {
    // The bound from its definition, term by term.
    double total = 0.0;
    for (std::size_t j = 1; j <= inv.size(); ++j) {
      std::complex<double> s = 0.0;
      for (std::size_t i = 0; i < j; ++i) {
        s += std::exp(std::complex<double>(0.0, static_cast<double>(point.distance) * inv[i]));
      }
      total += std::abs(s);
    }
    EXPECT_NEAR(point.bound, total / static_cast<double>(inv.size()), 1e-9) << point.distance;
    // All-ones q, k: per pair the score is 2 cos(Delta theta_i), for every m.
    double ones = 0.0;
    for (double theta : inv) ones += 2.0 * std::cos(static_cast<double>(point.distance) * theta);
    EXPECT_NEAR(point.ones, std::abs(ones), 1e-9) << point.distance;
  }
  // The bound decays: far below its value at 0 by 200 tokens.
  EXPECT_LT(decay.points.back().bound, 0.5 * decay.points.front().bound);
}

TEST(RopeDecay, ExplicitAndLogSpacedDistances) {
  const std::vector<std::int64_t> log = LogSpacedDistances(65536, 200);
  ASSERT_GT(log.size(), 100u);
  EXPECT_EQ(log.front(), 1);
  EXPECT_EQ(log.back(), 65536);
  for (std::size_t i = 1; i < log.size(); ++i) EXPECT_GT(log[i], log[i - 1]);
  // Ratios even on a log scale where rounding no longer matters.
  const double ratio = std::exp(std::log(65536.0) / 199.0);
  EXPECT_NEAR(static_cast<double>(log[log.size() - 1]) / static_cast<double>(log[log.size() - 2]), ratio, 1e-3);
  EXPECT_EQ(LogSpacedDistances(1, 5), std::vector<std::int64_t>{1});

  // The same points as the grid, whichever way they are asked for.
  const RopeDecay grid = ComputeRopeDecay(Llama2Spec(), {.max_distance = 300, .step = 100, .samples = 3});
  const RopeDecay listed = ComputeRopeDecay(Llama2Spec(), {.distances = {0, 100, 200, 300}, .samples = 3});
  ASSERT_EQ(listed.points.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(listed.points[i].distance, grid.points[i].distance);
    EXPECT_EQ(listed.points[i].bound, grid.points[i].bound);
    EXPECT_EQ(listed.points[i].ones, grid.points[i].ones);
    EXPECT_EQ(listed.points[i].random, grid.points[i].random);
  }
  ExpectError([] { ComputeRopeDecay(Llama2Spec(), {.distances = {3, -1}}); }, {"[rope_decay] distance = -1"});
  ExpectError([] { LogSpacedDistances(0, 10); }, {"max_distance = 0"});
  ExpectError([] { LogSpacedDistances(100, 1); }, {"count = 1"});
}

TEST(RopeDecay, RejectsBadInput) {
  ExpectError([] { ComputeRopeDecay(Llama2Spec(), {.max_distance = -1}); }, {"[rope_decay] max_distance = -1"});
  ExpectError([] { ComputeRopeDecay(Llama2Spec(), {.step = 0}); }, {"step = 0", "> 0"});
  ExpectError([] { ComputeRopeDecay(Llama2Spec(), {.samples = 0}); }, {"samples = 0"});
}

TEST(SinusoidalLinearMap, ShiftMatrixReproducesTable) {
  for (SinusoidalOrder order : {SinusoidalOrder::kInterleaved, SinusoidalOrder::kConcat}) {
    const SinusoidalSpec spec{.dim = 64, .order = order};
    const SinusoidalLinearMap map = ComputeSinusoidalLinearMap(spec, 256, 64);
    ASSERT_EQ(map.error_by_shift.size(), 129u);
    EXPECT_LT(map.max_error, 1e-12);
    EXPECT_EQ(map.error_by_shift[64], 0.0);  // T(0) is the identity
  }
  // Odd dim: the zero pad stays zero.
  EXPECT_LT(ComputeSinusoidalLinearMap(SinusoidalSpec{.dim = 9}, 32, 8).max_error, 1e-12);
}

TEST(SinusoidalLinearMap, ShiftMatrixIsBlockRotation) {
  const SinusoidalSpec spec{.dim = 6};
  const std::vector<double> t = SinusoidalShiftMatrix(spec, 3.0);
  const std::vector<double> w = SinusoidalInvFreq(spec);
  // Interleaved: pair j at rows/cols (2j, 2j+1); everything else zero.
  for (std::size_t r = 0; r < 6; ++r) {
    for (std::size_t c = 0; c < 6; ++c) {
      if (r / 2 != c / 2) {
        EXPECT_EQ(t[r * 6 + c], 0.0);
      }
    }
  }
  EXPECT_DOUBLE_EQ(t[2 * 6 + 2], std::cos(3.0 * w[1]));
  EXPECT_DOUBLE_EQ(t[2 * 6 + 3], std::sin(3.0 * w[1]));
  EXPECT_DOUBLE_EQ(t[3 * 6 + 2], -std::sin(3.0 * w[1]));
  // Depends only on Delta: T(a) T(b) = T(a + b).
  const std::vector<double> a = SinusoidalShiftMatrix(spec, 5.0), b = SinusoidalShiftMatrix(spec, 7.0);
  const std::vector<double> ab = SinusoidalShiftMatrix(spec, 12.0);
  for (std::size_t r = 0; r < 6; ++r) {
    for (std::size_t c = 0; c < 6; ++c) {
      double s = 0.0;
      for (std::size_t i = 0; i < 6; ++i) s += a[r * 6 + i] * b[i * 6 + c];
      EXPECT_NEAR(s, ab[r * 6 + c], 1e-14);
    }
  }
}

TEST(SinusoidalLinearMap, SolvedMapIsTheConstructedOneAnywhere) {
  // Least squares from the encodings alone finds the block rotation, the same
  // from any window of positions (T depends on Delta only), for whole and
  // fractional shifts, both orders, an odd dim.
  for (SinusoidalOrder order : {SinusoidalOrder::kInterleaved, SinusoidalOrder::kConcat}) {
    for (std::int64_t dim : {16, 64, 9}) {
      const SinusoidalSpec spec{.dim = dim, .order = order};
      for (double delta : {-37.0, 1.0, 2.5, 100.0}) {
        const std::vector<double> t = SinusoidalShiftMatrix(spec, delta);
        for (std::int64_t first : {0, 1000, -500}) {
          const std::vector<double> solved = SolveSinusoidalShiftMatrix(spec, delta, first, 256);
          ASSERT_EQ(solved.size(), t.size());
          for (std::size_t i = 0; i < t.size(); ++i) {
            ASSERT_NEAR(solved[i], t[i], 1e-9) << "dim " << dim << " delta " << delta << " first " << first;
          }
        }
      }
    }
  }
  const SinusoidalLinearMap map = ComputeSinusoidalLinearMap(SinusoidalSpec{.dim = 128}, 512, 64);
  ASSERT_EQ(map.solved_deviation_by_shift.size(), 129u);
  EXPECT_LT(map.max_solved_deviation, 1e-9);
}

TEST(SinusoidalLinearMap, RejectsBadInput) {
  ExpectError([] { ComputeSinusoidalLinearMap(SinusoidalSpec{.dim = 8}, 0, 4); },
              {"[sinusoidal_linear_map] positions = 0"});
  ExpectError([] { ComputeSinusoidalLinearMap(SinusoidalSpec{.dim = 8}, 3, 4); }, {"positions = 3", ">= 4"});
  ExpectError([] { SolveSinusoidalShiftMatrix(SinusoidalSpec{.dim = 8}, 1.0, 0, 1); },
              {"[sinusoidal_shift] count = 1"});
  ExpectError([] { ComputeSinusoidalLinearMap(SinusoidalSpec{.dim = 8}, 8, -1); }, {"max_shift = -1"});
  ExpectError([] { SinusoidalShiftMatrix(SinusoidalSpec{.dim = 8}, NAN); }, {"delta = nan"});
}

TEST(RopeInvariance, Llama2AndQwen2Yarn) {
  for (RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved}) {
    RopeSpec spec = Llama2Spec();
    spec.layout = layout;
    const RopeInvariance inv = ComputeRopeInvariance(spec, 4096, 128);
    EXPECT_LT(inv.max_error_f64, 1e-11 * inv.max_abs_score);
    // float32 rotations of O(1) entries: errors of a few ulps times sqrt(d).
    EXPECT_LT(inv.max_error_f32, 1e-4 * inv.max_abs_score);
    EXPECT_GT(inv.max_abs_score, 1.0);
  }
  RopeSpec yarn{.theta = 1000000.0, .head_dim = 128};
  YarnScaling s;
  s.factor = 4.0;
  s.original_max_position = 32768;
  yarn.scaling = s;
  const RopeInvariance inv = ComputeRopeInvariance(yarn, 65536, 2048);
  EXPECT_LT(inv.max_error_f64, 1e-10 * inv.max_abs_score);
  // The attention factor (1.139 here) scales both sides alike: left out.
  EXPECT_LT(inv.max_error_f32, 1e-4 * inv.max_abs_score);
}

TEST(RopeInvariance, LongRopeAtLongPositions) {
  // Phi-3-style LongRoPE (attention factor 1.19) to 131072 tokens: the
  // float32 kernel forms angles in double, so the invariance holds there too.
  const RopeInvariance inv = ComputeRopeInvariance(LongRopeSpec(), 131072, 512);
  EXPECT_LT(inv.max_error_f64, 1e-10 * inv.max_abs_score);
  EXPECT_LT(inv.max_error_f32, 1e-4 * inv.max_abs_score);
}

TEST(RopeInvariance, RejectsBadInput) {
  ExpectError([] { ComputeRopeInvariance(Llama2Spec(), -1, 1); }, {"max_position = -1"});
  ExpectError([] { ComputeRopeInvariance(Llama2Spec(), 16, 0); }, {"step = 0"});
  ExpectError([] { ComputeRopeInvariance(Llama2Spec(), 100000, 1); }, {"at most 513"});
}

TEST(BinaryCounter, DigitsSpellThePosition) {
  const std::vector<double> bits = BinaryDigits(64, 6);
  ASSERT_EQ(bits.size(), 64u * 6u);
  for (std::int64_t k = 0; k < 64; ++k) {
    double value = 0.0;
    for (std::int64_t b = 0; b < 6; ++b)
      value += bits[static_cast<std::size_t>(k * 6 + b)] * std::ldexp(1.0, static_cast<int>(b));
    EXPECT_EQ(value, static_cast<double>(k));
  }
  // Bit b has period 2^(b+1): it flips every 2^b tokens.
  for (std::int64_t b = 0; b < 6; ++b) {
    for (std::int64_t k = 0; k + (std::int64_t{1} << b) < 64; ++k) {
      const double now = bits[static_cast<std::size_t>(k * 6 + b)];
      const double later = bits[static_cast<std::size_t>((k + (std::int64_t{1} << b)) * 6 + b)];
      EXPECT_EQ(now + later, 1.0);
    }
  }
  ExpectError([] { BinaryDigits(0, 4); }, {"[binary_digits] positions = 0"});
  ExpectError([] { BinaryDigits(8, 63); }, {"bits = 63"});
}

TEST(ScoreMatrices, SinusoidalDotsBruteForce) {
  const SinusoidalSpec spec{.dim = 16};
  const std::vector<double> dots = SinusoidalDotMatrix(spec, 20);
  const std::vector<double> w = SinusoidalInvFreq(spec);
  for (std::size_t m = 0; m < 20; ++m) {
    for (std::size_t n = 0; n < 20; ++n) {
      // sin a sin b + cos a cos b = cos(a - b): a function of m - n only.
      double expected = 0.0;
      for (double wk : w) expected += std::cos((static_cast<double>(m) - static_cast<double>(n)) * wk);
      EXPECT_NEAR(dots[m * 20 + n], expected, 1e-12);
    }
  }
  ExpectError([] { SinusoidalDotMatrix(SinusoidalSpec{.dim = 8}, 0); }, {"positions = 0"});
}

TEST(ScoreMatrices, RopeScoresOfOnesAreTwiceSinusoidalDots) {
  // All-ones q, k: each pair scores 2 cos((m - n) theta_i), and sinusoidal
  // <p_m, p_n> sums cos((m - n) w_i) with the same frequencies.
  for (RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved}) {
    const RopeSpec spec{.theta = 10000.0, .head_dim = 32, .layout = layout};
    const std::vector<double> ones(32, 1.0);
    const std::vector<double> rope = RopeScoreMatrix(spec, ones, ones, 40);
    const std::vector<double> dots = SinusoidalDotMatrix(SinusoidalSpec{.dim = 32}, 40);
    for (std::size_t i = 0; i < rope.size(); ++i) EXPECT_NEAR(rope[i], 2.0 * dots[i], 1e-12);
  }
}

TEST(ScoreMatrices, RopeScoresDependOnDifference) {
  const RopeSpec spec{.theta = 10000.0, .head_dim = 8};
  const std::vector<double> q = {1, 2, 3, 4, -1, 0.5, 2, 1}, k = {0.5, -1, 1, 2, 3, 1, -2, 0};
  const std::vector<double> s = RopeScoreMatrix(spec, q, k, 16);
  const auto inv = ComputeRopeFrequencies(spec).inv_freq;
  for (std::size_t m = 0; m < 16; ++m) {
    for (std::size_t n = 0; n < 16; ++n) {
      const auto rq = reference::RotateHead(spec, inv, q, static_cast<double>(m) - static_cast<double>(n));
      double expected = 0.0;
      for (std::size_t i = 0; i < 8; ++i) expected += rq[i] * k[i];
      EXPECT_NEAR(s[m * 16 + n], expected, 1e-12);
    }
  }
  ExpectError([&] { RopeScoreMatrix(spec, {1, 2}, k, 4); }, {"[rope_scores] q.size() = 2"});
}

}  // namespace
}  // namespace posenc
