// The optimizer: AdamW's update and weight-decay exclusion, the learning-rate
// schedule at known steps, global gradient clipping, their errors, thread-count
// invariance, and an outside oracle: torch.optim.AdamW and
// torch.nn.utils.clip_grad_norm_ on a fixed problem (tests/data/adamw_oracle.json,
// made by tests/data/make_adamw_oracle.py).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <numbers>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "posenc/adamw.h"
#include "posenc/parallel.h"
#include "test_util.h"

namespace posenc {
namespace {

using nlohmann::json;
using testing::ExpectError;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<float> Uniform(std::size_t n, std::uint32_t seed, double scale = 1.0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-scale, scale);
  std::vector<float> out(n);
  for (float& x : out) x = static_cast<float>(dist(rng));
  return out;
}

bool BitwiseEqual(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// ---------------------------------------------------------------- options

TEST(AdamWOptions, DefaultsAreNanoGptsWithALearningRate) {
  const AdamWOptions options{.lr = 6e-4};
  EXPECT_EQ(options.beta1, 0.9);
  EXPECT_EQ(options.beta2, 0.95);
  EXPECT_EQ(options.eps, 1e-8);
  EXPECT_EQ(options.weight_decay, 0.1);
  EXPECT_NO_THROW(options.Validate());
}

TEST(AdamWOptions, EachRuleNamesItsField) {
  const auto bad = [](AdamWOptions o) { return [o] { o.Validate(); }; };
  ExpectError(bad({}), {"[adamw] lr = 0: must be a finite number > 0"});
  ExpectError(bad({.lr = -1e-3}), {"lr = -0.001"});
  ExpectError(bad({.lr = kInf}), {"lr = inf"});
  ExpectError(bad({.lr = kNaN}), {"lr = nan"});
  ExpectError(bad({.lr = 1e-3, .beta1 = 1.0}), {"[adamw] beta1 = 1: must be in [0, 1)"});
  ExpectError(bad({.lr = 1e-3, .beta1 = -0.1}), {"beta1 = -0.1"});
  ExpectError(bad({.lr = 1e-3, .beta1 = kNaN}), {"beta1 = nan"});
  ExpectError(bad({.lr = 1e-3, .beta2 = 1.0}), {"[adamw] beta2 = 1: must be in [0, 1)"});
  ExpectError(bad({.lr = 1e-3, .beta2 = kNaN}), {"beta2 = nan"});
  ExpectError(bad({.lr = 1e-3, .eps = 0.0}), {"[adamw] eps = 0: must be a finite number > 0"});
  ExpectError(bad({.lr = 1e-3, .eps = kInf}), {"eps = inf"});
  ExpectError(bad({.lr = 1e-3, .weight_decay = -0.1}), {"[adamw] weight_decay = -0.1: must be a finite number >= 0"});
  ExpectError(bad({.lr = 1e-3, .weight_decay = kNaN}), {"weight_decay = nan"});
  // beta 0 is allowed (no momentum / RMSProp without history), as in torch.
  EXPECT_NO_THROW(bad({.lr = 1e-3, .beta1 = 0.0, .beta2 = 0.0, .weight_decay = 0.0})());
  // The constructor validates.
  ExpectError([] { AdamW({.lr = 1e-3, .eps = -1.0}, {{.size = 3}}); }, {"eps = -1"});
}

// ---------------------------------------------------------------- AdamW

TEST(AdamW, ConstructorChecksTensorSizes) {
  ExpectError([] { AdamW({.lr = 1e-3}, {{.size = 3}, {.size = 0}}); }, {"[adamw] tensors[1].size = 0: must be > 0"});
  const AdamW adamw({.lr = 1e-3}, {{.size = 3}, {.size = 2, .weight_decay = false}});
  EXPECT_EQ(adamw.num_tensors(), 2);
  EXPECT_EQ(adamw.steps(1), 0);
  EXPECT_FALSE(adamw.tensor(1).weight_decay);
  EXPECT_THAT(adamw.m(0), ::testing::ElementsAre(0.0F, 0.0F, 0.0F));
  ExpectError([&] { (void)adamw.steps(2); }, {"[adamw] tensor = 2: must be in [0, 2)"});
}

// With a zero gradient m and v stay 0 and the Adam term is exactly 0 / eps =
// 0: one step is the decoupled decay alone, p * (1 - lr * wd) — and nothing
// for the excluded tensor.
TEST(AdamW, WeightDecayIsDecoupledAndExcludable) {
  const double lr = 0.05;
  AdamW adamw({.lr = lr, .weight_decay = 0.3}, {{.size = 5}, {.size = 4, .weight_decay = false}});
  std::vector<float> matrix = Uniform(5, 1), scale = Uniform(4, 2);
  const std::vector<float> matrix0 = matrix, scale0 = scale;
  const std::vector<float> zeros5(5, 0.0F), zeros4(4, 0.0F);
  const AdamWParam params[] = {{matrix, zeros5}, {scale, zeros4}};
  adamw.Step(params);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(matrix[i], static_cast<float>(matrix0[i] * (1.0 - lr * 0.3))) << i;
  EXPECT_TRUE(BitwiseEqual(scale, scale0));
  EXPECT_EQ(adamw.steps(0), 1);
  EXPECT_EQ(adamw.steps(1), 1);  // stepped (its m and v moved), just not decayed
}

// The first step: m_hat = g, v_hat = g^2, so p -= lr * g / (|g| + eps), about
// lr * sign(g) whatever the gradient's size (Adam's scale invariance).
TEST(AdamW, FirstStepIsLearningRateTimesSign) {
  const double lr = 1e-3;
  AdamW adamw({.lr = lr, .weight_decay = 0.0}, {{.size = 4}});
  std::vector<float> p = {0.5F, -0.25F, 1.0F, 0.0F};
  const std::vector<float> g = {1e-4F, -3.0F, 200.0F, -1e-2F};
  const std::vector<float> p0 = p;
  const AdamWParam params[] = {{p, g}};
  adamw.Step(params);
  for (int i = 0; i < 4; ++i) {
    const double expect = p0[i] - lr * g[i] / (std::abs(static_cast<double>(g[i])) + 1e-8);
    EXPECT_NEAR(p[i], expect, 2 * testing::UnitInLastPlace(DType::kF32, expect)) << i;
  }
  // m = (1 - beta1) g, v = (1 - beta2) g^2, rounded to float32 once.
  EXPECT_EQ(adamw.m(0)[1], static_cast<float>(0.1 * -3.0));
  EXPECT_EQ(adamw.v(0)[1], static_cast<float>(0.05 * 9.0));
}

// A later step uses the step count in the bias correction: the second step
// with the same gradient g is again lr * g / (|g| + eps) (m_hat = g, v_hat = g^2).
TEST(AdamW, BiasCorrectionUsesTheStepCount) {
  const double lr = 1e-2;
  AdamW adamw({.lr = lr, .beta1 = 0.5, .beta2 = 0.75, .weight_decay = 0.0}, {{.size = 1}});
  std::vector<float> p = {1.0F};
  const std::vector<float> g = {0.5F};
  const AdamWParam params[] = {{p, g}};
  adamw.Step(params);
  adamw.Step(params);
  EXPECT_EQ(adamw.steps(0), 2);
  EXPECT_NEAR(p[0], 1.0 - 2 * lr * 0.5 / (0.5 + 1e-8), 1e-7);
}

// An empty gradient is torch's p.grad = None: the tensor is not touched at
// all, and its step count falls behind the others'.
TEST(AdamW, EmptyGradientSkipsTheTensor) {
  AdamW adamw({.lr = 1e-2}, {{.size = 3}, {.size = 2}});
  std::vector<float> a = Uniform(3, 3), b = Uniform(2, 4);
  const std::vector<float> ga = Uniform(3, 5), gb = Uniform(2, 6);
  const AdamWParam both[] = {{a, ga}, {b, gb}};
  adamw.Step(both);
  const std::vector<float> b1 = b, m1(adamw.m(1).begin(), adamw.m(1).end());
  const AdamWParam first_only[] = {{a, ga}, {b, {}}};
  adamw.Step(first_only);
  EXPECT_EQ(adamw.steps(0), 2);
  EXPECT_EQ(adamw.steps(1), 1);
  EXPECT_TRUE(BitwiseEqual(b, b1));
  EXPECT_TRUE(BitwiseEqual(adamw.m(1), m1));
}

// A learning rate of 0 (the first value of a warmup) moves m and v, not p.
TEST(AdamW, ZeroLearningRateLeavesParameters) {
  AdamW adamw({.lr = 1e-2}, {{.size = 3}});
  std::vector<float> p = Uniform(3, 7);
  const std::vector<float> p0 = p, g = Uniform(3, 8);
  const AdamWParam params[] = {{p, g}};
  adamw.Step(params, 0.0);
  EXPECT_TRUE(BitwiseEqual(p, p0));
  EXPECT_EQ(adamw.steps(0), 1);
  EXPECT_NE(adamw.m(0)[0], 0.0F);
}

TEST(AdamW, StepErrorsChangeNothing) {
  AdamW adamw({.lr = 1e-2}, {{.size = 3}, {.size = 2}});
  std::vector<float> a = Uniform(3, 9), b = Uniform(2, 10), short_b(1);
  const std::vector<float> ga = Uniform(3, 11), gb = Uniform(2, 12), g_long(3);
  const std::vector<float> a0 = a;
  {
    const AdamWParam params[] = {{a, ga}};
    ExpectError([&] { adamw.Step(params); },
                {"[adamw] params.size() = 1: must equal the number of tensors given to the constructor (2)"});
  }
  {
    const AdamWParam params[] = {{a, ga}, {short_b, gb}};
    ExpectError([&] { adamw.Step(params); }, {"[adamw] params[1].param.size() = 1: must equal the tensor's size (2)"});
  }
  {
    const AdamWParam params[] = {{a, ga}, {b, g_long}};
    ExpectError([&] { adamw.Step(params); }, {"[adamw] params[1].grad.size() = 3", "or be 0 (no gradient)"});
  }
  {
    const AdamWParam params[] = {{a, ga}, {b, gb}};
    ExpectError([&] { adamw.Step(params, -1e-3); }, {"[adamw] lr = -0.001: must be a finite number >= 0"});
    ExpectError([&] { adamw.Step(params, kNaN); }, {"lr = nan"});
  }
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    std::vector<float> gb_bad = gb;
    gb_bad[1] = bad;
    const AdamWParam params[] = {{a, ga}, {b, gb_bad}};
    ExpectError([&] { adamw.Step(params); },
                {std::isnan(bad) ? "[adamw] params[1].grad[1] = nan: gradients must be finite" : "grad[1] = inf"});
  }
  // Tensor 0 came before the bad tensor 1 and was still left alone.
  EXPECT_TRUE(BitwiseEqual(a, a0));
  EXPECT_EQ(adamw.steps(0), 0);
  EXPECT_EQ(adamw.m(0)[0], 0.0F);
}

class ThreadCount {
 public:
  explicit ThreadCount(int n) : saved_(NumThreads()) { SetNumThreads(n); }
  ~ThreadCount() { SetNumThreads(saved_); }
  ThreadCount(const ThreadCount&) = delete;
  ThreadCount& operator=(const ThreadCount&) = delete;

