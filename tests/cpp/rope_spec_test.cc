// Validation of RoPE specs: every bad field is an error naming the field,
// its value and the rule.
#include <gtest/gtest.h>

#include "posenc/error.h"
#include "posenc/rope_spec.h"
#include "test_util.h"

namespace posenc {
namespace {

using testing::ExpectError;

RopeSpec Llama2() { return RopeSpec{.theta = 10000.0, .head_dim = 128}; }

TEST(RopeSpec, ValidSpecsPass) {
  EXPECT_NO_THROW(Llama2().Validate());
  RopeSpec neox{.theta = 10000.0, .head_dim = 96, .rotary_dim = 24};
  EXPECT_NO_THROW(neox.Validate());
  EXPECT_EQ(neox.Pairs(), 12);
}

TEST(RopeSpec, OddRotaryDimIsRejected) {
  RopeSpec spec = Llama2();
  spec.rotary_dim = 63;
  ExpectError([&] { spec.Validate(); }, {"[rope]", "rotary_dim = 63", "must be even"});
  spec.rotary_dim = 0;
  spec.head_dim = 65;
  ExpectError([&] { spec.Validate(); }, {"head_dim = 65", "must be even"});
}

TEST(RopeSpec, RotaryDimPastHeadDimIsRejected) {
  RopeSpec spec = Llama2();
  spec.rotary_dim = 130;
  ExpectError([&] { spec.Validate(); }, {"rotary_dim = 130", "head_dim = 128"});
}

TEST(RopeSpec, NonPositiveFactorsAreRejected) {
  for (double factor : {0.0, -2.0}) {
    RopeSpec spec = Llama2();
    spec.scaling = LinearScaling{factor};
    ExpectError([&] { spec.Validate(); }, {"factor = ", "must be a finite number > 0"});
  }
  RopeSpec ntk = Llama2();
  ntk.scaling = NtkAwareScaling{-1.0};
  ExpectError([&] { ntk.Validate(); }, {"alpha = -1"});
}

TEST(RopeSpec, YarnBetasMustBeOrdered) {
  RopeSpec spec = Llama2();
  spec.scaling = YarnScaling{.factor = 4, .original_max_position = 4096, .beta_fast = 1, .beta_slow = 32};
  ExpectError([&] { spec.Validate(); }, {"beta_fast = 1", "greater than beta_slow = 32"});
  spec.scaling = YarnScaling{.factor = 4, .original_max_position = 0};
  ExpectError([&] { spec.Validate(); }, {"original_max_position = 0"});
}

TEST(RopeSpec, Llama3FactorsMustBeOrdered) {
  RopeSpec spec = Llama2();
  spec.scaling = Llama3Scaling{.factor = 8, .low_freq_factor = 4, .high_freq_factor = 1};
  ExpectError([&] { spec.Validate(); }, {"high_freq_factor = 1", "low_freq_factor = 4"});
}

TEST(RopeSpec, LongRopeFactorListsMustCoverEveryPair) {
  RopeSpec spec{.theta = 10000, .head_dim = 8};
  spec.scaling = LongRopeScaling{
      .short_factor = {1, 1, 1}, .long_factor = {1, 1, 1, 1}, .original_max_position = 4096, .factor = 32};
  ExpectError([&] { spec.Validate(); }, {"short_factor.size() = 3", "rotary_dim / 2 = 4"});
  spec.scaling = LongRopeScaling{
      .short_factor = {1, 1, 1, 1}, .long_factor = {1, 1, 0, 1}, .original_max_position = 4096, .factor = 32};
  ExpectError([&] { spec.Validate(); }, {"long_factor[2] = 0"});
}

TEST(RopeSpec, ThetaMustExceedOne) {
  RopeSpec spec = Llama2();
  spec.theta = 1.0;
  ExpectError([&] { spec.Validate(); }, {"theta = 1", "> 1"});
}

TEST(RopeSpec, RotaryDimFromFactorFollowsHuggingFace) {
  EXPECT_EQ(RotaryDimFromFactor(96, 0.25), 24);  // GPT-NeoX-20B
  EXPECT_EQ(RotaryDimFromFactor(80, 0.4), 32);   // Phi-2
  EXPECT_EQ(RotaryDimFromFactor(128, 1.0), 128);
  ExpectError([] { RotaryDimFromFactor(128, 0.0); }, {"partial_rotary_factor = 0", "(0, 1]"});
  ExpectError([] { RotaryDimFromFactor(10, 0.5); }, {"even rotary_dim", "= 5"});
}

TEST(RopeSpec, NamesRoundTrip) {
  EXPECT_EQ(ParseRopeLayout(RopeLayoutName(RopeLayout::kInterleaved)), RopeLayout::kInterleaved);
  EXPECT_EQ(ParseRopeLayout(RopeLayoutName(RopeLayout::kHalfSplit)), RopeLayout::kHalfSplit);
  ExpectError([] { ParseRopeLayout("diagonal"); }, {"layout = \"diagonal\""});
  EXPECT_EQ(RopeScalingName(YarnScaling{}), "yarn");
  EXPECT_EQ(RopeScalingName(FrequencyFactorScaling{}), "factors");
}

}  // namespace
}  // namespace posenc
