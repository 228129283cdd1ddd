// The tiny language model's API: scheme names, config rules, tensors and
// their deterministic init, the KERPLE and FIRE parameterizations, the
// trainer's attention against posenc::Attention, evaluation past the
// training length, bitwise results for 1, 2 and 3 threads, and call
// errors. (Loss and gradients against float64: tiny_lm_gradient_test.cc.)
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "posenc/alibi.h"
#include "posenc/parallel.h"
#include "posenc/t5_bias.h"
#include "test_util.h"
#include "tiny_lm_test_util.h"
#include "train/scheme_trainer.h"
#include "train/schemes/rk4.h"
#include "train/tiny_lm_internal.h"

namespace posenc {
namespace {

using testing::ExpectError;
using testing::RandomBytes;
using testing::RandomTinyParams;
using testing::TinyConfig;

double Softplus(double raw) { return std::log1p(std::exp(raw)); }
float InverseSoftplus(double r) { return static_cast<float>(std::log(std::expm1(r))); }

TEST(TinyLmNames, RoundTripAndUnknownName) {
  std::vector<std::string> names;
  for (const PositionScheme& scheme : AllPositionSchemes()) {
    names.emplace_back(PositionSchemeName(scheme));
    EXPECT_EQ(ParsePositionScheme(PositionSchemeName(scheme)), scheme);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"nope", "sinusoidal", "learned", "shaw", "t5", "alibi", "rope", "kerple",
                                             "fire", "xlnet", "deberta", "complex-order", "urpe", "floater"}));
  EXPECT_EQ(PositionSchemeList(),
            "nope, sinusoidal, learned, shaw, t5, alibi, rope, kerple, fire, xlnet, deberta, complex-order, urpe, "
            "floater");
  ExpectError([] { ParsePositionScheme("xpos"); },
              {"[tiny_lm] scheme = \"xpos\"", "kerple, fire, xlnet, deberta, complex-order, urpe, floater"});
  ExpectError([] { ParsePositionScheme("cope", "zoo", "--schemes"); }, {"[zoo] --schemes = \"cope\""});
  EXPECT_EQ(ParseLearnedPastTable("hierarchical"), LearnedPastTable::kHierarchical);
  ExpectError([] { ParseLearnedPastTable("clamp"); }, {"learned_past_table = \"clamp\"", "error, hierarchical"});
}