 private:
  int saved_;
};

// Clip + three steps over tensors big enough to be split: the same bits for
// 1, 2, 3 and 7 threads.
TEST(AdamW, BitwiseIdenticalForAnyThreadCount) {
  const std::vector<std::size_t> sizes = {100003, 65537, 7};
  struct Result {
    std::vector<std::vector<float>> params, m, v;
    double norm = 0;
  };
  const auto run = [&](int threads) {
    const ThreadCount count(threads);
    AdamW adamw({.lr = 1e-2}, {{.size = 100003}, {.size = 65537, .weight_decay = false}, {.size = 7}});
    Result r;
    for (std::size_t i = 0; i < sizes.size(); ++i) r.params.push_back(Uniform(sizes[i], 100 + i));
    for (std::uint32_t step = 0; step < 3; ++step) {
      std::vector<std::vector<float>> grads;
      for (std::size_t i = 0; i < sizes.size(); ++i) grads.push_back(Uniform(sizes[i], 1000 * step + i, 0.01));
      const std::vector<std::span<float>> spans(grads.begin(), grads.end());
      r.norm += ClipGradNorm(spans, 1.0);
      std::vector<AdamWParam> params;
      for (std::size_t i = 0; i < sizes.size(); ++i) params.push_back({r.params[i], grads[i]});
      adamw.Step(params, 1e-2 / (step + 1));
    }
    for (std::int64_t i = 0; i < adamw.num_tensors(); ++i) {
      r.m.emplace_back(adamw.m(i).begin(), adamw.m(i).end());
      r.v.emplace_back(adamw.v(i).begin(), adamw.v(i).end());
    }
    return r;
  };
  const Result one = run(1);
  for (const int threads : {2, 3, 7}) {
    const Result other = run(threads);
    EXPECT_EQ(one.norm, other.norm) << threads;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
      EXPECT_TRUE(BitwiseEqual(one.params[i], other.params[i])) << threads << " threads, tensor " << i;
      EXPECT_TRUE(BitwiseEqual(one.m[i], other.m[i])) << threads << " threads, tensor " << i;
      EXPECT_TRUE(BitwiseEqual(one.v[i], other.v[i])) << threads << " threads, tensor " << i;
    }
  }
}

