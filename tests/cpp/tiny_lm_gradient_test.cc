// The tiny model's float32 loss against the float64 reference, and its
// gradients against central differences of the reference, for every scheme
// over a grid of odd shapes; every tensor of every scheme is sampled.
//
// Consistency checks, not oracles: the reference shares the schemes'
// forward terms with the float32 path (tiny_lm_reference.cc), so they hold
// the float32 glue and every backward to that forward. The forward terms
// themselves are held to outside oracles by
// tests/python/test_torch_schemes.py::test_a_model_written_from_the_papers_matches_the_trainer
// (this TinyLmLoss against a model whose positional terms come from Hugging
// Face and the papers) and, for XLNet and DeBERTa, tiny_lm_oracle_test.cc.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "test_util.h"
#include "tiny_lm_test_util.h"

namespace posenc {
namespace {

using testing::GradientClose;
using testing::kTinyGrid;
using testing::kTinyGridWithPositions;
using testing::RandomBytes;
using testing::RandomTinyParams;
using testing::ShapePositions;
using testing::TinyConfig;

class TinyLmScheme : public ::testing::TestWithParam<PositionScheme> {};

TEST_P(TinyLmScheme, LossConsistentWithFloat64Reference) {
  double worst = 0;
  for (const testing::TinyShape& shape : kTinyGridWithPositions) {
    const TinyLmConfig config = TinyConfig(GetParam(), shape);
    const TinyLmParams params = RandomTinyParams(config, 7);
    const std::vector<std::uint8_t> tokens = RandomBytes(shape.batch, shape.length, 11);
    const std::vector<std::int64_t> positions = ShapePositions(shape);
    const TinyLmLossResult fast = TinyLmLoss(config, params, tokens, shape.batch, shape.length, nullptr, {}, positions);
    const TinyLmLossResult exact = reference::TinyLmLoss(config, params, tokens, shape.batch, shape.length, positions);
    ASSERT_EQ(fast.position_loss.size(), static_cast<std::size_t>(shape.length));
    EXPECT_NEAR(fast.loss, exact.loss, 1e-5 * exact.loss);
    for (std::int64_t t = 0; t < shape.length; ++t) {
      EXPECT_NEAR(fast.position_loss[t], exact.position_loss[t], 1e-5 * exact.position_loss[t]) << "t = " << t;
    }
    // Each prediction's loss too (a sliding evaluation scores some of them).
    ASSERT_EQ(fast.token_loss.size(), static_cast<std::size_t>(shape.batch * shape.length));
    ASSERT_EQ(exact.token_loss.size(), fast.token_loss.size());
    for (std::size_t n = 0; n < fast.token_loss.size(); ++n) {
      EXPECT_NEAR(fast.token_loss[n], exact.token_loss[n], 1e-5 * exact.token_loss[n]) << "row " << n;
    }
    worst = std::max(worst, std::abs(fast.loss - exact.loss) / exact.loss);
    // The loss is the mean of the position losses, and near ln 256 for random bytes.
    double mean = 0;
    for (const double l : exact.position_loss) mean += l / static_cast<double>(shape.length);
    EXPECT_NEAR(exact.loss, mean, 1e-12);
    EXPECT_GT(exact.loss, 3.0);
  }
  std::printf("[%s] worst relative loss error vs float64: %.2e\n", std::string(PositionSchemeName(GetParam())).c_str(),
              worst);
}

// d loss / d (tensor t, element e) of the float64 reference by central
// differences. The step is the float32 one actually taken: the reference
// reads float32 parameters.
double NumericGradient(const TinyLmConfig& config, TinyLmParams& params, std::size_t t, std::size_t e,
                       const std::vector<std::uint8_t>& tokens, std::int64_t batch, std::int64_t length,
                       std::span<const std::int64_t> positions = {}) {
  float& value = TinyLmTensorList(config, params)[t]->values[e];
  const float original = value;
  constexpr double kStep = 1e-4;
  const auto plus = static_cast<float>(original + kStep), minus = static_cast<float>(original - kStep);
  value = plus;
  const double loss_plus = reference::TinyLmLoss(config, params, tokens, batch, length, positions).loss;
  value = minus;
  const double loss_minus = reference::TinyLmLoss(config, params, tokens, batch, length, positions).loss;
  value = original;
  return (loss_plus - loss_minus) / (static_cast<double>(plus) - static_cast<double>(minus));
}

// The entries checked per tensor: the first, the last, the largest analytic
// gradient and three random ones.
std::vector<std::size_t> Samples(const std::vector<float>& grad, std::mt19937& rng) {
  std::vector<std::size_t> picks{0, grad.size() - 1};
  const auto largest =
      std::max_element(grad.begin(), grad.end(), [](float a, float b) { return std::abs(a) < std::abs(b); });
  picks.push_back(static_cast<std::size_t>(largest - grad.begin()));
  std::uniform_int_distribution<std::size_t> any(0, grad.size() - 1);
  for (int i = 0; i < 3; ++i) picks.push_back(any(rng));
  return picks;
}

// A model of `scheme` at `shape` with random parameters and bytes, and its
// float32 gradients: the problem both tests below check.
struct GradientProblem {
  GradientProblem(const PositionScheme& scheme, const testing::TinyShape& shape)
      : config(TinyConfig(scheme, shape)), params(RandomTinyParams(config, 5)),
        tokens(RandomBytes(shape.batch, shape.length, 13)), positions(ShapePositions(shape)) {
    TinyLmLoss(config, params, tokens, shape.batch, shape.length, &grads, {}, positions);
  }
  TinyLmConfig config;
  TinyLmParams params;  // NumericGradient nudges one entry and restores it
  std::vector<std::uint8_t> tokens;
  std::vector<std::int64_t> positions;
  TinyLmParams grads;
};

struct Worst {
  double abs = 0, rel = 0;  // rel over entries with |fd| >= 1e-3
  std::string where;
};

TEST_P(TinyLmScheme, GradientsMatchFiniteDifferences) {
  Worst worst;
  std::mt19937 rng(3);
  for (const testing::TinyShape& shape : kTinyGridWithPositions) {
    GradientProblem p(GetParam(), shape);
    const std::vector<const TinyLmTensor*> list = TinyLmTensorList(p.config, std::as_const(p.grads));
    for (std::size_t t = 0; t < list.size(); ++t) {
      const TinyLmTensor& grad = *list[t];
      double largest = 0;
      for (const std::size_t e : Samples(grad.values, rng)) {
        const double numeric =
            NumericGradient(p.config, p.params, t, e, p.tokens, shape.batch, shape.length, p.positions);
        const double analytic = grad.values[e];
        EXPECT_PRED2(GradientClose, analytic, numeric)
            << grad.name << "[" << e << "], d_model " << shape.d_model << ", position_range " << shape.position_range;
        largest = std::max(largest, std::abs(numeric));
        const double err = std::abs(analytic - numeric);
        if (err > worst.abs) worst.abs = err;
        if (std::abs(numeric) >= 1e-3 && err / std::abs(numeric) > worst.rel) {
          worst.rel = err / std::abs(numeric);
          worst.where = grad.name + "[" + std::to_string(e) + "]";
        }
      }
      // Every tensor is really checked: some sampled entry has a gradient.
      EXPECT_GT(largest, 1e-4) << grad.name << " had no sampled gradient to compare";
    }
  }
  std::printf("[%s] worst gradient error vs finite differences: abs %.2e, rel %.2e (%s)\n",
              std::string(PositionSchemeName(GetParam())).c_str(), worst.abs, worst.rel, worst.where.c_str());
  EXPECT_LE(worst.rel, 2e-4) << worst.where;  // the vocabulary's floor for every scheme
}

INSTANTIATE_TEST_SUITE_P(TinyLm, TinyLmScheme,
                         ::testing::ValuesIn(AllPositionSchemes().begin(), AllPositionSchemes().end()),
                         testing::SchemeTestName);

// The comparison can fail: a gradient 1% off, on the largest entry of each
// tensor of a model, is refused by GradientClose.
TEST(TinyLmGradientCheck, RefusesAGradientOnePercentOff) {
  const testing::TinyShape shape = kTinyGrid[1];
  GradientProblem p(ShawScheme{}, shape);
  const std::vector<const TinyLmTensor*> list = TinyLmTensorList(p.config, std::as_const(p.grads));
  for (std::size_t t = 0; t < list.size(); ++t) {
    const std::vector<float>& g = list[t]->values;
    const auto e = static_cast<std::size_t>(
        std::max_element(g.begin(), g.end(), [](float a, float b) { return std::abs(a) < std::abs(b); }) - g.begin());
    const double numeric = NumericGradient(p.config, p.params, t, e, p.tokens, shape.batch, shape.length);
    EXPECT_TRUE(GradientClose(g[e], numeric)) << list[t]->name;
    EXPECT_FALSE(GradientClose(1.01 * g[e], numeric)) << list[t]->name;
  }
}

}  // namespace
}  // namespace posenc
