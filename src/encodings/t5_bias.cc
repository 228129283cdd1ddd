#include "posenc/t5_bias.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "posenc/error.h"
#include "posenc/input_file.h"
#include "posenc/token_positions.h"

namespace posenc {
namespace {
constexpr const char* kOp = "t5_bias";
}  // namespace

std::string_view T5DirectionName(T5Direction direction) {
  return direction == T5Direction::kBidirectional ? "bidirectional" : "causal";
}

void T5BucketSpec::Validate() const {
  Require(direction == T5Direction::kBidirectional || direction == T5Direction::kCausal, kOp, "direction",
          static_cast<int>(direction), "must be kBidirectional or kCausal");
  if (direction == T5Direction::kBidirectional) {
    Require(num_buckets % 2 == 0, kOp, "num_buckets", num_buckets,
            "must be even for bidirectional attention (it is split in half by the sign of the distance)");
    Require(num_buckets >= 4, kOp, "num_buckets", num_buckets,
            "must be >= 4 for bidirectional attention (2 per direction: an exact and a log bucket)");
  } else {
    Require(num_buckets >= 2, kOp, "num_buckets", num_buckets,
            "must be >= 2 for causal attention (an exact and a log bucket)");
  }
  Require(num_buckets <= (std::int64_t{1} << 30), kOp, "num_buckets", num_buckets, "must be <= 2^30");
  Require(max_distance > MaxExact(), kOp, "max_distance", max_distance,
          "must be > " + std::to_string(MaxExact()) + " (the exact buckets: half of the " +
              std::to_string(BucketsPerSide()) + " buckets per direction), or the log range is empty");
}

std::int64_t T5RelativeBucket(const T5BucketSpec& spec, std::int64_t relative_position) {
  spec.Validate();
  const std::int64_t per_side = spec.BucketsPerSide();
  std::int64_t bucket = 0;
  // |relative_position| in unsigned arithmetic: -(-2^63) does not fit int64.
  const std::uint64_t magnitude = relative_position < 0 ? 0 - static_cast<std::uint64_t>(relative_position)
                                                        : static_cast<std::uint64_t>(relative_position);
  std::uint64_t distance = 0;
  if (spec.direction == T5Direction::kBidirectional) {
    if (relative_position > 0) bucket += per_side;
    distance = magnitude;
  } else {
    distance = relative_position < 0 ? magnitude : 0;  // the future is bucket 0
  }
  const std::int64_t max_exact = spec.MaxExact();
  if (distance < static_cast<std::uint64_t>(max_exact)) return bucket + static_cast<std::int64_t>(distance);
  // float32 throughout, as log(d / max_exact) / log(max_distance / max_exact)
  // * (per_side - max_exact) is computed in the reference implementations;
  // the scale's logarithm is taken in double and rounded once (a Python float).
  const float ratio = static_cast<float>(distance) / static_cast<float>(max_exact);
  const auto log_range =
      static_cast<float>(std::log(static_cast<double>(spec.max_distance) / static_cast<double>(max_exact)));
  const float scaled = std::log(ratio) / log_range * static_cast<float>(per_side - max_exact);
  // Truncation toward zero; huge values (distance far past max_distance) clip.
  const std::int64_t large = scaled >= static_cast<float>(per_side) ? per_side : static_cast<std::int64_t>(scaled);
  return bucket + std::min(max_exact + large, per_side - 1);
}

std::vector<std::int32_t> T5BucketMatrix(const T5BucketSpec& spec, std::int64_t q_len, std::int64_t k_len,
                                         std::int64_t query_offset) {
  spec.Validate();
  Require(q_len >= 0, kOp, "q_len", q_len, "must not be negative");
  Require(k_len >= 0, kOp, "k_len", k_len, "must not be negative");
  Require(query_offset >= 0, kOp, "query_offset", query_offset, "must not be negative");
  Require(query_offset <= kMaxPosition - q_len, kOp, "query_offset", query_offset,
          "query_offset + q_len must be <= 2^53 (positions exact in float64)");
  std::vector<std::int32_t> buckets(
      BufferElements(kOp, "q_len", q_len, "the [q_len, k_len] bucket matrix", {q_len, k_len}, sizeof(std::int32_t)));
  for (std::int64_t i = 0; i < q_len; ++i) {
    for (std::int64_t j = 0; j < k_len; ++j) {
      buckets[i * k_len + j] = static_cast<std::int32_t>(T5RelativeBucket(spec, j - (query_offset + i)));
    }
  }
  return buckets;
}

std::vector<double> T5Bias(const T5BucketSpec& spec, std::span<const double> weights, std::int64_t heads,
                           std::int64_t q_len, std::int64_t k_len, std::int64_t query_offset) {
  Require(heads > 0, kOp, "heads", heads, "must be > 0");
  const std::vector<std::int32_t> buckets = T5BucketMatrix(spec, q_len, k_len, query_offset);
  // Unchecked, num_buckets * heads could wrap to the size of a short table.
  const std::int64_t table = CheckedProduct({spec.num_buckets, heads});
  Require(table >= 0 && static_cast<std::int64_t>(weights.size()) == table, kOp, "weights.size()", weights.size(),
          "must equal num_buckets * heads = " +
              (table >= 0 ? std::to_string(table) : std::to_string(spec.num_buckets) + " * " + std::to_string(heads)) +
              " ([num_buckets, heads] as relative_attention_bias.weight)");
  std::vector<double> bias(
      BufferElements(kOp, "heads", heads, "the [heads, q_len, k_len] bias", {heads, q_len, k_len}, sizeof(double)));
  for (std::int64_t h = 0; h < heads; ++h) {
    for (std::int64_t x = 0; x < q_len * k_len; ++x) {
      bias[h * q_len * k_len + x] = weights[buckets[x] * heads + h];
    }
  }
  return bias;
}

}  // namespace posenc