// ---------------------------------------------------------------- schedule

// nanoGPT's GPT-2 (124M) run: learning_rate 6e-4, min_lr 6e-5,
// warmup_iters 2000, lr_decay_iters 600000.
TEST(LearningRate, NanoGptGpt2Schedule) {
  const LrSchedule s{.peak = 6e-4, .min_lr = 6e-5, .warmup = 2000, .total = 600000};
  EXPECT_EQ(LearningRate(s, 0), 0.0);
  EXPECT_DOUBLE_EQ(LearningRate(s, 1), 6e-4 / 2000);
  EXPECT_DOUBLE_EQ(LearningRate(s, 500), 1.5e-4);
  EXPECT_DOUBLE_EQ(LearningRate(s, 1000), 3e-4);
  EXPECT_EQ(LearningRate(s, 2000), 6e-4);  // cos(0) = 1 exactly
  // A quarter of the way: (1 + cos(pi/4)) / 2 of the range above min_lr.
  EXPECT_DOUBLE_EQ(LearningRate(s, 2000 + 149500), 6e-5 + 5.4e-4 * (1 + std::sqrt(0.5)) / 2);
  EXPECT_DOUBLE_EQ(LearningRate(s, 301000), (6e-4 + 6e-5) / 2);  // halfway: the mean
  EXPECT_DOUBLE_EQ(LearningRate(s, 2000 + 448500), 6e-5 + 5.4e-4 * (1 - std::sqrt(0.5)) / 2);
  EXPECT_DOUBLE_EQ(LearningRate(s, 599999), 6e-5 + 5.4e-4 * (1 + std::cos(std::numbers::pi * 597999 / 598000)) / 2);
  EXPECT_EQ(LearningRate(s, 600000), 6e-5);
  EXPECT_EQ(LearningRate(s, 10'000'000), 6e-5);
  // Monotone: up through the warmup, down after it.
  for (std::int64_t step = 1; step <= 2000; step += 7) EXPECT_GT(LearningRate(s, step), LearningRate(s, step - 1));
  for (std::int64_t step = 2001; step <= 600000; step += 997) {
    EXPECT_LT(LearningRate(s, step), LearningRate(s, step - 1)) << step;
  }
}

