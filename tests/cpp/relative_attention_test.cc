// The float64 relative-attention references: each form against a literal
// re-derivation (XLNet's rel_shift, DeBERTa's gathers and transposes),
// reductions to plain attention, masks and argument checks. The Hugging
// Face comparisons live in tests/python/test_encodings_hf.py.
#include <cmath>
#include <random>
#include <string>

#include "posenc/deberta_relative.h"
#include "posenc/relative_attention.h"
#include "posenc/shaw_relative.h"
#include "posenc/xlnet_relative.h"
#include "test_util.h"

namespace posenc {
namespace {

using testing::ExpectError;

std::vector<double> Random(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> dist(0, 1);
  std::vector<double> v(n);
  for (double& x : v) x = dist(rng);
  return v;
}

struct Problem {
  RelativeAttentionShape shape;
  std::vector<double> q, k, v;
  explicit Problem(RelativeAttentionShape s, std::uint32_t seed = 1) : shape(s) {
    q = Random(s.batch * s.heads * s.q_len * s.head_dim, seed);
    k = Random(s.batch * s.heads * s.k_len * s.head_dim, seed + 1);
    v = Random(s.batch * s.heads * s.k_len * s.ValueDim(), seed + 2);
  }
  RelativeAttentionInputs Inputs(RelativeAttentionMask mask = RelativeAttentionMask::kNone) const {
    return {.shape = shape, .q = q, .k = k, .v = v, .mask = mask};
  }
};

void ExpectClose(const std::vector<double>& a, const std::vector<double>& b, double tol = 1e-12) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], tol) << i;
}

TEST(PlainAttention, SoftmaxRowsAndCausalMask) {
  const Problem p({.batch = 2, .heads = 2, .q_len = 3, .k_len = 5, .head_dim = 4, .value_dim = 3});
  const auto r = reference::PlainAttention(p.Inputs(RelativeAttentionMask::kCausal));
  for (int row = 0; row < 2 * 2 * 3; ++row) {
    double sum = 0;
    const int i = row % 3;
    for (int j = 0; j < 5; ++j) {
      sum += r.probs[row * 5 + j];
      if (j > 2 + i) EXPECT_EQ(r.probs[row * 5 + j], 0.0);  // queries at 2, 3, 4
    }
    EXPECT_NEAR(sum, 1.0, 1e-15);
  }
  EXPECT_EQ(r.output.size(), 2u * 2 * 3 * 3);
  // Key padding: a padded key gets nothing.
  std::vector<std::uint8_t> padding = {0, 1, 1, 1, 1, 1, 1, 1, 1, 0};
  auto in = p.Inputs();
  in.key_padding = padding;
  const auto padded = reference::PlainAttention(in);
  for (int row = 0; row < 6; ++row) EXPECT_EQ(padded.probs[row * 5 + 0], 0.0);
  for (int row = 6; row < 12; ++row) EXPECT_EQ(padded.probs[row * 5 + 4], 0.0);
}

TEST(BiasedAttention, T5AndAlibiAreBiasedAttention) {
  const Problem p({.batch = 2, .heads = 3, .q_len = 4, .k_len = 6, .head_dim = 8});
  const T5BucketSpec spec{.num_buckets = 8, .max_distance = 16};
  const auto weights = Random(8 * 3, 9);
  const auto t5 = reference::T5Attention(p.Inputs(), spec, weights);
  auto unscaled = p.Inputs();
  unscaled.scale = 1.0;  // T5 does not scale q.k
  const auto biased = reference::BiasedAttention(unscaled, T5Bias(spec, weights, 3, 4, 6, 2));
  ExpectClose(t5.scores, biased.scores, 0);
  ExpectClose(t5.output, biased.output, 0);
  const auto alibi = reference::AlibiAttention(p.Inputs(), {.heads = 3});
  const auto alibi_biased = reference::BiasedAttention(p.Inputs(), AlibiBias({.heads = 3}, 4, 6, 2));
  ExpectClose(alibi.scores, alibi_biased.scores, 0);
  ExpectError([&] { reference::AlibiAttention(p.Inputs(), {.heads = 4}); }, {"[alibi] spec.heads = 4"});
  ExpectError([&] { reference::BiasedAttention(p.Inputs(), std::vector<double>(5)); }, {"bias.size() = 5"});
}

TEST(ShawAttention, ReducesToPlainAndShiftsKeys) {
  const Problem p({.batch = 1, .heads = 2, .q_len = 5, .k_len = 5, .head_dim = 4});
  const ShawRelativeSpec spec{.max_distance = 2, .value_term = true};
  const std::vector<double> zeros(spec.Rows() * 4, 0.0);
  const auto plain = reference::PlainAttention(p.Inputs());
  const auto shaw0 = reference::ShawAttention(p.Inputs(), spec, zeros, zeros);
  ExpectClose(shaw0.scores, plain.scores);
  ExpectClose(shaw0.output, plain.output);
  // The same vector c at every distance: keys k + c, values v + c.
  std::vector<double> c_rows(spec.Rows() * 4);
  for (std::size_t i = 0; i < c_rows.size(); ++i) c_rows[i] = 0.1 * static_cast<double>(i % 4) - 0.2;
  Problem shifted = p;
  for (std::size_t i = 0; i < shifted.k.size(); ++i) shifted.k[i] += c_rows[i % 4];
  for (std::size_t i = 0; i < shifted.v.size(); ++i) shifted.v[i] += c_rows[i % 4];
  const auto expect = reference::PlainAttention(shifted.Inputs());
  const auto got = reference::ShawAttention(p.Inputs(), spec, c_rows, c_rows);
  ExpectClose(got.scores, expect.scores);
  ExpectClose(got.output, expect.output);
}

