// The tiny language model's API: scheme names, config rules, tensors and
// their deterministic init, the KERPLE parameterization, evaluation past
// the training length, bitwise results for 1, 2 and 3 threads, and call
// errors. (Loss and gradients against float64: tiny_lm_gradient_test.cc.)
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "posenc/alibi.h"
#include "posenc/parallel.h"
#include "posenc/t5_bias.h"
#include "test_util.h"
#include "tiny_lm_test_util.h"
#include "train/tiny_lm_internal.h"

namespace posenc {
namespace {

using testing::ExpectError;
using testing::RandomBytes;
using testing::RandomTinyParams;
using testing::TinyConfig;

TEST(TinyLmNames, RoundTripAndUnknownName) {
  std::vector<std::string> names;
  for (const PositionScheme scheme : AllPositionSchemes()) {
    names.emplace_back(PositionSchemeName(scheme));
    EXPECT_EQ(ParsePositionScheme(PositionSchemeName(scheme)), scheme);
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{"nope", "sinusoidal", "learned", "shaw", "t5", "alibi", "rope", "kerple"}));
  ExpectError([] { ParsePositionScheme("xpos"); },
              {"[tiny_lm] scheme = \"xpos\"", "nope, sinusoidal, learned, shaw, t5, alibi, rope, kerple"});
  EXPECT_EQ(ParseLearnedPastTable("hierarchical"), LearnedPastTable::kHierarchical);
  ExpectError([] { ParseLearnedPastTable("clamp"); }, {"learned_past_table = \"clamp\"", "error, hierarchical"});
}

TEST(TinyLmConfig, DefaultsAndGridAreValid) {
  EXPECT_NO_THROW(ValidateTinyLmConfig(TinyLmConfig{}));
  for (const PositionScheme scheme : AllPositionSchemes()) {
    for (const testing::TinyShape& shape : testing::kTinyGrid) {
      EXPECT_NO_THROW(ValidateTinyLmConfig(TinyConfig(scheme, shape)));
    }
  }
}

TEST(TinyLmConfig, ErrorsNameParameterValueAndRule) {
  const auto with = [](auto change) {
    TinyLmConfig config;
    change(config);
    return [config] { ValidateTinyLmConfig(config); };
  };
  ExpectError(with([](TinyLmConfig& c) { c.train_length = 1; }), {"[tiny_lm] train_length = 1", "[2, "});
  ExpectError(with([](TinyLmConfig& c) { c.heads = 5; }), {"heads = 5", "must divide d_model = 128"});
  ExpectError(with([](TinyLmConfig& c) { c.d_model = 0; }), {"d_model = 0"});
  ExpectError(with([](TinyLmConfig& c) { c.ffn_hidden = -3; }), {"ffn_hidden = -3"});
  ExpectError(with([](TinyLmConfig& c) { c.layers = 0; }), {"layers = 0"});
  ExpectError(with([](TinyLmConfig& c) { c.norm_eps = 0; }), {"norm_eps = 0", "> 0"});
  ExpectError(with([](TinyLmConfig& c) { c.d_model = 12, c.heads = 4; }), {"head_dim = 3", "even for rope"});
  ExpectError(with([](TinyLmConfig& c) { c.rope_theta = 1; }), {"rope_theta = 1"});
  ExpectError(with([](TinyLmConfig& c) { c.scheme = PositionScheme::kShaw, c.shaw_clip = 0; }), {"shaw_clip = 0"});
  ExpectError(with([](TinyLmConfig& c) { c.scheme = PositionScheme::kT5, c.t5_buckets = 1; }), {"t5_buckets = 1"});
  ExpectError(with([](TinyLmConfig& c) { c.scheme = PositionScheme::kT5, c.t5_max_distance = 16; }),
              {"t5_max_distance = 16", "t5_buckets / 2 = 16"});
  // An odd head_dim is fine without rope.
  EXPECT_NO_THROW(with([](TinyLmConfig& c) { c.d_model = 12, c.heads = 4, c.scheme = PositionScheme::kAlibi; })());
}

TEST(TinyLmParams, NamesShapesAndOrder) {
  TinyLmConfig config = TinyConfig(PositionScheme::kShaw, testing::kTinyGrid[1]);
  TinyLmParams params = ZeroTinyLmParams(config);
  std::vector<std::string> names;
  for (const TinyLmTensor* t : TinyLmTensorList(config, params)) names.push_back(t->name);
  const std::vector<std::string> block = {"attn_norm",  "attn_qkv", "attn_output", "attn_rel_k",
                                          "attn_rel_v", "ffn_norm", "ffn_up",      "ffn_down"};
  std::vector<std::string> expected = {"token_embd.weight"};
  for (int l = 0; l < 2; ++l) {
    for (const std::string& b : block) expected.push_back("blk." + std::to_string(l) + "." + b + ".weight");
  }
  expected.emplace_back("output_norm.weight");
  EXPECT_EQ(names, expected);
  EXPECT_EQ(params.blocks[1].attn_qkv.shape, (std::vector<std::int64_t>{36, 12}));
  EXPECT_EQ(params.blocks[0].attn_rel_k.shape, (std::vector<std::int64_t>{7, 4}));
  EXPECT_EQ(params.blocks[0].ffn_down.shape, (std::vector<std::int64_t>{12, 13}));
  EXPECT_TRUE(params.position_embd.name.empty());

  config.scheme = PositionScheme::kT5;
  EXPECT_EQ(ZeroTinyLmParams(config).attn_rel_b.shape, (std::vector<std::int64_t>{4, 3}));
  config.scheme = PositionScheme::kLearned;
  EXPECT_EQ(ZeroTinyLmParams(config).position_embd.shape, (std::vector<std::int64_t>{7, 12}));
  config.scheme = PositionScheme::kKerple;
  EXPECT_EQ(ZeroTinyLmParams(config).blocks[1].attn_kerple_r2.name, "blk.1.attn_kerple_r2.weight");

  TinyLmParams wrong = ZeroTinyLmParams(config);
  wrong.blocks[0].ffn_up.shape = {12, 13};
  ExpectError([&] { ValidateTinyLmParams(config, wrong); },
              {"blk.0.ffn_up.weight shape = [12, 13]", "must be [13, 12]"});
  wrong.blocks.pop_back();
  ExpectError([&] { ValidateTinyLmParams(config, wrong); }, {"params.blocks.size() = 1", "layers = 2"});
  // Params of another scheme do not fit.
  ExpectError(
      [&] {
        ValidateTinyLmParams(config, ZeroTinyLmParams(TinyConfig(PositionScheme::kRope, {12, 3, 2, 13, 7, 2})));
      },
      {"tensor name", "blk.0.attn_kerple_r1.weight"});
}

TEST(TinyLmParams, InitIsDeterministicAndSharedAcrossSchemes) {
  TinyLmConfig config = TinyConfig(PositionScheme::kRope, testing::kTinyGrid[2]);
  const TinyLmParams a = InitTinyLm(config, 42);
  EXPECT_EQ(a.token_embd.values, InitTinyLm(config, 42).token_embd.values);
  EXPECT_NE(a.token_embd.values, InitTinyLm(config, 43).token_embd.values);
  config.scheme = PositionScheme::kAlibi;
  const TinyLmParams b = InitTinyLm(config, 42);
  EXPECT_EQ(a.blocks[1].attn_qkv.values, b.blocks[1].attn_qkv.values);
  // Golden values: the same on every machine (SplitMix64 + Box-Muller, no
  // std::normal_distribution).
  // A change of the formula (seeding, counters, Box-Muller) shows here.
  EXPECT_EQ(a.token_embd.values[0], -0.00995927863f);
  EXPECT_EQ(a.token_embd.values[1], 0.0158744957f);
  EXPECT_EQ(a.token_embd.values[2], 0.0201459602f);
  EXPECT_EQ(a.blocks[1].ffn_down.values[5], -0.00460091606f);
  // Moments: normal(0, 0.02), residual projections / sqrt(2 layers).
  const auto moments = [](const std::vector<float>& v) {
    double sum = 0, squares = 0;
    for (const float x : v) sum += x, squares += static_cast<double>(x) * x;
    const double mean = sum / static_cast<double>(v.size());
    return std::pair{mean, std::sqrt(squares / static_cast<double>(v.size()) - mean * mean)};
  };
  const auto [mean, stddev] = moments(a.token_embd.values);  // 6144 values
  EXPECT_NEAR(mean, 0.0, 0.001);
  EXPECT_NEAR(stddev, 0.02, 0.001);
  EXPECT_NEAR(moments(a.blocks[0].attn_qkv.values).second, 0.02, 0.002);
  EXPECT_NEAR(moments(a.blocks[0].ffn_down.values).second, 0.01, 0.001);  // 0.02 / sqrt(4)
  EXPECT_EQ(a.blocks[0].attn_norm.values, std::vector<float>(24, 1.0f));
  // KERPLE: r1 in [0.01, 2), r2 in [0.01, 1) through softplus.
  config.scheme = PositionScheme::kKerple;
  const TinyLmParams k = InitTinyLm(config, 42);
  for (const float raw : k.blocks[0].attn_kerple_r1.values) {
    EXPECT_GE(tiny_lm::Softplus(raw), 0.0099);
    EXPECT_LT(tiny_lm::Softplus(raw), 2.0);
  }
}

// KERPLE-log with r = softplus(raw): the bias is -r1 log(1 + r2 delta), r > 0
// for any raw (no clamp needed), so the bias never rewards distance.
TEST(TinyLmKerple, SoftplusParameterization) {
  TinyLmConfig config = TinyConfig(PositionScheme::kKerple, testing::kTinyGrid[0]);
  TinyLmParams params = ZeroTinyLmParams(config);
  const double r1 = 1.5, r2 = 0.25;
  params.blocks[0].attn_kerple_r1.values = {static_cast<float>(std::log(std::expm1(r1))), -40.0f};
  params.blocks[0].attn_kerple_r2.values = {static_cast<float>(std::log(std::expm1(r2))), -40.0f};
  const std::vector<double> bias = tiny_lm::DistanceBias(config, params, 0, 5);
  for (int delta = 0; delta < 5; ++delta) {
    EXPECT_NEAR(bias[delta], -r1 * std::log(1 + r2 * delta), 1e-6) << delta;
    EXPECT_LE(bias[5 + delta], 0.0);  // head 1: r = softplus(-40) = 4e-18 > 0
  }
  EXPECT_GT(tiny_lm::Softplus(-40.0), 0.0);
  EXPECT_NEAR(tiny_lm::Softplus(40.0), 40.0, 1e-12);
  EXPECT_NEAR(tiny_lm::Sigmoid(0.0), 0.5, 1e-15);
}

// ALiBi and T5 distance biases are the library's (AlibiBias, T5Bias).
TEST(TinyLmPositions, DistanceBiasesAreTheLibrarys) {
  const std::int64_t length = 9;
  TinyLmConfig config = TinyConfig(PositionScheme::kAlibi, testing::kTinyGrid[2]);
  TinyLmParams params = RandomTinyParams(config, 1);
  std::vector<double> table = tiny_lm::DistanceBias(config, params, 0, length);
  const std::vector<double> alibi = AlibiBias(AlibiSpec{.heads = 3}, length, length, 0);
  config.scheme = PositionScheme::kT5;
  params = RandomTinyParams(config, 1);
  const std::vector<double> t5_table = tiny_lm::DistanceBias(config, params, 1, length);
  const std::vector<double> weights(params.attn_rel_b.values.begin(), params.attn_rel_b.values.end());
  const std::vector<double> t5 =
      T5Bias(T5BucketSpec{.num_buckets = 4, .max_distance = 6, .direction = T5Direction::kCausal}, weights, 3, length,
             length, 0);
  for (std::int64_t h = 0; h < 3; ++h) {
    for (std::int64_t i = 0; i < length; ++i) {
      for (std::int64_t j = 0; j <= i; ++j) {
        EXPECT_EQ(table[h * length + i - j], alibi[(h * length + i) * length + j]);
        EXPECT_EQ(t5_table[h * length + i - j], t5[(h * length + i) * length + j]);
      }
    }
  }
}

// Train at 6, evaluate at 11: every scheme but a plain learned table runs,
// and matches the float64 reference there.
TEST(TinyLmPastTrainLength, EverySchemeButLearned) {
  for (const PositionScheme scheme : AllPositionSchemes()) {
    TinyLmConfig config = TinyConfig(scheme, {12, 3, 2, 13, 6, 2});
    const TinyLmParams params = RandomTinyParams(config, 9);
    const std::vector<std::uint8_t> tokens = RandomBytes(2, 11, 4);
    if (scheme == PositionScheme::kLearned) {
      ExpectError([&] { TinyLmLoss(config, params, tokens, 2, 11); },
                  {"[tiny_lm] position = 6", "learned position table of 6 rows", "hierarchical"});
      ExpectError([&] { reference::TinyLmLoss(config, params, tokens, 2, 11); }, {"position = 6"});
      config.learned_past_table = LearnedPastTable::kHierarchical;
    }
    SCOPED_TRACE(PositionSchemeName(scheme));
    const TinyLmLossResult fast = TinyLmLoss(config, params, tokens, 2, 11);
    const TinyLmLossResult exact = reference::TinyLmLoss(config, params, tokens, 2, 11);
    EXPECT_NEAR(fast.loss, exact.loss, 1e-5 * exact.loss);
    EXPECT_NEAR(fast.position_loss[10], exact.position_loss[10], 1e-5 * exact.position_loss[10]);
    TinyLmParams grads;
    ExpectError([&] { TinyLmLoss(config, params, tokens, 2, 11, &grads); },
                {"length = 11", "train_length = 6 when gradients are requested"});
  }
}

TEST(TinyLmPastTrainLength, HierarchicalReachesTrainLengthSquared) {
  TinyLmConfig config = TinyConfig(PositionScheme::kLearned, {12, 3, 1, 13, 3, 1});
  config.learned_past_table = LearnedPastTable::kHierarchical;
  const TinyLmParams params = RandomTinyParams(config, 2);
  EXPECT_NO_THROW(TinyLmLoss(config, params, RandomBytes(1, 9, 1), 1, 9));
  ExpectError([&] { TinyLmLoss(config, params, RandomBytes(1, 10, 1), 1, 10); }, {"length = 10", "train_length^2 = 9"});
}

// Bitwise the same loss and gradients for 1, 2 and 3 threads, on a shape
// large enough that attention, the row steps and MatMul split.
TEST(TinyLmThreads, BitwiseIdenticalForOneTwoThreeThreads) {
  const int saved = NumThreads();
  for (const PositionScheme scheme : AllPositionSchemes()) {
    SCOPED_TRACE(PositionSchemeName(scheme));
    const TinyLmConfig config = TinyConfig(scheme, {48, 3, 2, 97, 64, 3});
    const TinyLmParams params = RandomTinyParams(config, 21);
    const std::vector<std::uint8_t> tokens = RandomBytes(3, 64, 22);
    std::vector<std::pair<TinyLmLossResult, TinyLmParams>> runs;
    for (const int threads : {1, 2, 3}) {
      SetNumThreads(threads);
      TinyLmParams grads;
      TinyLmLossResult result = TinyLmLoss(config, params, tokens, 3, 64, &grads);
      runs.emplace_back(std::move(result), std::move(grads));
    }
    for (std::size_t r = 1; r < runs.size(); ++r) {
      EXPECT_EQ(std::bit_cast<std::uint64_t>(runs[r].first.loss), std::bit_cast<std::uint64_t>(runs[0].first.loss));
      EXPECT_EQ(runs[r].first.position_loss, runs[0].first.position_loss);
      const auto a = TinyLmTensorList(config, std::as_const(runs[0].second));
      const auto b = TinyLmTensorList(config, std::as_const(runs[r].second));
      for (std::size_t t = 0; t < a.size(); ++t) {
        EXPECT_EQ(std::memcmp(a[t]->values.data(), b[t]->values.data(), a[t]->values.size() * sizeof(float)), 0)
            << a[t]->name << " with " << r + 1 << " threads";
      }
    }
  }
  SetNumThreads(saved);
}

TEST(TinyLmLoss, CallErrors) {
  const TinyLmConfig config = TinyConfig(PositionScheme::kRope, testing::kTinyGrid[0]);
  const TinyLmParams params = InitTinyLm(config, 1);
  const std::vector<std::uint8_t> tokens = RandomBytes(1, 5, 1);
  ExpectError([&] { TinyLmLoss(config, params, tokens, 1, 4); }, {"tokens.size() = 6", "batch * (length + 1) = 5"});
  ExpectError([&] { TinyLmLoss(config, params, tokens, 0, 5); }, {"batch = 0"});
  ExpectError([&] { TinyLmLoss(config, params, {}, 1, 0); }, {"length = 0"});
  ExpectError(
      [&] {
        TinyLmLoss(config, ZeroTinyLmParams(TinyConfig(PositionScheme::kNope, testing::kTinyGrid[1])), tokens, 1, 5);
      },
      {"params.blocks.size() = 2", "layers = 1"});
  TinyLmParams same = params;
  ExpectError([&] { TinyLmLoss(config, same, tokens, 1, 5, &same); }, {"grads = &params"});
  // Gradients come with the names and shapes of the params.
  TinyLmParams grads;
  TinyLmLoss(config, params, tokens, 1, 5, &grads);
  EXPECT_NO_THROW(ValidateTinyLmParams(config, grads));
}

}  // namespace
}  // namespace posenc