TEST(LearningRate, NoWarmupAndAllWarmup) {
  const LrSchedule cosine{.peak = 1.0, .min_lr = 0.0, .warmup = 0, .total = 4};
  EXPECT_EQ(LearningRate(cosine, 0), 1.0);
  EXPECT_DOUBLE_EQ(LearningRate(cosine, 1), (1 + std::sqrt(0.5)) / 2);
  EXPECT_DOUBLE_EQ(LearningRate(cosine, 2), 0.5);
  EXPECT_EQ(LearningRate(cosine, 4), 0.0);
  // warmup = total: a ramp, then min_lr (no cosine, no division by zero).
  const LrSchedule ramp{.peak = 1.0, .min_lr = 0.25, .warmup = 4, .total = 4};
  EXPECT_EQ(LearningRate(ramp, 2), 0.5);
  EXPECT_EQ(LearningRate(ramp, 3), 0.75);
  EXPECT_EQ(LearningRate(ramp, 4), 0.25);
  // min_lr = peak: constant after the warmup.
  const LrSchedule flat{.peak = 0.5, .min_lr = 0.5, .warmup = 1, .total = 10};
  for (int step = 1; step < 12; ++step) EXPECT_EQ(LearningRate(flat, step), 0.5) << step;
}

TEST(LearningRate, EachRuleNamesItsField) {
  const auto at = [](LrSchedule s, std::int64_t step = 0) { return [s, step] { (void)LearningRate(s, step); }; };
  ExpectError(at({.peak = 1.0, .warmup = 11, .total = 10}),
              {"[lr_schedule] warmup = 11: must be in [0, total] (total = 10)"});
  ExpectError(at({.peak = 1.0, .warmup = -1, .total = 10}), {"warmup = -1"});
  ExpectError(at({.peak = 1.0, .total = 0}), {"[lr_schedule] total = 0: must be >= 1"});
  ExpectError(at({.peak = 1.0, .min_lr = 2.0, .total = 10}),
              {"[lr_schedule] min_lr = 2: must be in [0, peak] (peak = 1)"});
  ExpectError(at({.peak = 1.0, .min_lr = -0.5, .total = 10}), {"min_lr = -0.5"});
  ExpectError(at({.peak = 1.0, .min_lr = kNaN, .total = 10}), {"min_lr = nan"});
  ExpectError(at({.peak = 0.0, .total = 10}), {"[lr_schedule] peak = 0: must be a finite number > 0"});
  ExpectError(at({.peak = kInf, .total = 10}), {"peak = inf"});
  ExpectError(at({.peak = 1.0, .total = 10}, -1), {"[lr_schedule] step = -1: must be >= 0"});
}