TEST(TinyLmConfig, DefaultsAndGridAreValid) {
  EXPECT_NO_THROW(ValidateTinyLmConfig(TinyLmConfig{}));
  for (const PositionScheme& scheme : AllPositionSchemes()) {
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
  ExpectError(with([](TinyLmConfig& c) { c.scheme = RopeScheme{.theta = 1}; }), {"rope_theta = 1"});
  ExpectError(with([](TinyLmConfig& c) { c.scheme = ShawScheme{.clip = 0}; }), {"shaw_clip = 0"});
  ExpectError(with([](TinyLmConfig& c) { c.scheme = T5Scheme{.buckets = 1}; }), {"t5_buckets = 1"});
  ExpectError(with([](TinyLmConfig& c) { c.scheme = T5Scheme{.max_distance = 16}; }),
              {"t5_max_distance = 16", "t5_buckets / 2 = 16"});
  ExpectError(with([](TinyLmConfig& c) { c.scheme = FireScheme{.mlp_width = 0}; }), {"fire_mlp_width = 0", "[1, "});
  ExpectError(with([](TinyLmConfig& c) { c.scheme = FireScheme{.c = -1}; }), {"fire_c = -1", "> 0"});
  ExpectError(with([](TinyLmConfig& c) { c.scheme = DebertaScheme{.buckets = 5}; }),
              {"deberta_buckets = 5", "must be even"});
  ExpectError(with([](TinyLmConfig& c) { c.scheme = DebertaScheme{.buckets = 32, .max_relative_positions = 17}; }),
              {"deberta_max_relative_positions = 17", "(deberta_buckets / 2 + 1 = 17, "});
  ExpectError(with([](TinyLmConfig& c) { c.d_model = 9, c.heads = 3, c.scheme = XlnetScheme{}; }),
              {"d_model = 9", "even for xlnet"});
  ExpectError(with([](TinyLmConfig& c) { c.d_model = 9, c.heads = 3, c.scheme = ComplexOrderScheme{}; }),
              {"d_model = 9", "even for complex-order"});
  ExpectError(with([](TinyLmConfig& c) { c.scheme = UrpeScheme{.buckets = 0}; }), {"urpe_buckets = 0", "[2, "});
  ExpectError(with([](TinyLmConfig& c) { c.scheme = FloaterScheme{.substeps = 0}; }),
              {"floater_substeps = 0", "must be in [1, 1000]"});
  ExpectError(with([](TinyLmConfig& c) { c.scheme = FloaterScheme{.dt = -0.5}; }), {"floater_dt = -0.5", "> 0"});
  ExpectError(with([](TinyLmConfig& c) { c.scheme = UrpeScheme{.max_distance = 3}; }),
              {"urpe_max_distance = 3", "urpe_buckets / 2 = 16"});
  // An odd head_dim is fine without rope.
  EXPECT_NO_THROW(with([](TinyLmConfig& c) { c.d_model = 12, c.heads = 4, c.scheme = AlibiScheme{}; })());
  // RoPE's spec is a rope model's.
  ExpectError([] { TinyLmRopeSpec(TinyLmConfig{.scheme = AlibiScheme{}}); },
              {"scheme = \"alibi\"", "rotates no queries and keys"});
}

// The one field list: every scheme's fields once, with a key and a flag of
// their own (the checkpoint keys, grid-file members and flags are these).
TEST(TinyLmConfig, FieldListHasUniqueKeysAndFlags) {
  std::vector<std::string> keys, flags;
  const auto collect = [&](const ConfigField& field, const auto& /*value*/) {
    keys.emplace_back(field.key);
    if (!field.flag.empty()) flags.emplace_back(field.flag);
  };
  const TinyLmConfig defaults;
  TinyLmConfig::VisitModelFields(defaults, collect);
  for (const PositionScheme& scheme : AllPositionSchemes()) VisitSchemeFields(scheme, collect);
  EXPECT_EQ(keys, (std::vector<std::string>{"train_length",
                                            "d_model",
                                            "layers",
                                            "heads",
                                            "ffn_hidden",
                                            "norm_eps",
                                            "position_range",
                                            "shaw_clip",
                                            "t5_buckets",
                                            "t5_max_distance",
                                            "rope_theta",
                                            "fire_mlp_width",
                                            "fire_c",
                                            "deberta_buckets",
                                            "deberta_max_relative_positions",
                                            "urpe_buckets",
                                            "urpe_max_distance",
                                            "floater_hidden",
                                            "floater_substeps",
                                            "floater_dt"}));
  std::vector<std::string> sorted = flags;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end());
  EXPECT_EQ(flags.size(), keys.size() - 1);  // norm_eps has no flag
}