TEST(ShawAttention, DistanceConventionsAndClipping) {
  const ShawRelativeSpec shaw{.max_distance = 3};
  EXPECT_EQ(shaw.Row(5, 7), 3 + 2);  // j - i = 2
  EXPECT_EQ(shaw.Row(5, 0), 0);      // -5 clips to -3
  const ShawRelativeSpec bert{.max_distance = 3, .distance = RelativeDistance::kQueryMinusKey};
  EXPECT_EQ(bert.Row(5, 7), 3 - 2);
  EXPECT_EQ(bert.Row(9, 0), 6);
  const Problem p({.batch = 1, .heads = 1, .q_len = 2, .k_len = 2, .head_dim = 2});
  ExpectError([&] { reference::ShawAttention(p.Inputs(), shaw, std::vector<double>(3), {}); },
              {"[shaw] rel_k.size() = 3", "= 14"});
  ExpectError([&] { ShawRelativeSpec{.max_distance = -1}.Validate(); }, {"max_distance = -1"});
}

// XLNet: the reference's direct indexing equals the literal rel_shift of the
// materialized position scores.
TEST(XLNetAttention, EqualsRelShiftOfTheMaterializedPositionScores) {
  const std::int64_t batch = 2, heads = 2, q_len = 4, k_len = 7, d = 3, rows = q_len + k_len;
  const Problem p({.batch = batch, .heads = heads, .q_len = q_len, .k_len = k_len, .head_dim = d});
  const auto rel_k = Random(batch * heads * rows * d, 20);
  const auto u = Random(heads * d, 21), v = Random(heads * d, 22);
  const auto r = reference::XLNetAttention(p.Inputs(), {.rel_k = rel_k, .r_w_bias = u, .r_r_bias = v});
  const double scale = 1 / std::sqrt(3.0);
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t h = 0; h < heads; ++h) {
      // bd_raw [q_len, rows] -> reshape [rows, q_len], drop row 0, reshape
      // [q_len, rows - 1], keep the first k_len columns.
      std::vector<double> raw(q_len * rows);
      for (std::int64_t i = 0; i < q_len; ++i) {
        for (std::int64_t m = 0; m < rows; ++m) {
          double s = 0;
          for (std::int64_t x = 0; x < d; ++x) {
            s += (p.q[((b * heads + h) * q_len + i) * d + x] + v[h * d + x]) *
                 rel_k[((b * heads + h) * rows + m) * d + x];
          }
          raw[i * rows + m] = s;
        }
      }
      for (std::int64_t i = 0; i < q_len; ++i) {
        for (std::int64_t j = 0; j < k_len; ++j) {
          const double bd = raw[q_len + i * (rows - 1) + j];  // the flat index after the shift
          double ac = 0;
          for (std::int64_t x = 0; x < d; ++x) {
            ac += (p.q[((b * heads + h) * q_len + i) * d + x] + u[h * d + x]) *
                  p.k[((b * heads + h) * k_len + j) * d + x];
          }
          ASSERT_NEAR(r.scores[((b * heads + h) * q_len + i) * k_len + j], scale * (ac + bd), 1e-12);
        }
      }
    }
  }
  ExpectError(
      [&] {
        auto in = p.Inputs();
        in.query_offset = 0;
        reference::XLNetAttention(in, {.rel_k = rel_k, .r_w_bias = u, .r_r_bias = v});
      },
      {"[xlnet] query_offset = 0", "k_len - q_len = 3"});
}

// Sizes too large for memory are errors, not a wrapped buffer written past
// (deberta_relative_positions(2**32, 2**32) crashed) or an endless push_back.
TEST(RelativeForms, SizesTooLargeForMemoryAreErrors) {
  const std::int64_t big = std::int64_t{1} << 32;
  ExpectError([&] { DebertaRelativePositions({}, big, big); },
              {"[deberta] q_len = 4294967296: the [q_len, k_len] positions needs", "GiB"});
  const std::int64_t huge = std::int64_t{1} << 62;  // k_len + q_len = 2^63: past int64 too
  ExpectError([&] { XLNetRelativeDistances(huge, huge, XLNetAttnType::kBidirectional); },
              {"[xlnet] k_len = 4611686018427387904: the distances needs"});
}