// ---------------------------------------------------------------- clipping

TEST(ClipGradNorm, ScalesAllTensorsByOneFactor) {
  std::vector<float> a = {3.0F, 0.0F}, b = {}, c = {4.0F, 12.0F};  // norm 13; b: no gradient
  const std::vector<std::span<float>> grads = {a, b, c};
  EXPECT_EQ(ClipGradNorm(grads, 1.3), 13.0);
  const double coef = 1.3 / (13.0 + 1e-6);
  EXPECT_EQ(a[0], static_cast<float>(3.0 * coef));
  EXPECT_EQ(a[1], 0.0F);
  EXPECT_EQ(c[0], static_cast<float>(4.0 * coef));
  EXPECT_EQ(c[1], static_cast<float>(12.0 * coef));
  // Clipped, the norm is max_norm (to the 1e-6 in the divisor and float32).
  EXPECT_NEAR(ClipGradNorm(grads, kInf), 1.3, 1e-6);
}

TEST(ClipGradNorm, BelowTheLimitNothingChanges) {
  std::vector<float> a = Uniform(9, 20), b = Uniform(4, 21);
  const std::vector<float> a0 = a, b0 = b;
  const std::vector<std::span<float>> grads = {a, b};
  double sum = 0;  // the fixed order: tensor after tensor, element order
  for (const float x : a) sum += static_cast<double>(x) * x;
  for (const float x : b) sum += static_cast<double>(x) * x;
  EXPECT_EQ(ClipGradNorm(grads, 100.0), std::sqrt(sum));
  EXPECT_EQ(ClipGradNorm(grads, kInf), std::sqrt(sum));  // +inf: the norm and its check, never clips
  EXPECT_TRUE(BitwiseEqual(a, a0));
  EXPECT_TRUE(BitwiseEqual(b, b0));
  std::vector<float> none;
  EXPECT_EQ(ClipGradNorm(std::vector<std::span<float>>{none}, 1.0), 0.0);
}