TEST(TinyLmParams, NamesShapesAndOrder) {
  TinyLmConfig config = TinyConfig(ShawScheme{}, testing::kTinyGrid[1]);
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
  EXPECT_EQ(params.Tensor("blk.0.attn_rel_k.weight").shape, (std::vector<std::int64_t>{7, 4}));
  EXPECT_EQ(params.blocks[0].ffn_down.shape, (std::vector<std::int64_t>{12, 13}));
  EXPECT_TRUE(params.scheme.empty());
  ExpectError([&] { params.Tensor("position_embd.weight"); }, {"tensor = \"position_embd.weight\"", "not a tensor"});

  config.scheme = T5Scheme{.buckets = 4, .max_distance = 6};
  EXPECT_EQ(ZeroTinyLmParams(config).Tensor("attn_rel_b.weight").shape, (std::vector<std::int64_t>{4, 3}));
  config.scheme = LearnedScheme{};
  EXPECT_EQ(ZeroTinyLmParams(config).Tensor("position_embd.weight").shape, (std::vector<std::int64_t>{7, 12}));
  config.scheme = FireScheme{.mlp_width = 5};
  const TinyLmParams fire = ZeroTinyLmParams(config);
  std::vector<std::string> fire_names;
  for (const TinyLmTensor& t : fire.blocks[1].scheme) fire_names.push_back(t.name);
  EXPECT_EQ(fire_names, (std::vector<std::string>{"blk.1.attn_fire_up.weight", "blk.1.attn_fire_up.bias",
                                                  "blk.1.attn_fire_down.weight", "blk.1.attn_fire_c",
                                                  "blk.1.attn_fire_threshold"}));
  EXPECT_EQ(fire.Tensor("blk.0.attn_fire_down.weight").shape, (std::vector<std::int64_t>{3, 5}));
  config.scheme = KerpleScheme{};
  EXPECT_EQ(ZeroTinyLmParams(config).blocks[1].scheme[1].name, "blk.1.attn_kerple_r2.weight");

  TinyLmParams wrong = ZeroTinyLmParams(config);
  wrong.blocks[0].ffn_up.shape = {12, 13};
  ExpectError([&] { ValidateTinyLmParams(config, wrong); },
              {"blk.0.ffn_up.weight shape = [12, 13]", "must be [13, 12]"});
  wrong.blocks.pop_back();
  ExpectError([&] { ValidateTinyLmParams(config, wrong); }, {"params.blocks.size() = 1", "layers = 2"});
  // Params of another scheme do not fit.
  ExpectError(
      [&] {
        ValidateTinyLmParams(config, ZeroTinyLmParams(TinyConfig(RopeScheme{}, {12, 3, 2, 13, 7, 2})));
      },
      {"params.blocks[0].scheme.size() = 0", "must be 2: the kerple scheme's tensors"});
  TinyLmParams renamed = ZeroTinyLmParams(config);
  renamed.blocks[0].scheme[0].name = "blk.0.attn_rel_k.weight";
  ExpectError([&] { ValidateTinyLmParams(config, renamed); }, {"tensor name", "blk.0.attn_kerple_r1.weight"});
}

// Weight decay: the model's matrices, never a norm gain or a scheme's tensor.
TEST(TinyLmParams, DecayIsTheModelsMatricesOnly) {
  for (const PositionScheme& scheme : AllPositionSchemes()) {
    const TinyLmConfig config = TinyConfig(scheme, testing::kTinyGrid[1]);
    const TinyLmParams params = ZeroTinyLmParams(config);
    EXPECT_TRUE(params.token_embd.decays);
    EXPECT_FALSE(params.output_norm.decays);
    for (const TinyLmTensor& t : params.scheme) EXPECT_FALSE(t.decays) << t.name;
    for (const TinyLmBlock& block : params.blocks) {
      EXPECT_TRUE(block.attn_qkv.decays && block.attn_output.decays && block.ffn_up.decays && block.ffn_down.decays);
      EXPECT_FALSE(block.attn_norm.decays || block.ffn_norm.decays);
      for (const TinyLmTensor& t : block.scheme) EXPECT_FALSE(t.decays) << t.name;
    }
  }
}