TEST(XLNetEncoding, DistancesAndSinusoid) {
  EXPECT_EQ(XLNetRelativeDistances(2, 3, XLNetAttnType::kBidirectional), (std::vector<double>{3, 2, 1, 0, -1}));
  EXPECT_EQ(XLNetRelativeDistances(2, 3, XLNetAttnType::kUnidirectional), (std::vector<double>{3, 2, 1, 0}));
  EXPECT_EQ(XLNetRelativeDistances(2, 3, XLNetAttnType::kBidirectional, 1), (std::vector<double>{1, 1, 1, 0, -1}));
  const auto enc = XLNetRelativeEncoding(4, 1, 2, XLNetAttnType::kBidirectional);  // distances 2, 1
  EXPECT_DOUBLE_EQ(enc[0], std::sin(2.0));
  EXPECT_DOUBLE_EQ(enc[1], std::sin(2.0 / 100));
  EXPECT_DOUBLE_EQ(enc[2], std::cos(2.0));
  EXPECT_DOUBLE_EQ(enc[4 + 3], std::cos(1.0 / 100));
}

TEST(DebertaBuckets, LogBucketPosition) {
  // deberta-v3-base: 256 buckets, 512 positions.
  for (std::int64_t d = -128; d <= 128; ++d) EXPECT_EQ(DebertaLogBucket(d, 256, 512), d);
  std::int64_t previous = 128;
  for (std::int64_t d = 129; d < 2000; ++d) {
    const auto b = DebertaLogBucket(d, 256, 512);
    ASSERT_GE(b, previous) << d;
    ASSERT_EQ(DebertaLogBucket(-d, 256, 512), -b);
    if (d <= 511) ASSERT_LE(b, 255) << d;
    previous = b;
  }
  EXPECT_EQ(DebertaLogBucket(511, 256, 512), 255);
  ExpectError([] { DebertaRelativeSpec{.position_buckets = 256, .max_relative_positions = 100}.Validate(); },
              {"[deberta] max_relative_positions = 100"});
  ExpectError([] { DebertaRelativeSpec{.position_buckets = 7}.Validate(); }, {"position_buckets = 7"});
}

// DeBERTa: the reference against a literal transcription of the gathers.
TEST(DebertaAttention, EqualsTheLiteralGathers) {
  const std::int64_t heads = 2, n = 12, d = 4;
  const DebertaRelativeSpec spec{.position_buckets = 8, .max_relative_positions = 10};
  const std::int64_t span = spec.Span();
  const Problem p({.batch = 1, .heads = heads, .q_len = n, .k_len = n, .head_dim = d});
  const auto kr = Random(heads * 2 * span * d, 30), qr = Random(heads * 2 * span * d, 31);
  const auto r = reference::DebertaAttention(p.Inputs(), spec, kr, qr);
  const auto rel = DebertaRelativePositions(spec, n, n);
  const auto dot = [&](const double* a, const double* b) {
    double s = 0;
    for (std::int64_t x = 0; x < d; ++x) s += a[x] * b[x];
    return s;
  };
  const double scale = 1 / std::sqrt(static_cast<double>(d) * 3);
  for (std::int64_t h = 0; h < heads; ++h) {
    for (std::int64_t i = 0; i < n; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        const double* q = p.q.data() + (h * n + i) * d;
        const double* k = p.k.data() + (h * n + j) * d;
        const std::int64_t c2p = std::clamp<std::int64_t>(rel[i * n + j] + span, 0, 2 * span - 1);
        // p2c_att[x, m] = k_x . Qr[m]; gathered at [x, y] with -rel[x, y] + span; transposed.
        const std::int64_t p2c = std::clamp<std::int64_t>(-rel[j * n + i] + span, 0, 2 * span - 1);
        const double expect = scale * (dot(q, k) + dot(q, kr.data() + (h * 2 * span + c2p) * d) +
                                       dot(k, qr.data() + (h * 2 * span + p2c) * d));
        ASSERT_NEAR(r.scores[(h * n + i) * n + j], expect, 1e-12) << i << "," << j;
      }
    }
  }
  // c2p only: no pos_query needed, scale 1/sqrt(2d).
  const DebertaRelativeSpec c2p_only{.position_buckets = 8, .max_relative_positions = 10, .p2c = false};
  EXPECT_NO_THROW(reference::DebertaAttention(p.Inputs(), c2p_only, kr, {}));
  EXPECT_DOUBLE_EQ(c2p_only.Scale(4), 1 / std::sqrt(8.0));
  ExpectError([&] { reference::DebertaAttention(p.Inputs(), spec, kr, {}); }, {"[deberta] pos_query.size() = 0"});
}

TEST(RelativeAttentionInputs, RejectsBadShapes) {
  const Problem p({.batch = 1, .heads = 2, .q_len = 3, .k_len = 3, .head_dim = 4});
  auto in = p.Inputs();
  in.shape.heads = 0;
  ExpectError([&] { reference::PlainAttention(in); }, {"[attention] shape.heads = 0", "> 0"});
  in = p.Inputs();
  in.q = std::span<const double>(p.q.data(), 5);
  ExpectError([&] { reference::PlainAttention(in); }, {"q.size() = 5", "batch * heads * q_len * head_dim = 24"});
  in = p.Inputs();
  in.shape.q_len = 4;
  in.q = Random(32, 1);
  ExpectError([&] { reference::PlainAttention(in); }, {"query_offset = -1"});
}

}  // namespace
}  // namespace posenc