// torch's rule is coef = max_norm / (norm + 1e-6) < 1, not norm > max_norm:
// a norm equal to max_norm is scaled by a factor just under 1.
TEST(ClipGradNorm, NormAtTheLimitIsScaledAsTorchDoes) {
  std::vector<float> a = {3.0F, 4.0F};
  const std::vector<std::span<float>> grads = {a};
  EXPECT_EQ(ClipGradNorm(grads, 5.0), 5.0);
  EXPECT_EQ(a[1], static_cast<float>(4.0 * 5.0 / (5.0 + 1e-6)));
  EXPECT_LT(a[1], 4.0F);
}

TEST(ClipGradNorm, ErrorsLeaveTheGradients) {
  std::vector<float> a = {1.0F, 2.0F}, b = {3.0F, 4.0F, 5.0F};
  const std::vector<std::span<float>> grads = {a, b};
  ExpectError([&] { ClipGradNorm(grads, 0.0); }, {"[clip_grad_norm] max_norm = 0: must be > 0"});
  ExpectError([&] { ClipGradNorm(grads, -1.0); }, {"max_norm = -1"});
  ExpectError([&] { ClipGradNorm(grads, kNaN); }, {"max_norm = nan"});
  b[1] = std::numeric_limits<float>::quiet_NaN();
  ExpectError([&] { ClipGradNorm(grads, 1.0); },
              {"[clip_grad_norm] grad norm = nan: must be finite; the first non-finite gradient element is "
               "grads[1][1] = nan"});
  b[1] = 4.0F;
  a[0] = -std::numeric_limits<float>::infinity();
  ExpectError([&] { ClipGradNorm(grads, 1.0); }, {"grad norm = inf", "grads[0][0] = -inf"});
  EXPECT_EQ(a[1], 2.0F);
  EXPECT_EQ(b[2], 5.0F);
  // The largest floats do not overflow the double sum: a finite norm, clipped.
  a = {std::numeric_limits<float>::max(), std::numeric_limits<float>::max()};
  EXPECT_DOUBLE_EQ(ClipGradNorm(grads, 1.0), std::sqrt(2.0 * std::pow(std::numeric_limits<float>::max(), 2) + 50.0));
  EXPECT_NEAR(a[0], std::sqrt(0.5), 1e-6);
}

// ---------------------------------------------------------------- oracle: torch

// Float32 rounding: relative 1e-6 (8 float32 ulps at worst), to the value
// itself or, for values near zero, to 1e-3. A first moment m is a sum of
// gradients of both signs, so its rounding error is relative to the size of
// those gradients, not of the sum: m is compared relative to its tensor's
// largest |m| (a near-zero m[i] is not a near-zero-error m[i], in torch either).
constexpr double kRelative = 1e-6;
constexpr double kFloor = 1e-3;

struct OracleReport {
  std::vector<std::string> mismatches;  // one line each, "where: got X, expected Y"
  double worst = 0;                     // the largest |got - expected| / max(|expected|, floor)
  int compared = 0;