TEST(TinyLmParams, InitIsDeterministicAndSharedAcrossSchemes) {
  TinyLmConfig config = TinyConfig(RopeScheme{}, testing::kTinyGrid[2]);
  const TinyLmParams a = InitTinyLm(config, 42);
  EXPECT_EQ(a.token_embd.values, InitTinyLm(config, 42).token_embd.values);
  EXPECT_NE(a.token_embd.values, InitTinyLm(config, 43).token_embd.values);
  config.scheme = AlibiScheme{};
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
  config.scheme = KerpleScheme{};
  const TinyLmParams k = InitTinyLm(config, 42);
  for (const float raw : k.Tensor("blk.0.attn_kerple_r1.weight").values) {
    EXPECT_GE(Softplus(raw), 0.0099);
    EXPECT_LT(Softplus(raw), 2.0);
  }
  // FIRE: nn.Linear's bounds (1 for the 1-input layer, 1/sqrt(W) after), c
  // and the threshold multiplier at their initial values.
  config.scheme = FireScheme{.mlp_width = 16, .c = 0.25};
  const TinyLmParams f = InitTinyLm(config, 42);
  for (const float w : f.Tensor("blk.1.attn_fire_up.weight").values) EXPECT_LE(std::abs(w), 1.0f);
  for (const float w : f.Tensor("blk.1.attn_fire_down.weight").values) EXPECT_LE(std::abs(w), 0.25f);
  EXPECT_NEAR(moments(f.Tensor("blk.0.attn_fire_down.weight").values).second, 0.25 / std::sqrt(3.0), 0.04);
  EXPECT_EQ(f.Tensor("blk.0.attn_fire_c").values, std::vector<float>{0.25f});
  EXPECT_EQ(f.Tensor("blk.0.attn_fire_threshold").values, std::vector<float>{1.0f});
}

// KERPLE-log with r = softplus(raw): the bias is -r1 log(1 + r2 delta), r > 0
// for any raw (no clamp needed), so the bias never rewards distance.
TEST(TinyLmKerple, SoftplusParameterization) {
  TinyLmConfig config = TinyConfig(KerpleScheme{}, testing::kTinyGrid[0]);
  TinyLmParams params = ZeroTinyLmParams(config);
  const double r1 = 1.5, r2 = 0.25;
  params.Tensor("blk.0.attn_kerple_r1.weight").values = {InverseSoftplus(r1), -40.0f};
  params.Tensor("blk.0.attn_kerple_r2.weight").values = {InverseSoftplus(r2), -40.0f};
  const std::vector<double> bias = tiny_lm::MakeSchemeTrainer(config)->Layer(params, 0, 5).distance_bias;
  for (int delta = 0; delta < 5; ++delta) {
    EXPECT_NEAR(bias[delta], -r1 * std::log(1 + r2 * delta), 1e-6) << delta;
    EXPECT_LE(bias[5 + delta], 0.0);  // head 1: r = softplus(-40) = 4e-18 > 0
  }
}

// FIRE's input: psi(i - j) / psi(max(i, threshold)). Below the threshold
// (train_length here) the bias is a function of the distance alone; past
// it the query's own log position normalizes, so the key at distance i
// (the first token) always reads u = 1: the MLP never leaves [0, 1].
TEST(TinyLmFire, BiasIsRelativeBelowTheThresholdAndInterpolatedPastIt) {
  const std::int64_t train_length = 8, length = 64;
  const TinyLmConfig config = TinyConfig(FireScheme{}, {12, 3, 1, 13, train_length, 1});
  TinyLmParams params = RandomTinyParams(config, 3);
  params.Tensor("blk.0.attn_fire_c").values = {0.5f};  // psi well above the eps of its denominator
  const std::vector<double> bias = tiny_lm::MakeSchemeTrainer(config)->Layer(params, 0, length).pair_bias;
  ASSERT_EQ(bias.size(), static_cast<std::size_t>(3 * length * length));
  const auto at = [&](std::int64_t h, std::int64_t i, std::int64_t delta) {
    return bias[(h * length + i) * length + delta];
  };
  const double threshold = std::abs(params.Tensor("blk.0.attn_fire_threshold").values[0]) * train_length;
  const auto last_below = static_cast<std::int64_t>(std::ceil(threshold)) - 1;  // the last query below it
  ASSERT_GT(last_below, 2);
  for (std::int64_t h = 0; h < 3; ++h) {
    for (std::int64_t i = 0; i < length; ++i) {
      if (static_cast<double>(i) < threshold) {
        for (std::int64_t delta = 0; delta <= i; ++delta) EXPECT_EQ(at(h, i, delta), at(h, last_below, delta));
      } else {
        EXPECT_NEAR(at(h, i, i), at(h, length - 1, length - 1), 1e-5) << "u = 1 at every query past the threshold";
      }
      for (std::int64_t delta = i + 1; delta < length; ++delta) EXPECT_EQ(at(h, i, delta), 0.0);  // never read
    }
  }
}

