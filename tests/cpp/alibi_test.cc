// ALiBi slopes against the paper's published values, the interleaved series
// for head counts that are not powers of two, shards, and the two bias forms.
#include <cmath>
#include <string>

#include "posenc/alibi.h"
#include "posenc/relative_attention.h"
#include "test_util.h"

namespace posenc {
namespace {

using testing::ExpectError;

// Press et al.: "for 8 heads the slopes are 1/2^1, 1/2^2, ..., 1/2^8".
TEST(AlibiSlopes, EightHeadsArePaperValues) {
  const auto slopes = AlibiSlopes({.heads = 8});
  ASSERT_EQ(slopes.size(), 8u);
  for (int h = 0; h < 8; ++h) EXPECT_EQ(slopes[h], 1.0 / (1 << (h + 1))) << h;
}

// "For 16 heads ... 1/2^0.5, 1/2^1, 1/2^1.5, ..., 1/2^8".
TEST(AlibiSlopes, SixteenHeadsArePaperValues) {
  const auto slopes = AlibiSlopes({.heads = 16});
  for (int h = 0; h < 16; ++h) EXPECT_DOUBLE_EQ(slopes[h], std::pow(2.0, -0.5 * (h + 1))) << h;
}

// 12 heads: the 8-head series, then the 16-head series' odd powers
// 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5, in that order (never sorted).
TEST(AlibiSlopes, TwelveHeadsInterleaveTheSecondSeries) {
  const auto slopes = AlibiSlopes({.heads = 12});
  const double expect[] = {1.0 / 2,
                           1.0 / 4,
                           1.0 / 8,
                           1.0 / 16,
                           1.0 / 32,
                           1.0 / 64,
                           1.0 / 128,
                           1.0 / 256,
                           std::pow(2.0, -0.5),
                           std::pow(2.0, -1.5),
                           std::pow(2.0, -2.5),
                           std::pow(2.0, -3.5)};
  ASSERT_EQ(slopes.size(), 12u);
  for (int h = 0; h < 12; ++h) EXPECT_DOUBLE_EQ(slopes[h], expect[h]) << h;
  EXPECT_FALSE(std::is_sorted(slopes.rbegin(), slopes.rend())) << "slopes must stay in head order";
}

// Any count: the first m = 2^floor(log2 n) are 2^(-8k/m), the rest 2^(-8(2k-1)/(2m)).
TEST(AlibiSlopes, AnyHeadCountFollowsTheConstruction) {
  for (int n = 1; n <= 80; ++n) {
    const auto slopes = AlibiSlopes({.heads = n});
    int m = 1;
    while (m * 2 <= n) m *= 2;
    for (int h = 0; h < n; ++h) {
      const double expect = h < m ? std::exp2(-8.0 * (h + 1) / m) : std::exp2(-8.0 * (2 * (h - m) + 1) / (2 * m));
      ASSERT_DOUBLE_EQ(slopes[h], expect) << "heads=" << n << " h=" << h;
    }
  }
  // max_bias rescales the exponents (ggml's parameter).
  EXPECT_DOUBLE_EQ(AlibiSlopes({.heads = 4, .max_bias = 16})[0], 1.0 / 16);
}

// A tensor-parallel shard slices the global list (flashinfer#5101).
TEST(AlibiSlopes, ShardsSliceTheGlobalList) {
  const AlibiSpec spec{.heads = 12};
  const auto all = AlibiSlopes(spec);
  const auto shard = AlibiSlopes(spec, 6, 6);
  EXPECT_EQ(shard, std::vector<double>(all.begin() + 6, all.end()));
  EXPECT_NE(shard, AlibiSlopes({.heads = 6}));
  ExpectError([&] { AlibiSlopes(spec, 10, 4); }, {"[alibi] head_count = 4", "heads - head_begin = 2"});
}

TEST(AlibiSpec, RejectsBadFields) {
  ExpectError([] { AlibiSlopes({.heads = 0}); }, {"[alibi] heads = 0", "must be > 0"});
  ExpectError([] { AlibiSlopes({.heads = 8, .max_bias = -1}); }, {"max_bias = -1"});
  ExpectError([] { ParseAlibiForm("causal"); }, {"form = \"causal\""});
  EXPECT_EQ(ParseAlibiForm("key-position"), AlibiForm::kKeyPosition);
}

// heads * q_len * k_len is sized without wrapping: 2^32 x 2^32 once wrapped
// to an empty buffer that the loop then wrote past (posenc.alibi_bias(1,
// 2**32, 2**32) crashed). Too large for memory is an error naming q_len.
TEST(AlibiBias, SizesTooLargeForMemoryAreErrors) {
  const std::int64_t big = std::int64_t{1} << 32;
  ExpectError([&] { AlibiBias({.heads = 1}, big, big, 0); },
              {"[alibi] q_len = 4294967296: the [heads, q_len, k_len] bias needs", "GiB"});
  ExpectError([&] { AlibiBias({.heads = 4}, 1, std::int64_t{1} << 62, 0); }, {"[alibi] q_len = 1", "needs"});
}

TEST(AlibiBias, FormsAndDecodeOffset) {
  const AlibiSpec distance{.heads = 2};
  const auto bias = AlibiBias(distance, 3, 5, 2);  // queries at 2, 3, 4
  // head 0 slope 1/16 (2 heads: 2^-4, 2^-8); query 0 at position 2, key 4.
  EXPECT_DOUBLE_EQ(bias[0 * 15 + 0 * 5 + 4], -2.0 / 16);
  EXPECT_DOUBLE_EQ(bias[1 * 15 + 2 * 5 + 0], -4.0 / 256);
  const AlibiSpec keypos{.heads = 2, .form = AlibiForm::kKeyPosition};
  const auto kb = AlibiBias(keypos, 3, 5, 2);
  EXPECT_DOUBLE_EQ(kb[0 * 15 + 1 * 5 + 3], 3.0 / 16);
  // Decode: the bias of the last query equals the full matrix's last row.
  const auto full = AlibiBias(distance, 5, 5, 0);
  const auto step = AlibiBias(distance, 1, 5, 4);
  for (int h = 0; h < 2; ++h) {
    for (int j = 0; j < 5; ++j) EXPECT_EQ(step[h * 5 + j], full[h * 25 + 4 * 5 + j]);
  }
}

// On causal rows the two forms differ by a per-row constant: the same
// softmax, different raw scores (flash-attention#540).
TEST(AlibiBias, FormsGiveTheSameCausalSoftmaxButDifferentScores) {
  const RelativeAttentionShape shape{.batch = 1, .heads = 3, .q_len = 6, .k_len = 6, .head_dim = 4};
  std::vector<double> q(72), k(72), v(72);
  for (int i = 0; i < 72; ++i) {
    q[i] = std::sin(i * 0.7);
    k[i] = std::cos(i * 1.3);
    v[i] = std::sin(i * 0.1 + 1);
  }
  const RelativeAttentionInputs in{.shape = shape, .q = q, .k = k, .v = v, .mask = RelativeAttentionMask::kCausal};
  const auto a = reference::AlibiAttention(in, {.heads = 3, .form = AlibiForm::kDistance});
  const auto b = reference::AlibiAttention(in, {.heads = 3, .form = AlibiForm::kKeyPosition});
  double score_diff = 0;
  for (std::size_t i = 0; i < a.probs.size(); ++i) {
    EXPECT_NEAR(a.probs[i], b.probs[i], 1e-15);
    score_diff = std::max(score_diff, std::abs(a.scores[i] - b.scores[i]));
  }
  EXPECT_GT(score_diff, 0.1);
  // Without the causal mask the key-position form is not the distance form.
  RelativeAttentionInputs encoder = in;
  encoder.mask = RelativeAttentionMask::kNone;
  const auto c = reference::AlibiAttention(encoder, {.heads = 3, .form = AlibiForm::kDistance});
  const auto d = reference::AlibiAttention(encoder, {.heads = 3, .form = AlibiForm::kKeyPosition});
  double prob_diff = 0;
  for (std::size_t i = 0; i < c.probs.size(); ++i) prob_diff = std::max(prob_diff, std::abs(c.probs[i] - d.probs[i]));
  EXPECT_GT(prob_diff, 1e-3);
}

// BLOOM with left padding: key positions count real tokens only.
TEST(AlibiBias, KeyBiasFromMask) {
  const std::vector<std::uint8_t> mask = {0, 0, 1, 1, 1, 1, 1, 1};
  const auto bias = AlibiKeyBiasFromMask({.heads = 2}, mask, 2, 4);
  const double s0 = 1.0 / 16;
  EXPECT_EQ(bias[0 * 8 + 0 * 4 + 0], 0.0);
  EXPECT_EQ(bias[0 * 8 + 0 * 4 + 3], 1 * s0);
  EXPECT_EQ(bias[1 * 8 + 0 * 4 + 3], 3 * s0);
}

}  // namespace
}  // namespace posenc