  void Compare(double got, double expected, const std::string& where, double floor = kFloor) {
    const double error = std::abs(got - expected) / std::max(std::abs(expected), floor);
    ++compared;
    worst = std::max(worst, error);
    if (!(error <= kRelative)) {
      mismatches.push_back(where + ": got " + FormatValue(got) + ", expected " + FormatValue(expected) +
                           " (relative error " + FormatValue(error) + ")");
    }
  }
  void Compare(std::span<const float> got, const json& expected, const std::string& where, double floor = kFloor) {
    if (got.size() != expected.size()) {
      mismatches.push_back(where + ": " + std::to_string(got.size()) + " values, expected " +
                           std::to_string(expected.size()));
      return;
    }
    for (std::size_t j = 0; j < got.size(); ++j) {
      Compare(got[j], expected[j].get<double>(), where + "[" + std::to_string(j) + "]", floor);
    }
  }
};

std::vector<float> Floats(const json& values) {
  std::vector<float> out;
  for (const auto& x : values) out.push_back(static_cast<float>(x.get<double>()));  // exact: written from float32
  return out;
}

json LoadOracle() {
  std::ifstream in(std::string(POSENC_SOURCE_DIR) + "/tests/data/adamw_oracle.json");
  EXPECT_TRUE(in) << "tests/data/adamw_oracle.json";
  return json::parse(in);
}

// Runs one case of the oracle's problem through posenc from its inputs alone
// (the initial parameters and the raw gradients) and compares every stored
// output; posenc's state is never reset to torch's along the way.
OracleReport RunOracle(const json& oracle, const json& c) {
  OracleReport report;
  const auto sizes = oracle["sizes"].get<std::vector<std::int64_t>>();
  const auto decay = oracle["weight_decay"].get<std::vector<bool>>();
  const json& sched = oracle["schedule"];
  const LrSchedule schedule{.peak = sched["peak"].get<double>(),
                            .min_lr = sched["min_lr"].get<double>(),
                            .warmup = sched["warmup"].get<std::int64_t>(),
                            .total = sched["total"].get<std::int64_t>()};
  const json& o = c["options"];
  std::vector<AdamWTensor> tensors;
  for (std::size_t i = 0; i < sizes.size(); ++i) tensors.push_back({.size = sizes[i], .weight_decay = decay[i]});
  AdamW adamw({.lr = schedule.peak,
               .beta1 = o["beta1"].get<double>(),
               .beta2 = o["beta2"].get<double>(),
               .eps = o["eps"].get<double>(),
               .weight_decay = o["weight_decay"].get<double>()},
              tensors);
  std::vector<std::vector<float>> params;
  for (const auto& p : c["initial_params"]) params.push_back(Floats(p));

  for (std::size_t t = 0; t < c["steps"].size(); ++t) {
    const json& step = c["steps"][t];
    const std::string at = "steps[" + std::to_string(t) + "]";
    std::vector<std::vector<float>> grads;
    for (const auto& g : step["grads"]) grads.push_back(Floats(g));
    const std::vector<std::span<float>> spans(grads.begin(), grads.end());
    report.Compare(ClipGradNorm(spans, oracle["max_norm"].get<double>()), step["norm"].get<double>(), at + ".norm");
    for (std::size_t i = 0; i < grads.size(); ++i) {
      report.Compare(grads[i], step["clipped_grads"][i], at + ".clipped_grads[" + std::to_string(i) + "]");
    }
    const double lr = LearningRate(schedule, static_cast<std::int64_t>(t + 1));
    report.Compare(lr, step["lr"].get<double>(), at + ".lr");
    std::vector<AdamWParam> step_params;
    for (std::size_t i = 0; i < params.size(); ++i) step_params.push_back({params[i], grads[i]});
    adamw.Step(step_params, lr);
    for (std::size_t i = 0; i < params.size(); ++i) {
      report.Compare(params[i], step["params"][i], at + ".params[" + std::to_string(i) + "]");
    }
  }
  const json& final = c["final"];
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    const auto n = static_cast<std::int64_t>(i);
    const std::string at = "[" + std::to_string(i) + "]";
    if (adamw.steps(n) != final["steps"][i].get<std::int64_t>()) {
      report.mismatches.push_back("final.steps" + at + ": got " + std::to_string(adamw.steps(n)) + ", expected " +
                                  final["steps"][i].dump());
    }
    double largest = 0;
    for (const auto& x : final["m"][i]) largest = std::max(largest, std::abs(x.get<double>()));
    report.Compare(adamw.m(n), final["m"][i], "final.m" + at, largest);
    report.Compare(adamw.v(n), final["v"][i], "final.v" + at);
  }
  return report;
}