// Li et al. show FIRE represents KERPLE-log: with one hidden unit
// (weight 1, bias 0: ReLU(u) = u for u >= 0) and output weight -s_h,
// b_h = -s_h log(1 + c (i - j)) / log(1 + c L) below the threshold L, which
// is KERPLE with r1 = s_h / log(1 + c L) and r2 = c. Two schemes written
// apart give the same model loss.
TEST(TinyLmFire, RepresentsKerpleLog) {
  const testing::TinyShape shape{12, 3, 2, 13, 9, 2};
  const double c = 0.7, s[3] = {0.8, 1.9, 0.3};
  TinyLmConfig fire_config = TinyConfig(FireScheme{}, shape);
  fire_config.scheme = FireScheme{.mlp_width = 1};
  TinyLmParams fire = InitTinyLm(fire_config, 5);
  TinyLmConfig kerple_config = TinyConfig(KerpleScheme{}, shape);
  TinyLmParams kerple = InitTinyLm(kerple_config, 5);  // every tensor they share is the same
  const double normalizer = std::log1p(c * static_cast<double>(shape.length)) + 1e-6;  // the authors' eps
  for (int l = 0; l < 2; ++l) {
    const std::string fire_prefix = "blk." + std::to_string(l) + ".attn_fire_";
    const std::string kerple_prefix = "blk." + std::to_string(l) + ".attn_kerple_";
    fire.Tensor(fire_prefix + "up.weight").values = {1.0f};
    fire.Tensor(fire_prefix + "up.bias").values = {0.0f};
    fire.Tensor(fire_prefix + "c").values = {static_cast<float>(c)};
    std::vector<float>& down = fire.Tensor(fire_prefix + "down.weight").values;
    std::vector<float>& r1 = kerple.Tensor(kerple_prefix + "r1.weight").values;
    for (int h = 0; h < 3; ++h) {
      down[h] = static_cast<float>(-s[h]);
      r1[h] = InverseSoftplus(static_cast<double>(down[h]) * -1.0 / normalizer);
    }
    kerple.Tensor(kerple_prefix + "r2.weight").values.assign(3, InverseSoftplus(static_cast<float>(c)));
  }
  const std::vector<std::uint8_t> tokens = RandomBytes(shape.batch, shape.length, 6);
  const TinyLmLossResult a = TinyLmLoss(fire_config, fire, tokens, shape.batch, shape.length);
  const TinyLmLossResult b = TinyLmLoss(kerple_config, kerple, tokens, shape.batch, shape.length);
  constexpr double kTolerance = 2e-6;
  for (std::int64_t t = 0; t < shape.length; ++t) EXPECT_NEAR(a.position_loss[t], b.position_loss[t], kTolerance) << t;
  // And the comparison can fail: another c in FIRE moves some position's
  // loss by ten times the tolerance.
  fire.Tensor("blk.1.attn_fire_c").values = {static_cast<float>(2 * c)};
  const TinyLmLossResult other = TinyLmLoss(fire_config, fire, tokens, shape.batch, shape.length);
  double moved = 0;
  for (std::int64_t t = 0; t < shape.length; ++t)
    moved = std::max(moved, std::abs(other.position_loss[t] - b.position_loss[t]));
  EXPECT_GT(moved, 10 * kTolerance);
}

