// Frequency tables: each scaling method's defining property, checked from
// first principles (the Hugging Face oracle tests live in tests/python).
#include <cmath>
#include <numbers>

#include "posenc/rope_frequencies.h"
#include "test_util.h"

namespace posenc {
namespace {

constexpr double kTwoPi = 2.0 * std::numbers::pi;

RopeSpec Spec(double theta, std::int64_t head_dim, RopeScaling scaling = NoScaling{}) {
  return RopeSpec{.theta = theta, .head_dim = head_dim, .scaling = std::move(scaling)};
}

TEST(RopeFrequencies, PlainTableIsGeometric) {
  const auto f = ComputeRopeFrequencies(Spec(10000, 128));
  ASSERT_EQ(f.inv_freq.size(), 64u);
  EXPECT_EQ(f.inv_freq[0], 1.0);
  // Consecutive pairs differ by theta^(-2/d); the last is theta^(-126/128).
  for (std::size_t k = 1; k < f.inv_freq.size(); ++k) {
    EXPECT_NEAR(f.inv_freq[k] / f.inv_freq[k - 1], std::pow(10000.0, -2.0 / 128), 1e-15);
  }
  EXPECT_NEAR(f.inv_freq[63], 1.1547819846894583e-04, 1e-18);  // 10000^(-63/64)
  EXPECT_EQ(f.attention_factor, 1.0);
}

TEST(RopeFrequencies, PartialRotaryUsesRotaryDimAsDenominator) {
  RopeSpec spec = Spec(10000, 96);
  spec.rotary_dim = 24;  // GPT-NeoX-20B
  const auto f = ComputeRopeFrequencies(spec);
  ASSERT_EQ(f.inv_freq.size(), 12u);
  EXPECT_NEAR(f.inv_freq[11], std::pow(10000.0, -22.0 / 24), 1e-17);
}

TEST(RopeFrequencies, LinearDividesEveryFrequency) {
  const auto plain = ComputeRopeFrequencies(Spec(10000, 64));
  const auto linear = ComputeRopeFrequencies(Spec(10000, 64, LinearScaling{4}));
  for (std::size_t k = 0; k < plain.inv_freq.size(); ++k) {
    EXPECT_DOUBLE_EQ(linear.inv_freq[k], plain.inv_freq[k] / 4);
  }
}

// NTK-aware: the fastest pair is untouched, the slowest is interpolated by
// exactly alpha (theta' = theta alpha^(d/(d-2)) makes theta'^(-(d-2)/d) = theta^(-(d-2)/d)/alpha).
TEST(RopeFrequencies, NtkKeepsFastestAndInterpolatesSlowestByAlpha) {
  for (double alpha : {2.0, 8.0}) {
    const auto plain = ComputeRopeFrequencies(Spec(10000, 128));
    const auto ntk = ComputeRopeFrequencies(Spec(10000, 128, NtkAwareScaling{alpha}));
    EXPECT_DOUBLE_EQ(ntk.inv_freq.front(), plain.inv_freq.front());
    EXPECT_NEAR(ntk.inv_freq.back() * alpha / plain.inv_freq.back(), 1.0, 1e-13);
  }
}

TEST(RopeFrequencies, DynamicNtkIsPlainUpToOriginalLengthAndGrowsBeyond) {
  const auto spec = Spec(10000, 128, DynamicNtkScaling{.factor = 2, .original_max_position = 4096});
  const auto plain = ComputeRopeFrequencies(Spec(10000, 128));
  EXPECT_EQ(ComputeRopeFrequencies(spec, 0).inv_freq, plain.inv_freq);
  EXPECT_EQ(ComputeRopeFrequencies(spec, 4096).inv_freq, plain.inv_freq);
  // At L = 2 L0 with factor 2 the base scale is 2*2 - 1 = 3: the NTK table with alpha 3.
  const auto at_double = ComputeRopeFrequencies(spec, 8192);
  const auto ntk3 = ComputeRopeFrequencies(Spec(10000, 128, NtkAwareScaling{3}));
  for (std::size_t k = 0; k < plain.inv_freq.size(); ++k) {
    EXPECT_NEAR(at_double.inv_freq[k] / ntk3.inv_freq[k], 1.0, 1e-14);
  }
  // A pure function of the length: asking again for a short length resets.
  EXPECT_EQ(ComputeRopeFrequencies(spec, 100).inv_freq, plain.inv_freq);
}

YarnScaling Qwen2Yarn() { return YarnScaling{.factor = 4, .original_max_position = 32768}; }

TEST(RopeFrequencies, YarnExtrapolatesFastAndInterpolatesSlowDimensions) {
  const auto spec = Spec(1e6, 128, Qwen2Yarn());
  const auto plain = ComputeRopeFrequencies(Spec(1e6, 128));
  const auto yarn = ComputeRopeFrequencies(spec);
  const auto weights = YarnExtrapolationWeights(spec);
  ASSERT_EQ(weights.size(), 64u);
  for (std::size_t k = 0; k < weights.size(); ++k) {
    const double rotations = 32768.0 * plain.inv_freq[k] / kTwoPi;
    // Pairs turning more than beta_fast = 32 times in L0 keep their frequency,
    // pairs turning less than beta_slow = 1 time are divided by the factor.
    if (rotations > 32 * 1.5) {
      EXPECT_EQ(weights[k], 1.0) << k;
    }
    if (rotations < 1 / 1.5) {
      EXPECT_EQ(weights[k], 0.0) << k;
    }
    const double expected = plain.inv_freq[k] * (weights[k] + (1 - weights[k]) / 4);
    EXPECT_NEAR(yarn.inv_freq[k], expected, 1e-15 * plain.inv_freq[k]);
  }
  EXPECT_NEAR(yarn.attention_factor, 0.1 * std::log(4.0) + 1.0, 1e-15);  // 1.1386...
}

TEST(RopeFrequencies, YarnAttentionFactorForms) {
  YarnScaling deepseek{.factor = 40, .original_max_position = 4096, .mscale = 0.707, .mscale_all_dim = 0.707};
  EXPECT_DOUBLE_EQ(ComputeRopeFrequencies(Spec(10000, 64, deepseek)).attention_factor, 1.0);
  deepseek.mscale = 1.0;
  deepseek.mscale_all_dim = 0.0;  // zero means "not given", as in the reference code
  EXPECT_NEAR(ComputeRopeFrequencies(Spec(10000, 64, deepseek)).attention_factor, 0.1 * std::log(40.0) + 1, 1e-15);
  deepseek.mscale_all_dim = 0.5;
  EXPECT_NEAR(ComputeRopeFrequencies(Spec(10000, 64, deepseek)).attention_factor,
              (0.1 * std::log(40.0) + 1) / (0.05 * std::log(40.0) + 1), 1e-15);
  deepseek.attention_factor = 0.9;  // explicit wins
  deepseek.attn_factor = 2.0;       // llama.cpp's multiplier on top
  EXPECT_DOUBLE_EQ(ComputeRopeFrequencies(Spec(10000, 64, deepseek)).attention_factor, 1.8);
}

TEST(RopeFrequencies, YarnExtFactorZeroIsPureInterpolation) {
  YarnScaling yarn = Qwen2Yarn();
  yarn.ext_factor = 0;
  const auto plain = ComputeRopeFrequencies(Spec(1e6, 128));
  const auto f = ComputeRopeFrequencies(Spec(1e6, 128, yarn));
  for (std::size_t k = 0; k < plain.inv_freq.size(); ++k) {
    EXPECT_DOUBLE_EQ(f.inv_freq[k], plain.inv_freq[k] / 4);
  }
}

TEST(RopeFrequencies, YarnTruncateRoundsTheRampToWholeDimensions) {
  YarnScaling yarn = Qwen2Yarn();
  const auto truncated = YarnExtrapolationWeights(Spec(1e6, 128, yarn));
  yarn.truncate = false;
  const auto fractional = YarnExtrapolationWeights(Spec(1e6, 128, yarn));
  // Truncation widens the ramp outward: never less extrapolation at the fast
  // end, never more at the slow end, and the tables differ somewhere.
  bool differ = false;
  for (std::size_t k = 0; k < truncated.size(); ++k) differ |= truncated[k] != fractional[k];
  EXPECT_TRUE(differ);
  EXPECT_EQ(truncated.front(), 1.0);
  EXPECT_EQ(fractional.back(), 0.0);
}

TEST(RopeFrequencies, Llama3KeepsHighAndDividesLowFrequencies) {
  const Llama3Scaling llama3{.factor = 8, .low_freq_factor = 1, .high_freq_factor = 4, .original_max_position = 8192};
  const auto plain = ComputeRopeFrequencies(Spec(500000, 128));
  const auto f = ComputeRopeFrequencies(Spec(500000, 128, llama3));
  int kept = 0, divided = 0, smoothed = 0;
  for (std::size_t k = 0; k < plain.inv_freq.size(); ++k) {
    const double wavelength = kTwoPi / plain.inv_freq[k];
    if (wavelength < 8192.0 / 4) {
      EXPECT_EQ(f.inv_freq[k], plain.inv_freq[k]);
      ++kept;
    } else if (wavelength > 8192.0 / 1) {
      EXPECT_DOUBLE_EQ(f.inv_freq[k], plain.inv_freq[k] / 8);
      ++divided;
    } else {
      EXPECT_LT(f.inv_freq[k], plain.inv_freq[k]);
      EXPECT_GT(f.inv_freq[k], plain.inv_freq[k] / 8);
      ++smoothed;
    }
  }
  // Llama 3.1 8B (theta 5e5, d 128): wavelengths 2*pi*5e5^(k/64) against
  // 2048 and 8192 give 29 kept, 6 mixed, 29 divided pairs.
  EXPECT_EQ(kept, 29);
  EXPECT_EQ(smoothed, 6);
  EXPECT_EQ(divided, 29);
}

TEST(RopeFrequencies, LongRopeChoosesFactorSetPerSequenceLength) {
  RopeSpec spec = Spec(10000, 8);
  spec.scaling = LongRopeScaling{
      .short_factor = {1, 1.5, 2, 3}, .long_factor = {2, 4, 8, 16}, .original_max_position = 4096, .factor = 32};
  const auto plain = ComputeRopeFrequencies(Spec(10000, 8));
  const auto short_set = ComputeRopeFrequencies(spec, 4096);
  const auto long_set = ComputeRopeFrequencies(spec, 4097);
  EXPECT_DOUBLE_EQ(short_set.inv_freq[3], plain.inv_freq[3] / 3);
  EXPECT_DOUBLE_EQ(long_set.inv_freq[3], plain.inv_freq[3] / 16);
  // Phi-3-mini-128k: sqrt(1 + ln(131072/4096) / ln(4096)).
  EXPECT_NEAR(short_set.attention_factor, 1.1902380714238083, 1e-15);
  EXPECT_EQ(long_set.attention_factor, short_set.attention_factor);
}

TEST(RopeFrequencies, FactorsDivideEachPair) {
  RopeSpec spec = Spec(10000, 8, FrequencyFactorScaling{{1, 2, 4, 8}});
  const auto plain = ComputeRopeFrequencies(Spec(10000, 8));
  const auto f = ComputeRopeFrequencies(spec);
  for (std::size_t k = 0; k < 4; ++k) EXPECT_DOUBLE_EQ(f.inv_freq[k], plain.inv_freq[k] / (1 << k));
}

TEST(RopeFrequencies, OriginalContextLengthComesFromTheScaling) {
  EXPECT_EQ(OriginalContextLength(Spec(10000, 8)), 0);
  EXPECT_EQ(OriginalContextLength(Spec(10000, 8, Qwen2Yarn())), 32768);
  EXPECT_EQ(OriginalContextLength(Spec(10000, 8, Llama3Scaling{})), 8192);
}

TEST(RopeFrequencies, NegativeSequenceLengthIsAnError) {
  testing::ExpectError([] { ComputeRopeFrequencies(Spec(10000, 8), -1); }, {"seq_len = -1"});
}

}  // namespace
}  // namespace posenc