TEST(AdamWOracle, MatchesTorchToFloat32Rounding) {
  const json oracle = LoadOracle();
  ASSERT_EQ(oracle["cases"].size(), 2u);
  for (const auto& c : oracle["cases"]) {
    const OracleReport report = RunOracle(oracle, c);
    const std::string name = c["name"].get<std::string>();
    EXPECT_THAT(report.mismatches, ::testing::IsEmpty()) << name;
    // Every number was compared: 7 steps of norm, lr, 25 clipped gradients
    // (20 at step 4) and 25 parameters, then m and v.
    EXPECT_EQ(report.compared, 7 * (2 + 25 + 25) - 5 + 2 * 25) << name;
    std::cout << "[ oracle ] " << name << ": " << report.compared << " numbers, worst relative error " << report.worst
              << "\n";
  }
}

// The comparison cannot pass vacuously: a single expected value moved by 4x
// the tolerance is reported, by name, and nothing else is.
TEST(AdamWOracle, ReportsAPerturbedValue) {
  json oracle = LoadOracle();
  json& value = oracle["cases"][0]["steps"][3]["params"][2][4];
  value = value.get<double>() * (1 + 4 * kRelative);
  const OracleReport report = RunOracle(oracle, oracle["cases"][0]);
  ASSERT_EQ(report.mismatches.size(), 1u) << ::testing::PrintToString(report.mismatches);
  EXPECT_THAT(report.mismatches[0], ::testing::StartsWith("steps[3].params[2][4]: got "));

  // m is compared to its tensor's largest |m|: 4x the tolerance of that.
  json moment = LoadOracle();
  json& m = moment["cases"][1]["final"]["m"][1];
  double largest = 0;
  for (const auto& x : m) largest = std::max(largest, std::abs(x.get<double>()));
  m[2] = m[2].get<double>() - 4 * kRelative * largest;
  EXPECT_THAT(RunOracle(moment, moment["cases"][1]).mismatches,
              ::testing::ElementsAre(::testing::StartsWith("final.m[1][2]: got ")));

  // A changed input (one raw gradient, at a step that does not clip) moves
  // the norm and that one element from the second step on (the first step is
  // lr * sign(g) whatever |g| is): the update is elementwise.
  json input = LoadOracle();
  json& g = input["cases"][0]["steps"][0]["grads"][0][0];
  g = g.get<double>() * 1.01;
  const auto mismatches = RunOracle(input, input["cases"][0]).mismatches;
  EXPECT_THAT(mismatches, ::testing::Contains(::testing::StartsWith("steps[0].norm: ")));
  for (int t = 1; t < 7; ++t) {
    const std::string where = "steps[" + std::to_string(t) + "].params[0][0]: ";
    EXPECT_THAT(mismatches, ::testing::Contains(::testing::StartsWith(where)));
  }
  for (const std::string& line : mismatches) {
    EXPECT_THAT(line, ::testing::AnyOf(::testing::HasSubstr("[0][0]: "), ::testing::HasSubstr("norm: ")));
  }
}

}  // namespace
}  // namespace posenc
