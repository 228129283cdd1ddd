// Extension methods on top of a model's own RoPE scaling (llama3, YaRN,
// linear, factors): the planner's composed tables against the float64
// reference::ComposedFrequencies, the attention they run against
// reference::Attention, identities with the methods' own formulas, and the
// pairs that do not compose.
#include <algorithm>
#include <cmath>
#include <string>

#include "posenc/attention.h"
#include "posenc/context_extension.h"
#include "posenc/rope_frequencies.h"
#include "test_util.h"

namespace posenc {
namespace {

using testing::Buffer;
using testing::ExpectError;

constexpr const char* kFrequencyMethods[] = {"linear", "ntk", "dynamic-ntk", "yarn"};
constexpr const char* kPositionMethods[] = {"rerope",      "leaky-rerope", "window",   "lambda:sinks=2",
                                            "self-extend", "none:logn",    "yarn:logn"};

// Llama 3.1 8B's RoPE (theta 5e5, 128 wide, factor 8 over 8,192 tokens).
RopeSpec Llama31() {
  return {.theta = 500000, .head_dim = 128, .scaling = Llama3Scaling{.factor = 8, .original_max_position = 8192}};
}
// Qwen2.5's long-context YaRN (theta 1e6, 128 wide, factor 4 over 32,768).
RopeSpec Qwen25Yarn() {
  return {.theta = 1e6, .head_dim = 128, .scaling = YarnScaling{.factor = 4, .original_max_position = 32768}};
}
// The same shapes small enough for a float64 attention over every position
// (256 tokens at twice their effective length).
RopeSpec SmallLlama3() {
  return {.theta = 10000, .head_dim = 64, .scaling = Llama3Scaling{.factor = 4, .original_max_position = 32}};
}
RopeSpec SmallYarn() {
  return {.theta = 10000, .head_dim = 64, .scaling = YarnScaling{.factor = 4, .original_max_position = 32}};
}

const RopeFrequencies& FrequenciesOf(const ExtensionPlan& plan) {
  return std::visit(
      [](const auto& e) -> const RopeFrequencies& {
        if constexpr (requires { e.frequencies; }) {
          return e.frequencies;
        } else {
          throw Error("not a rotary encoding");
        }
      },
      plan.attention.encoding);
}

// "llama3-128 yarn": the model's scaling and head width, the method.
std::string Name(const RopeSpec& model, const std::string& method) {
  return std::string(RopeScalingName(model.scaling)) + "-" + std::to_string(model.head_dim) + " " + method;
}

double MaxRelativeError(const std::vector<double>& a, const std::vector<double>& b) {
  double worst = 0;
  for (std::size_t k = 0; k < a.size(); ++k) worst = std::max(worst, std::abs(a[k] - b[k]) / std::abs(b[k]));
  return worst;
}

TEST(ScaledExtension, EffectiveLengthIsOriginalTimesFactor) {
  EXPECT_EQ(EffectiveContextLength(Llama31()), 65536);
  EXPECT_EQ(EffectiveContextLength(Qwen25Yarn()), 131072);
  EXPECT_EQ(EffectiveContextLength(RopeSpec{.head_dim = 8}), 0);
  EXPECT_EQ(EffectiveContextLength(RopeSpec{.head_dim = 8, .scaling = LinearScaling{4}}), 0);
  // The plan counts from it whatever the caller's train length (a GGUF's
  // context_length may be the original one).
  const auto plan = PlanContextExtension(ParseContextExtension("yarn"), Qwen25Yarn(), 32768, 262144);
  EXPECT_EQ(plan.train_length, 131072);
  EXPECT_EQ(std::get<YarnMethod>(plan.resolved.method).factor, 2.0);
  EXPECT_EQ(PlanContextExtension(ParseContextExtension("rerope"), Llama31(), 131072, 131072).train_length, 65536);
  EXPECT_EQ(PlanContextExtension(ParseContextExtension("rerope"), RopeSpec{.head_dim = 8}, 100, 300).train_length, 100);
}

// Llama-3-scaled and YaRN-scaled models extended 2x past their effective
// length: every frequency method's table within 1e-6 (relative) of the
// float64 reference, the attention factor too.
TEST(ScaledExtension, FrequencyMethodsMatchTheReference) {
  for (const RopeSpec& model : {Llama31(), Qwen25Yarn(), SmallLlama3(), SmallYarn()}) {
    const std::int64_t effective = EffectiveContextLength(model);
    for (const char* text : kFrequencyMethods) {
      SCOPED_TRACE(std::string(RopeScalingName(model.scaling)) + " " + text);
      const ExtensionPlan plan = PlanContextExtension(ParseContextExtension(text), model, effective, 2 * effective);
      const RopeFrequencies expected =
          reference::ComposedFrequencies(model, plan.resolved.method, effective, 2 * effective);
      const RopeFrequencies& got = FrequenciesOf(plan);
      const double error = MaxRelativeError(got.inv_freq, expected.inv_freq);
      EXPECT_LE(error, 1e-6);
      EXPECT_NEAR(got.attention_factor, expected.attention_factor, 1e-6 * expected.attention_factor);
      RecordProperty(Name(model, text), FormatValue(error));
      // Something changed: the table is not the model's.
      EXPECT_GT(MaxRelativeError(got.inv_freq, ComputeRopeFrequencies(model, 2 * effective).inv_freq), 1e-3);
    }
  }
}

// The fast pairs of a scaled model stay put, its slow ones are interpolated
// once more by the new factor: YaRN over YaRN is an interpolation by the
// product of the factors at the slow end, with the model's temperature at
// that product (0.1 ln 8 + 1), not the square of two temperatures.
TEST(ScaledExtension, YarnOverYarnInterpolatesByTheProduct) {
  const RopeSpec model = Qwen25Yarn();
  const RopeFrequencies plain = ComputeRopeFrequencies(RopeSpec{.theta = 1e6, .head_dim = 128});
  const ExtensionPlan plan = PlanContextExtension(ParseContextExtension("yarn"), model, 131072, 262144);
  const RopeFrequencies& f = FrequenciesOf(plan);
  EXPECT_DOUBLE_EQ(f.inv_freq.front(), plain.inv_freq.front());
  EXPECT_NEAR(f.inv_freq.back(), plain.inv_freq.back() / 8, 1e-15 * plain.inv_freq.back());
  EXPECT_NEAR(f.attention_factor, 0.1 * std::log(8.0) + 1, 1e-15);
  // Over Llama 3 (no temperature of its own) YaRN brings its own for the
  // new factor 2.
  const ExtensionPlan over_llama = PlanContextExtension(ParseContextExtension("yarn"), Llama31(), 65536, 131072);
  EXPECT_NEAR(FrequenciesOf(over_llama).attention_factor, 0.1 * std::log(2.0) + 1, 1e-15);
}

// Identities with the methods' own formulas (no composition code in the
// expectation): YaRN over position interpolation by s1 sees the plain
// model's turns within L_train / s1, so it is YaRN with that original
// length divided by s1 (the untruncated ramp: the composition's ramp is
// Hugging Face's without rounding to whole dimensions, where HF's
// correction range lies inside the pairs: here dimensions 10.5 to 22.5 of
// 32 pairs); NTK over unit factors is NTK.
TEST(ScaledExtension, CompositionsReduceToTheMethodsOwnFormulas) {
  const RopeSpec plain{.theta = 10000, .head_dim = 64};
  RopeSpec linear = plain;
  linear.scaling = LinearScaling{4};
  const ExtensionPlan plan = PlanContextExtension(ParseContextExtension("yarn:factor=3"), linear, 16384, 49152);
  RopeSpec yarn = plain;
  yarn.scaling = YarnScaling{.factor = 3, .original_max_position = 4096, .truncate = false};
  RopeFrequencies expected = ComputeRopeFrequencies(yarn);
  for (double& w : expected.inv_freq) w /= 4;
  EXPECT_LE(MaxRelativeError(FrequenciesOf(plan).inv_freq, expected.inv_freq), 1e-14);
  EXPECT_NEAR(FrequenciesOf(plan).attention_factor, expected.attention_factor, 1e-15);

  RopeSpec unit = plain;
  unit.scaling = FrequencyFactorScaling{std::vector<double>(32, 1.0)};
  RopeSpec ntk = plain;
  ntk.scaling = NtkAwareScaling{2.5};
  EXPECT_LE(MaxRelativeError(
                FrequenciesOf(PlanContextExtension(ParseContextExtension("ntk:factor=2.5"), unit, 100, 250)).inv_freq,
                ComputeRopeFrequencies(ntk).inv_freq),
            1e-14);
  RopeSpec dynamic = plain;
  dynamic.scaling = DynamicNtkScaling{2, 100};
  EXPECT_LE(MaxRelativeError(
                FrequenciesOf(PlanContextExtension(ParseContextExtension("dynamic-ntk"), unit, 100, 250)).inv_freq,
                ComputeRopeFrequencies(dynamic, 250).inv_freq),
            1e-14);
}

// The attention each composition runs: the kernel (float32) against the
// float64 reference with the reference's table, within 1e-5, for the
// small Llama-3 and YaRN models at 2x their effective length (256 tokens).
TEST(ScaledExtension, AttentionMatchesTheReference) {
  constexpr std::int64_t kHeads = 2;
  for (const RopeSpec& model : {SmallLlama3(), SmallYarn()}) {
    const std::int64_t effective = EffectiveContextLength(model), n = 2 * effective, d = model.head_dim;
    Buffer q(DType::kF32, n * kHeads * d), k(DType::kF32, n * kHeads * d), v(DType::kF32, n * kHeads * d);
    q.FillUniform(1, -4, 4);  // logits of a few units: attention that tables move
    k.FillUniform(2, -4, 4);
    v.FillUniform(3);
    std::vector<std::string> methods(std::begin(kFrequencyMethods), std::end(kFrequencyMethods));
    methods.insert(methods.end(), std::begin(kPositionMethods), std::end(kPositionMethods));
    for (const std::string& text : methods) {
      SCOPED_TRACE(std::string(RopeScalingName(model.scaling)) + " " + text);
      const ExtensionPlan plan = PlanContextExtension(ParseContextExtension(text), model, effective, n);
      AttentionOptions expected_options = plan.attention;
      const bool frequency = ExtensionMethodKind(plan.resolved.method) == ExtensionKind::kFrequencies;
      const RopeFrequencies table = frequency
                                        ? reference::ComposedFrequencies(model, plan.resolved.method, effective, n)
                                        : ComputeRopeFrequencies(model, n);  // a position method keeps the model's
      std::visit(
          [&](auto& e) {
            if constexpr (requires { e.frequencies; }) e.frequencies = table;
          },
          expected_options.encoding);
      Buffer got(DType::kF32, n * kHeads * d), expected(DType::kF32, n * kHeads * d);
      const std::array<std::int64_t, 4> shape{1, n, kHeads, d};
      AttentionInputs inputs{q.View(shape), k.View(shape), v.View(shape), got.View(shape)};
      Attention(inputs, plan.attention);
      inputs.out = expected.View(shape);
      reference::Attention(inputs, expected_options);
      double worst = 0;
      for (std::int64_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got.Get(i) - expected.Get(i)));
      EXPECT_LE(worst, 1e-5);
      RecordProperty(Name(model, text), FormatValue(worst));
      if (frequency) {  // the check can see a table: the model's own moves the output by far more
        std::visit(
            [&](auto& e) {
              if constexpr (requires { e.frequencies; }) e.frequencies = ComputeRopeFrequencies(model, n);
            },
            expected_options.encoding);
        reference::Attention(inputs, expected_options);
        double moved = 0;
        for (std::int64_t i = 0; i < got.size(); ++i) moved = std::max(moved, std::abs(got.Get(i) - expected.Get(i)));
        EXPECT_GT(moved, 1e-2);
      }
    }
  }
}

TEST(ScaledExtension, RefusesWhatDoesNotCompose) {
  const RopeSpec dynamic{.theta = 10000, .head_dim = 64, .scaling = DynamicNtkScaling{2, 4096}};
  for (const char* text : kFrequencyMethods) {
    ExpectError([&] { PlanContextExtension(ParseContextExtension(text), dynamic, 4096, 8192); },
                {("method = \"" + std::string(text) + "\"").c_str(), "does not compose", "rope scaling \"dynamic\"",
                 "a position method composes: rerope, leaky-rerope, window, lambda, self-extend, self-extend-kv)"});
  }
  // A position method keeps whatever table the model computes at L.
  const ExtensionPlan rerope = PlanContextExtension(ParseContextExtension("rerope"), dynamic, 4096, 8192);
  EXPECT_EQ(FrequenciesOf(rerope).inv_freq, ComputeRopeFrequencies(dynamic, 8192).inv_freq);
}

}  // namespace
}  // namespace posenc