// Complex order (Wang et al. 2020): the embedding of a word at t + k is its
// embedding at t rotated, per complex dimension, by w k: a map that
// depends on k and the word only, not on t (the paper's Property 1).
TEST(TinyLmComplexOrder, AShiftIsARotationByTheWordsFrequencies) {
  const TinyLmConfig config = TinyConfig(ComplexOrderScheme{}, {12, 3, 1, 13, 9, 1});
  const TinyLmParams params = RandomTinyParams(config, 2);
  const std::vector<std::uint8_t> word(40, std::uint8_t{'q'});  // one word at positions 0..39
  std::vector<std::int64_t> positions(40);
  std::iota(positions.begin(), positions.end(), std::int64_t{0});
  const std::vector<double> x = tiny_lm::MakeSchemeTrainer(config)->InputEmbedding(params, word, positions);
  ASSERT_EQ(x.size(), 40u * 12);
  const std::int64_t half = 6;
  const std::vector<float>& w = params.Tensor("complex_frequency.weight").values;
  for (const std::int64_t t : {0, 3, 17}) {
    for (const std::int64_t k : {1, 5, 22}) {
      for (std::int64_t c = 0; c < half; ++c) {
        const double angle = static_cast<double>(w['q' * half + c]) * static_cast<double>(k);
        const double re = x[t * 12 + c], im = x[t * 12 + half + c];
        EXPECT_NEAR(x[(t + k) * 12 + c], re * std::cos(angle) - im * std::sin(angle), 1e-12);
        EXPECT_NEAR(x[(t + k) * 12 + half + c], re * std::sin(angle) + im * std::cos(angle), 1e-12);
      }
    }
  }
  // The amplitude is the word's alone: |f(j, t)| does not depend on t.
  for (std::int64_t c = 0; c < half; ++c) {
    EXPECT_NEAR(std::hypot(x[c], x[half + c]), std::hypot(x[39 * 12 + c], x[39 * 12 + half + c]), 1e-12);
  }
}

// URPE with its Toeplitz weights at 1 (their init) and T5's table in every
// layer is T5: the same loss, bit for bit; another weight changes it.
TEST(TinyLmUrpe, UnitWeightsAreTheT5Bias) {
  const testing::TinyShape shape{12, 3, 2, 13, 9, 2};
  const TinyLmConfig t5_config = TinyConfig(T5Scheme{}, shape);
  const TinyLmParams t5 = RandomTinyParams(t5_config, 3);
  TinyLmConfig urpe_config = TinyConfig(UrpeScheme{}, shape);
  urpe_config.scheme = UrpeScheme{.buckets = 4, .max_distance = 6};  // T5's test buckets
  TinyLmParams urpe = InitTinyLm(urpe_config, 3);
  urpe.token_embd = t5.token_embd;
  urpe.output_norm = t5.output_norm;
  for (std::size_t l = 0; l < urpe.blocks.size(); ++l) {
    std::vector<TinyLmTensor> tables = urpe.blocks[l].scheme;
    urpe.blocks[l] = t5.blocks[l];
    urpe.blocks[l].scheme = tables;
    urpe.blocks[l].scheme[0].values = t5.Tensor("attn_rel_b.weight").values;
    EXPECT_EQ(urpe.blocks[l].scheme[1].values, std::vector<float>(12, 1.0f));
  }
  const std::vector<std::uint8_t> tokens = RandomBytes(shape.batch, shape.length, 4);
  const double loss = TinyLmLoss(t5_config, t5, tokens, shape.batch, shape.length).loss;
  EXPECT_EQ(TinyLmLoss(urpe_config, urpe, tokens, shape.batch, shape.length).loss, loss);
  urpe.Tensor("blk.1.attn_urpe_scale.weight").values[0] = 0.5f;  // bucket 0 (distance 0), head 0
  EXPECT_GT(std::abs(TinyLmLoss(urpe_config, urpe, tokens, shape.batch, shape.length).loss - loss), 1e-5);
}

// FLOATER's solver: RK4 on a rotation field dp/dt = A p gives the exact
// sinusoid p(t) = R(w t) p(0), its error falling as the step to the fourth
// power (halving the step divides it by about 16).
TEST(TinyLmFloater, Rk4IntegratesARotationToFourthOrder) {
  const double w = 3.0;
  const auto rotation = [&](double /*t*/, const std::vector<double>& y, std::vector<double>& out) {
    out[0] = -w * y[1];
    out[1] = w * y[0];
  };
  const auto error = [&](int steps) {
    std::vector<double> y{1.0, 0.0};
    const double h = 2.0 / steps;
    for (int s = 0; s < steps; ++s) tiny_lm::Rk4Step(rotation, s * h, h, y, nullptr);
    return std::hypot(y[0] - std::cos(2 * w), y[1] - std::sin(2 * w));
  };
  double previous = error(20);
  for (const int steps : {40, 80, 160}) {
    const double e = error(steps);
    EXPECT_NEAR(previous / e, 16.0, 1.5) << steps << " steps";
    previous = e;
  }
  EXPECT_LT(previous, 1e-7);
}

