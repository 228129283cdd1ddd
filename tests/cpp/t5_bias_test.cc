// T5 relative position buckets: known values for t5-small's settings, the
// causal form, decode offsets, and the rules on num_buckets/max_distance.
#include <cmath>
#include <limits>
#include <string>

#include "posenc/t5_bias.h"
#include "test_util.h"

namespace posenc {
namespace {

using testing::ExpectError;

// The bucket formula in exact arithmetic; the library's float32 evaluation
// must agree away from boundaries.
std::int64_t ExactBucket(const T5BucketSpec& spec, std::int64_t rel) {
  std::int64_t nb = spec.num_buckets, bucket = 0, n;
  if (spec.direction == T5Direction::kBidirectional) {
    nb /= 2;
    bucket = rel > 0 ? nb : 0;
    n = std::abs(rel);
  } else {
    n = std::max<std::int64_t>(-rel, 0);
  }
  const std::int64_t exact = nb / 2;
  if (n < exact) return bucket + n;
  const long double v = std::log(static_cast<long double>(n) / exact) /
                        std::log(static_cast<long double>(spec.max_distance) / exact) * (nb - exact);
  return bucket + std::min<std::int64_t>(exact + static_cast<std::int64_t>(v), nb - 1);
}

TEST(T5Buckets, T5SmallBidirectional) {
  const T5BucketSpec spec{.num_buckets = 32, .max_distance = 128};
  EXPECT_EQ(T5RelativeBucket(spec, 0), 0);
  EXPECT_EQ(T5RelativeBucket(spec, -1), 1);
  EXPECT_EQ(T5RelativeBucket(spec, -7), 7);
  EXPECT_EQ(T5RelativeBucket(spec, 1), 17);
  EXPECT_EQ(T5RelativeBucket(spec, 7), 23);
  EXPECT_EQ(T5RelativeBucket(spec, -8), 8);    // first log bucket
  EXPECT_EQ(T5RelativeBucket(spec, -16), 10);  // log2(16/8)/log2(16) * 8 = 2, exactly
  EXPECT_EQ(T5RelativeBucket(spec, -127), 15);
  EXPECT_EQ(T5RelativeBucket(spec, -1000000), 15);
  EXPECT_EQ(T5RelativeBucket(spec, 1000000), 31);
  for (std::int64_t rel = -300; rel <= 300; ++rel) {
    const auto b = T5RelativeBucket(spec, rel);
    ASSERT_GE(b, 0);
    ASSERT_LT(b, 32);
    // Boundaries (d = 8 * 2^(k/2)) may differ from exact arithmetic by the
    // float32 evaluation; everywhere else the same bucket.
    const double x = std::log2(std::abs(static_cast<double>(rel)) / 8) * 2;
    if (std::abs(x - std::round(x)) > 1e-6) ASSERT_EQ(b, ExactBucket(spec, rel)) << rel;
  }
}

TEST(T5Buckets, CausalMapsTheFutureToZero) {
  const T5BucketSpec spec{.num_buckets = 32, .max_distance = 128, .direction = T5Direction::kCausal};
  for (std::int64_t rel = 0; rel < 50; ++rel) EXPECT_EQ(T5RelativeBucket(spec, rel), 0) << rel;
  EXPECT_EQ(T5RelativeBucket(spec, -15), 15);
  EXPECT_EQ(T5RelativeBucket(spec, -16), 16);
  EXPECT_EQ(T5RelativeBucket(spec, -100000), 31);
}

TEST(T5Buckets, Monotone) {
  for (const auto direction : {T5Direction::kBidirectional, T5Direction::kCausal}) {
    const T5BucketSpec spec{.num_buckets = 64, .max_distance = 256, .direction = direction};
    for (std::int64_t rel = 0; rel > -2000; --rel) {
      ASSERT_LE(T5RelativeBucket(spec, rel), T5RelativeBucket(spec, rel - 1)) << rel;
    }
  }
}

// Decode: the bias row of the query at cache offset t equals row t of the
// full matrix (candle#899).
TEST(T5Bias, FollowsTheCacheOffset) {
  const T5BucketSpec spec{.num_buckets = 8, .max_distance = 20, .direction = T5Direction::kCausal};
  const std::int64_t heads = 3;
  std::vector<double> weights(8 * heads);
  for (std::size_t i = 0; i < weights.size(); ++i) weights[i] = 0.1 * static_cast<double>(i) - 1;
  const auto full = T5Bias(spec, weights, heads, 30, 30, 0);
  for (std::int64_t t : {0, 5, 29}) {
    const auto step = T5Bias(spec, weights, heads, 1, t + 1, t);
    for (std::int64_t h = 0; h < heads; ++h) {
      for (std::int64_t j = 0; j <= t; ++j) ASSERT_EQ(step[h * (t + 1) + j], full[(h * 30 + t) * 30 + j]);
    }
  }
  const auto buckets = T5BucketMatrix(spec, 2, 3, 1);  // queries at 1, 2
  EXPECT_EQ(buckets, (std::vector<std::int32_t>{1, 0, 0, 2, 1, 0}));
}

TEST(T5Spec, RejectsBadFields) {
  ExpectError([] { T5RelativeBucket({.num_buckets = 31}, 0); },
              {"[t5_bias] num_buckets = 31", "must be even for bidirectional"});
  ExpectError([] { T5RelativeBucket({.num_buckets = 2}, 0); }, {"num_buckets = 2", ">= 4"});
  ExpectError([] { T5RelativeBucket({.num_buckets = 0, .direction = T5Direction::kCausal}, 0); },
              {"num_buckets = 0", ">= 2"});
  ExpectError([] { T5RelativeBucket({.num_buckets = 32, .max_distance = 8}, 0); }, {"max_distance = 8", "must be > 8"});
  ExpectError([] { T5RelativeBucket({.num_buckets = 32, .max_distance = 16, .direction = T5Direction::kCausal}, 0); },
              {"max_distance = 16", "must be > 16"});
  EXPECT_NO_THROW(T5RelativeBucket({.num_buckets = 31, .max_distance = 16, .direction = T5Direction::kCausal}, -3));
  ExpectError([] { T5Bias({}, std::vector<double>(10), 2, 1, 1, 0); },
              {"weights.size() = 10", "num_buckets * heads = 64"});
  ExpectError([] { T5BucketMatrix({}, 2, 2, -1); }, {"query_offset = -1"});
}

// num_buckets * heads is compared without wrapping (32 * 2^59 wrapped to
// 0, the size of an empty table), and the bias is sized by the memory check.
TEST(T5Bias, SizesAreCheckedWithoutWrapping) {
  ExpectError([] { T5Bias({}, {}, std::int64_t{1} << 59, 1, 1, 0); },
              {"weights.size() = 0", "num_buckets * heads = 32 * 576460752303423488"});
  ExpectError([] { T5Bias({}, std::vector<double>(32), 1, std::int64_t{1} << 31, std::int64_t{1} << 31, 0); },
              {"[t5_bias] q_len = 2147483648: the [q_len, k_len] bucket matrix needs"});
}

TEST(T5Buckets, ExtremeDistancesClipInsteadOfOverflowing) {
  // -(-2^63) does not fit int64; such distances are far past max_distance.
  const std::int64_t lowest = std::numeric_limits<std::int64_t>::min();
  const std::int64_t highest = std::numeric_limits<std::int64_t>::max();
  const T5BucketSpec causal{.num_buckets = 32, .max_distance = 128, .direction = T5Direction::kCausal};
  const T5BucketSpec both{.num_buckets = 32, .max_distance = 128};
  EXPECT_EQ(T5RelativeBucket(causal, lowest), 31);
  EXPECT_EQ(T5RelativeBucket(causal, lowest + 1), 31);
  EXPECT_EQ(T5RelativeBucket(causal, highest), 0);
  EXPECT_EQ(T5RelativeBucket(both, lowest), 15);
  EXPECT_EQ(T5RelativeBucket(both, highest), 31);
}

TEST(T5Buckets, QueryOffsetPastTheLargestPositionIsAnError) {
  const T5BucketSpec spec{.num_buckets = 32, .max_distance = 128, .direction = T5Direction::kCausal};
  ExpectError([&] { T5BucketMatrix(spec, 4, 4, std::numeric_limits<std::int64_t>::max()); },
              {"query_offset = 9223372036854775807", "2^53"});
  ExpectError([&] { T5BucketMatrix(spec, std::int64_t{1} << 40, std::int64_t{1} << 40, 0); },
              {"q_len = 1099511627776", "needs", "more than this machine's"});
}

}  // namespace
}  // namespace posenc
