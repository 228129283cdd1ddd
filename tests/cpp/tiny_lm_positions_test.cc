// Randomized positions (Ruoss et al. 2023): the draw of an ordered subset,
// a pass at given positions against the plain pass, what the schemes see of
// the positions (relative schemes only their differences), the training
// and evaluation that use them, and the call errors. (Loss and gradients at
// random positions against float64: tiny_lm_gradient_test.cc.)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <variant>
#include <vector>

#include "posenc/tiny_lm_tasks.h"
#include "posenc/tiny_lm_train.h"
#include "test_util.h"
#include "tiny_lm_test_util.h"

namespace posenc {
namespace {

using testing::ExpectError;
using testing::RandomBytes;
using testing::RandomTinyParams;
using testing::TinyConfig;

constexpr testing::TinyShape kShape{12, 2, 2, 13, 7, 2};

TEST(RandomizedPositions, AnOrderedSubsetOfTheRange) {
  for (const std::int64_t range : {7, 8, 40, 1 << 20}) {
    for (std::uint64_t seed = 0; seed < 20; ++seed) {
      const std::vector<std::int64_t> p = RandomizedPositions(range, 7, seed);
      ASSERT_EQ(p.size(), 7u);
      EXPECT_GE(p.front(), 0);
      EXPECT_LT(p.back(), range);
      EXPECT_TRUE(std::adjacent_find(p.begin(), p.end(), std::greater_equal<>()) == p.end()) << "strictly increasing";
      EXPECT_EQ(p, RandomizedPositions(range, 7, seed)) << "a pure function of its arguments";
    }
  }
  std::vector<std::int64_t> all(9);
  std::iota(all.begin(), all.end(), std::int64_t{0});
  EXPECT_EQ(RandomizedPositions(9, 9, 3), all) << "the whole range when length = range";
  EXPECT_NE(RandomizedPositions(100, 5, 1), RandomizedPositions(100, 5, 2));
}

// Every position is equally likely: over 4000 draws of 5 from [0, 20) each
// is drawn with frequency 5/20 (binomial sd 0.0068; the bound is 4.4 sd),
// and so is every pair of neighbours in the output (a sorted uniform
// subset: P(p_0 = 0) = 5/20 too).
TEST(RandomizedPositions, EveryPositionEquallyLikely) {
  constexpr int kDraws = 4000;
  std::vector<int> count(20, 0);
  int first_zero = 0;
  for (int s = 0; s < kDraws; ++s) {
    const std::vector<std::int64_t> p = RandomizedPositions(20, 5, static_cast<std::uint64_t>(s) * 7919);
    for (const std::int64_t x : p) ++count[static_cast<std::size_t>(x)];
    first_zero += p.front() == 0;
  }
  for (int x = 0; x < 20; ++x) EXPECT_NEAR(count[x] / double{kDraws}, 0.25, 0.03) << "position " << x;
  EXPECT_NEAR(first_zero / double{kDraws}, 0.25, 0.03);
}

TEST(RandomizedPositions, Errors) {
  ExpectError([] { RandomizedPositions(0, 1, 0); }, {"position_range = 0"});
  ExpectError([] { RandomizedPositions(5, 6, 0); }, {"length = 6", "[1, 5]"});
  ExpectError([] { RandomizedPositions(std::int64_t{1} << 21, 3, 0); }, {"position_range = 2097152"});
}

// Positions 0..T-1 given explicitly are the plain pass, bit for bit, and
// so are their gradients, for every scheme.
TEST(TinyLmPositions, ExplicitZeroToTIsThePlainPass) {
  std::vector<std::int64_t> plain(static_cast<std::size_t>(kShape.length));
  std::iota(plain.begin(), plain.end(), std::int64_t{0});
  for (const PositionScheme& scheme : AllPositionSchemes()) {
    const TinyLmConfig config = TinyConfig(scheme, kShape);
    const TinyLmParams params = RandomTinyParams(config, 4);
    const std::vector<std::uint8_t> tokens = RandomBytes(kShape.batch, kShape.length, 6);
    TinyLmParams g1, g2;
    const TinyLmLossResult a = TinyLmLoss(config, params, tokens, kShape.batch, kShape.length, &g1);
    const TinyLmLossResult b = TinyLmLoss(config, params, tokens, kShape.batch, kShape.length, &g2, {}, plain);
    EXPECT_EQ(a.token_loss, b.token_loss) << PositionSchemeName(scheme);
    const std::vector<const TinyLmTensor*> l1 = TinyLmTensorList(config, std::as_const(g1));
    const std::vector<const TinyLmTensor*> l2 = TinyLmTensorList(config, std::as_const(g2));
    for (std::size_t t = 0; t < l1.size(); ++t) EXPECT_EQ(l1[t]->values, l2[t]->values) << l1[t]->name;
  }
}

// Shifting every position by 9 leaves a scheme that sees only p_i - p_j
// where it was (to float32 rounding: RoPE rotates by other angles), and
// moves one that sees positions themselves: the positions reach every
// scheme's terms, as differences where the scheme is relative.
TEST(TinyLmPositions, RelativeSchemesSeeOnlyDifferences) {
  const std::vector<std::int64_t> p = RandomizedPositions(30, kShape.length, 5);
  std::vector<std::int64_t> shifted = p;
  for (std::int64_t& x : shifted) x += 9;
  for (const PositionScheme& scheme : AllPositionSchemes()) {
    TinyLmConfig config = TinyConfig(scheme, kShape);
    config.position_range = 40;
    const TinyLmParams params = RandomTinyParams(config, 4);
    const std::vector<std::uint8_t> tokens = RandomBytes(kShape.batch, kShape.length, 6);
    const double at = TinyLmLoss(config, params, tokens, kShape.batch, kShape.length, nullptr, {}, p).loss;
    const double moved = TinyLmLoss(config, params, tokens, kShape.batch, kShape.length, nullptr, {}, shifted).loss;
    const std::string_view name = PositionSchemeName(scheme);
    // FIRE divides by the query's own log position; complex order, FLOATER,
    // sinusoidal and learned rows are functions of the position.
    const bool absolute =
        name == "sinusoidal" || name == "learned" || name == "fire" || name == "complex-order" || name == "floater";
    if (absolute) {
      EXPECT_GT(std::abs(at - moved), 1e-4) << name;
    } else {
      EXPECT_NEAR(at, moved, 1e-5 * at) << name;
    }
  }
}

// A pass at distances 1, 2, 3 ... is not one at 2, 4, 6 ...: spreading the
// positions changes what every positional scheme computes (NoPE excepted).
TEST(TinyLmPositions, SpreadPositionsChangeEverySchemeButNope) {
  std::vector<std::int64_t> spread(static_cast<std::size_t>(kShape.length));
  for (std::size_t t = 0; t < spread.size(); ++t) spread[t] = 2 * static_cast<std::int64_t>(t);
  for (const PositionScheme& scheme : AllPositionSchemes()) {
    TinyLmConfig config = TinyConfig(scheme, kShape);
    config.position_range = 14;
    const TinyLmParams params = RandomTinyParams(config, 4);
    const std::vector<std::uint8_t> tokens = RandomBytes(kShape.batch, kShape.length, 6);
    const double plain = TinyLmLoss(config, params, tokens, kShape.batch, kShape.length).loss;
    const double at = TinyLmLoss(config, params, tokens, kShape.batch, kShape.length, nullptr, {}, spread).loss;
    if (std::holds_alternative<NopeScheme>(scheme)) {
      EXPECT_EQ(plain, at);
    } else {
      EXPECT_GT(std::abs(plain - at), 1e-4) << PositionSchemeName(scheme);
    }
  }
}

TEST(TinyLmPositions, CallErrors) {
  TinyLmConfig config = TinyConfig(AlibiScheme{}, kShape);
  config.position_range = 20;
  const TinyLmParams params = RandomTinyParams(config, 1);
  const std::vector<std::uint8_t> tokens = RandomBytes(1, 7, 2);
  TinyLmParams grads;
  const auto loss = [&](std::vector<std::int64_t> positions, TinyLmParams* g = nullptr) {
    return [&, positions, g] { TinyLmLoss(config, params, tokens, 1, 7, g, {}, positions); };
  };
  ExpectError(loss({0, 1, 2}), {"positions.size() = 3", "must be length = 7"});
  ExpectError(loss({0, 1, 2, 2, 4, 5, 6}), {"positions[3] = 2", "> positions[2] = 2"});
  ExpectError(loss({-1, 1, 2, 3, 4, 5, 6}), {"positions[0] = -1", ">= 0"});
  ExpectError(loss({0, 1, 2, 3, 4, 5, 20}, &grads), {"positions[length - 1] = 20", "< 20", "gradients"});
  EXPECT_NO_THROW(loss({0, 1, 2, 3, 4, 5, 19}, &grads)());
  EXPECT_NO_THROW(loss({0, 1, 2, 3, 4, 5, 20})());  // evaluation may reach past the range
  ExpectError(
      [&] {
        TinyLmConfig c = config;
        c.position_range = 6, ValidateTinyLmConfig(c);
      },
      {"position_range = 6", "train_length = 7"});
}

// A learned table of a randomized model has a row per position of the
// range; training with randomized positions is deterministic, draws new
// positions every step (its models differ from plain training's), and
// its evaluation refuses lengths past the range.
TEST(TinyLmPositions, TrainingAndEvaluation) {
  TinyLmConfig config = TinyConfig(LearnedScheme{}, kShape);
  config.position_range = 30;
  EXPECT_EQ(ZeroTinyLmParams(config).Tensor("position_embd.weight").shape,
            (std::vector<std::int64_t>{30, kShape.d_model}));
  const TinyLmTrainOptions options{.tokens = 7 * 4 * 6, .batch = 4, .seed = 3, .lr = 1e-2};
  const std::vector<std::uint8_t> corpus = RandomBytes(1, 500, 8);
  const TinyLmTrainResult a = TrainTinyLm(config, options, corpus);
  const TinyLmTrainResult b = TrainTinyLm(config, options, corpus);
  EXPECT_EQ(a.params.Tensor("position_embd.weight").values, b.params.Tensor("position_embd.weight").values);
  // Rows past the training length were trained: the positions reached them.
  const TinyLmParams init = InitTinyLm(config, 3);
  const std::vector<float>& trained = a.params.Tensor("position_embd.weight").values;
  const std::vector<float>& initial = init.Tensor("position_embd.weight").values;
  double moved_past_length = 0;
  for (std::size_t e = static_cast<std::size_t>(kShape.length * kShape.d_model); e < trained.size(); ++e) {
    moved_past_length = std::max(moved_past_length, static_cast<double>(std::abs(trained[e] - initial[e])));
  }
  EXPECT_GT(moved_past_length, 1e-3);
  ExpectError([&] { EvaluateTinyLmTask(config, a.params, TinyLmTask::kCopy, 31, 2, 0); },
              {"length = 31", "position_range = 30"});
  EXPECT_NO_THROW(EvaluateTinyLmTask(config, a.params, TinyLmTask::kCopy, 30, 2, 0));
}

}  // namespace
}  // namespace posenc