// Any position can be evaluated: the solver integrates further, the first
// positions bit for bit those of a shorter pass; p_l(0) is the layer's
// trained initial state.
TEST(TinyLmFloater, LongerPassesIntegrateFurther) {
  const TinyLmConfig config = TinyConfig(FloaterScheme{}, {12, 3, 2, 13, 6, 1});
  const TinyLmParams params = RandomTinyParams(config, 5);
  const auto trainer = tiny_lm::MakeSchemeTrainer(config);
  const auto short_pass = trainer->LayerInputPositions(params, 6), long_pass = trainer->LayerInputPositions(params, 40);
  ASSERT_EQ(long_pass.size(), 2u);
  for (std::size_t l = 0; l < 2; ++l) {
    EXPECT_TRUE(std::equal(short_pass[l].begin(), short_pass[l].end(), long_pass[l].begin()));
    const std::vector<float>& p0 = params.Tensor("blk." + std::to_string(l) + ".attn_floater_p0.weight").values;
    for (std::size_t c = 0; c < 12; ++c) EXPECT_EQ(long_pass[l][c], p0[c]);
    EXPECT_GT(std::abs(long_pass[l][39 * 12] - long_pass[l][0]), 1e-3);  // it moved
  }
}

// A pass of no position has no rows (the solver once wrote p_l(0) into the
// empty output) and no gradient.
TEST(TinyLmFloater, ZeroLengthHasNoRows) {
  const TinyLmConfig config = TinyConfig(FloaterScheme{}, {12, 3, 2, 13, 6, 1});
  const TinyLmParams params = RandomTinyParams(config, 5);
  const auto trainer = tiny_lm::MakeSchemeTrainer(config);
  const auto rows = trainer->LayerInputPositions(params, 0);
  ASSERT_EQ(rows.size(), 2u);
  for (const auto& layer : rows) EXPECT_TRUE(layer.empty());
  TinyLmParams grads = ZeroTinyLmParams(config);
  trainer->LayerInputPositionsBackward(params, 0, rows, grads);
  for (const TinyLmTensor& t : grads.scheme) {
    for (const float g : t.values) EXPECT_EQ(g, 0.0f) << t.name;
  }
}

// The trainer's attention and posenc::Attention under the scheme's lowering
// (SchemeKernelAttention: input positions stay with the model) give the
// same loss, per position, for every scheme the kernel has; KERPLE, FIRE,
// XLNet and DeBERTa are those it has not.
class TinyLmKernelLowering : public ::testing::TestWithParam<PositionScheme> {};

