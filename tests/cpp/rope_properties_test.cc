// The properties the RoFormer paper and Su Jianlin's posts derive for RoPE, checked numerically against
// float64 re-derivations (std::cos/std::sin of the exact angle), not against
// posenc's own formula.
#include <cmath>
#include <numeric>
#include <random>

#include "posenc/rope.h"
#include "posenc/rope_permute.h"
#include "test_util.h"

namespace posenc {
namespace {

constexpr std::int64_t kHeadDim = 128;

std::vector<float> RandomVector(std::uint32_t seed, std::int64_t n = kHeadDim) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist;
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = dist(rng);
  return v;
}

// Rotates one head vector at `position` with the fast kernel.
std::vector<float> Rotate(const RopeSpec& spec, std::vector<float> x, std::int64_t position,
                          RopeDirection direction = RopeDirection::kForward) {
  auto view = TensorView::Contiguous(x.data(), DType::kF32, {1, 1, 1, spec.head_dim});
  ApplyRope(spec, RopeCall{{RopeOperand::InPlace(view)}, RopePositions::Offset(position), direction});
  return x;
}

// float64 rotation by the exact angle: an independent derivation of RoPE.
std::vector<double> RotateDouble(const RopeSpec& spec, const std::vector<float>& x, double position) {
  const auto inv_freq = ComputeRopeFrequencies(spec).inv_freq;
  std::vector<double> y(x.begin(), x.end());
  const std::int64_t pairs = spec.Pairs();
  for (std::int64_t k = 0; k < pairs; ++k) {
    const std::int64_t i = spec.layout == RopeLayout::kInterleaved ? 2 * k : k;
    const std::int64_t j = spec.layout == RopeLayout::kInterleaved ? 2 * k + 1 : k + pairs;
    const long double angle = static_cast<long double>(position) * inv_freq[k];
    const double c = static_cast<double>(std::cos(angle)), s = static_cast<double>(std::sin(angle));
    y[i] = x[i] * c - x[j] * s;
    y[j] = x[i] * s + x[j] * c;
  }
  return y;
}

double Dot(const std::vector<float>& a, const std::vector<float>& b) {
  return std::inner_product(a.begin(), a.end(), b.begin(), 0.0);
}
double Norm(const std::vector<float>& a) { return std::sqrt(Dot(a, a)); }

class RopeProperties : public ::testing::TestWithParam<RopeLayout> {
 protected:
  RopeSpec spec_{.theta = 10000, .head_dim = kHeadDim, .layout = GetParam()};
};

// <R_m q, R_n k> depends only on m - n.
TEST_P(RopeProperties, ScoresDependOnlyOnRelativePosition) {
  const auto q = RandomVector(1), k = RandomVector(2);
  for (std::int64_t delta : {0, 1, 7, 100, 4095}) {
    const double base = Dot(Rotate(spec_, q, delta), Rotate(spec_, k, 0));
    for (std::int64_t shift : {1, 1000, 65536, 1000000}) {
      const double shifted = Dot(Rotate(spec_, q, delta + shift), Rotate(spec_, k, shift));
      EXPECT_NEAR(shifted, base, 2e-5 * Norm(q) * Norm(k)) << "delta " << delta << " shift " << shift;
    }
  }
}

TEST_P(RopeProperties, RotationPreservesNorms) {
  const auto x = RandomVector(3);
  for (std::int64_t p : {0, 5, 123456, 1000000}) {
    EXPECT_NEAR(Norm(Rotate(spec_, x, p)), Norm(x), 1e-6 * Norm(x));
  }
}

TEST_P(RopeProperties, InverseAfterForwardIsIdentity) {
  const auto x = RandomVector(4);
  for (std::int64_t p : {1, 777, 1000000}) {
    const auto back = Rotate(spec_, Rotate(spec_, x, p), p, RopeDirection::kInverse);
    for (std::size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(back[i], x[i], 1e-6 * Norm(x)) << i;
  }
}

// The backward pass is the adjoint: <R g, x> = <g, R^T x>... i.e. <y, Rx> = <R^T y, x>.
TEST_P(RopeProperties, BackwardIsTheAdjoint) {
  const auto x = RandomVector(5), g = RandomVector(6);
  const double lhs = Dot(g, Rotate(spec_, x, 4242));
  const double rhs = Dot(Rotate(spec_, g, 4242, RopeDirection::kBackward), x);
  EXPECT_NEAR(lhs, rhs, 1e-5 * Norm(x) * Norm(g));
}

// f32 output within 1e-5 of the row norm of a float64 computation at
// positions up to 10^6 (angles formed and reduced in double).
TEST_P(RopeProperties, LargePositionsStayAccurateAgainstFloat64) {
  const auto x = RandomVector(7);
  double worst = 0;
  for (std::int64_t p : {0, 1, 4096, 32768, 131071, 524287, 999999, 1000000}) {
    const auto fast = Rotate(spec_, x, p);
    const auto exact = RotateDouble(spec_, x, static_cast<double>(p));
    for (std::size_t i = 0; i < x.size(); ++i) worst = std::max(worst, std::abs(fast[i] - exact[i]) / Norm(x));
  }
  RecordProperty("max_relative_error_at_1e6", std::to_string(worst));
  EXPECT_LT(worst, 1e-6);  // the floor is 1e-5; we are at float32 rounding
}

INSTANTIATE_TEST_SUITE_P(Layouts, RopeProperties, ::testing::Values(RopeLayout::kInterleaved, RopeLayout::kHalfSplit),
                         [](const auto& info) {
                           return info.param == RopeLayout::kInterleaved ? "Interleaved" : "HalfSplit";
                         });

TEST(RopePositions, OffsetsAndPositionIdsAgreeBitwise) {
  const RopeSpec spec{.theta = 500000, .head_dim = 64};
  const std::int64_t batch = 3, seq = 11;
  auto a = RandomVector(8, batch * seq * 2 * 64);
  auto b = a;
  const std::vector<std::int64_t> offsets{0, 9, 100000};
  std::vector<std::int64_t> ids;
  for (std::int64_t r = 0; r < batch; ++r)
    for (std::int64_t s = 0; s < seq; ++s) ids.push_back(offsets[r] + s);
  ApplyRope(spec, RopeCall{{RopeOperand::InPlace(TensorView::Contiguous(a.data(), DType::kF32, {batch, seq, 2, 64}))},
                           RopePositions::Offsets(offsets)});
  ApplyRope(spec, RopeCall{{RopeOperand::InPlace(TensorView::Contiguous(b.data(), DType::kF32, {batch, seq, 2, 64}))},
                           RopePositions::Ids(ids)});
  EXPECT_EQ(a, b);
}

// Meta's weights rotate interleaved pairs; Hugging Face permutes W_q, W_k and
// rotates half-split. Attention scores must agree.
TEST(RopeLayouts, InterleavedOnOriginalWeightsEqualsHalfSplitOnPermuted) {
  const std::int64_t heads = 2, head_dim = 16, hidden = 24;
  auto wq = RandomVector(9, heads * head_dim * hidden), wk = RandomVector(10, heads * head_dim * hidden);
  const auto x_q = RandomVector(11, hidden), x_k = RandomVector(12, hidden);
  const auto project = [&](const std::vector<float>& w, const std::vector<float>& x) {
    std::vector<float> y(static_cast<std::size_t>(heads * head_dim));
    for (std::size_t r = 0; r < y.size(); ++r)
      for (std::int64_t c = 0; c < hidden; ++c) y[r] += w[r * hidden + c] * x[c];
    return y;
  };
  const auto scores = [&](RopeLayout layout, const std::vector<float>& q_w, const std::vector<float>& k_w) {
    const RopeSpec spec{.theta = 10000, .head_dim = head_dim, .layout = layout};
    auto q = project(q_w, x_q), k = project(k_w, x_k);
    ApplyRope(spec,
              RopeCall{{RopeOperand::InPlace(TensorView::Contiguous(q.data(), DType::kF32, {1, 1, heads, head_dim}))},
                       RopePositions::Offset(37)});
    ApplyRope(spec,
              RopeCall{{RopeOperand::InPlace(TensorView::Contiguous(k.data(), DType::kF32, {1, 1, heads, head_dim}))},
                       RopePositions::Offset(5)});
    std::vector<double> s;
    for (std::int64_t h = 0; h < heads; ++h) {
      double dot = 0;
      for (std::int64_t d = 0; d < head_dim; ++d) dot += q[h * head_dim + d] * k[h * head_dim + d];
      s.push_back(dot);
    }
    return s;
  };
  const auto original = scores(RopeLayout::kInterleaved, wq, wk);
  for (auto* w : {&wq, &wk}) {
    PermuteQkRows(w->data(), hidden * sizeof(float), heads, head_dim, head_dim,
                  PermuteDirection::kInterleavedToHalfSplit);
  }
  const auto permuted = scores(RopeLayout::kHalfSplit, wq, wk);
  for (std::int64_t h = 0; h < heads; ++h) EXPECT_NEAR(permuted[h], original[h], 1e-4) << h;
}

}  // namespace
}  // namespace posenc