TEST_P(TinyLmKernelLowering, TrainerAttentionEqualsTheKernel) {
  const TinyLmConfig config = TinyConfig(GetParam(), {24, 3, 2, 37, 9, 3});
  const TinyLmParams params = RandomTinyParams(config, 8);
  const tiny_lm::KernelAttention kernel = tiny_lm::SchemeKernelAttention(config, params);
  const bool no_kernel_form =
      std::holds_alternative<KerpleScheme>(GetParam()) || std::holds_alternative<FireScheme>(GetParam()) ||
      std::holds_alternative<XlnetScheme>(GetParam()) || std::holds_alternative<DebertaScheme>(GetParam());
  ASSERT_EQ(static_cast<bool>(kernel), !no_kernel_form);
  if (!kernel) GTEST_SKIP() << PositionSchemeName(GetParam()) << ": the attention kernel has no form of it";
  // Past the training length too (11 > 9), where learned needs its extension.
  TinyLmConfig long_config = config;
  long_config.learned_past_table = LearnedPastTable::kHierarchical;
  for (const std::int64_t length : {std::int64_t{9}, std::int64_t{11}}) {
    const std::vector<std::uint8_t> tokens = RandomBytes(3, length, 10);
    const TinyLmLossResult own = tiny_lm::Loss(long_config, params, tokens, 3, length, nullptr, {});
    const TinyLmLossResult fused = tiny_lm::Loss(long_config, params, tokens, 3, length, nullptr, kernel);
    for (std::int64_t t = 0; t < length; ++t) {
      EXPECT_NEAR(fused.position_loss[t], own.position_loss[t], 2e-6 * own.position_loss[t]) << "t = " << t;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(TinyLm, TinyLmKernelLowering,
                         ::testing::ValuesIn(AllPositionSchemes().begin(), AllPositionSchemes().end()),
                         testing::SchemeTestName);

// ALiBi and T5 distance biases are the library's (AlibiBias, T5Bias).
TEST(TinyLmPositions, DistanceBiasesAreTheLibrarys) {
  const std::int64_t length = 9;
  TinyLmConfig config = TinyConfig(AlibiScheme{}, testing::kTinyGrid[2]);
  TinyLmParams params = RandomTinyParams(config, 1);
  std::vector<double> table = tiny_lm::MakeSchemeTrainer(config)->Layer(params, 0, length).distance_bias;
  const std::vector<double> alibi = AlibiBias(AlibiSpec{.heads = 3}, length, length, 0);
  config.scheme = T5Scheme{.buckets = 4, .max_distance = 6};
  params = RandomTinyParams(config, 1);
  const std::vector<double> t5_table = tiny_lm::MakeSchemeTrainer(config)->Layer(params, 1, length).distance_bias;
  const std::vector<float>& trained = params.Tensor("attn_rel_b.weight").values;
  const std::vector<double> weights(trained.begin(), trained.end());
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
  for (const PositionScheme& scheme : AllPositionSchemes()) {
    TinyLmConfig config = TinyConfig(scheme, {12, 3, 2, 13, 6, 2});
    const TinyLmParams params = RandomTinyParams(config, 9);
    const std::vector<std::uint8_t> tokens = RandomBytes(2, 11, 4);
    if (std::holds_alternative<LearnedScheme>(scheme)) {
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
  TinyLmConfig config = TinyConfig(LearnedScheme{}, {12, 3, 1, 13, 3, 1});
  config.learned_past_table = LearnedPastTable::kHierarchical;
  const TinyLmParams params = RandomTinyParams(config, 2);
  EXPECT_NO_THROW(TinyLmLoss(config, params, RandomBytes(1, 9, 1), 1, 9));
  ExpectError([&] { TinyLmLoss(config, params, RandomBytes(1, 10, 1), 1, 10); }, {"length = 10", "rows^2 = 9"});
}

// Bitwise the same loss and gradients for 1, 2 and 3 threads, on a shape
// large enough that attention, the row steps and MatMul split.
TEST(TinyLmThreads, BitwiseIdenticalForOneTwoThreeThreads) {
  const int saved = NumThreads();
  for (const PositionScheme& scheme : AllPositionSchemes()) {
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
  const TinyLmConfig config = TinyConfig(RopeScheme{}, testing::kTinyGrid[0]);
  const TinyLmParams params = InitTinyLm(config, 1);
  const std::vector<std::uint8_t> tokens = RandomBytes(1, 5, 1);
  ExpectError([&] { TinyLmLoss(config, params, tokens, 1, 4); }, {"tokens.size() = 6", "batch * (length + 1) = 5"});
  ExpectError([&] { TinyLmLoss(config, params, tokens, 0, 5); }, {"batch = 0"});
  ExpectError([&] { TinyLmLoss(config, params, {}, 1, 0); }, {"length = 0"});
  ExpectError(
      [&] { TinyLmLoss(config, ZeroTinyLmParams(TinyConfig(NopeScheme{}, testing::kTinyGrid[1])), tokens, 1, 5); },
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
