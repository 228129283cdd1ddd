// A table [buckets, heads] read through T5's causal log buckets of the
// distance (t5_bias.h), as a term of the distance [H, T], and its backward:
// T5's bias (one table for every layer) and URPE's bias and Toeplitz weight
// (per layer) share it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "posenc/error.h"
#include "posenc/t5_bias.h"
#include "train/tiny_lm_internal.h"

namespace posenc::tiny_lm {

// Throws posenc::Error naming the flag's field unless buckets >= 2 and
// buckets / 2 < max_distance <= the longest length.
inline void CheckCausalBuckets(std::int64_t buckets, std::int64_t max_distance, const std::string& prefix) {
  RequireInRange(buckets, 2, kMaxWidth, (prefix + "_buckets").c_str(), " (causal: an exact and a log bucket at least)");
  Require(max_distance > buckets / 2 && max_distance <= kMaxLength, kOp, prefix + "_max_distance", max_distance,
          "must be in (" + prefix + "_buckets / 2 = " + std::to_string(buckets / 2) + ", " +
              std::to_string(kMaxLength) + "] (past the exact buckets, or the log range is empty)");
}

// The bucket of key j = i - delta for delta < length: relative position -delta.
inline std::vector<std::int64_t> CausalBuckets(const T5BucketSpec& spec, std::int64_t length) {
  std::vector<std::int64_t> buckets(static_cast<std::size_t>(length));
  for (std::int64_t delta = 0; delta < length; ++delta) buckets[delta] = T5RelativeBucket(spec, -delta);
  return buckets;
}

// [H, T]: entry h*T + delta = table[bucket(delta), h].
inline std::vector<double> TableByDistance(const T5BucketSpec& spec, const TinyLmTensor& table, std::int64_t heads,
                                           std::int64_t length) {
  const std::vector<std::int64_t> buckets = CausalBuckets(spec, length);
  std::vector<double> out(static_cast<std::size_t>(heads * length));
  for (std::int64_t h = 0; h < heads; ++h) {
    for (std::int64_t delta = 0; delta < length; ++delta)
      out[h * length + delta] = table.values[buckets[delta] * heads + h];
  }
  return out;
}

// grad[bucket, h] += the sum of by_distance [H, T] over the distances of the bucket.
inline void AddByBucket(const T5BucketSpec& spec, const std::vector<double>& by_distance, std::int64_t heads,
                        std::int64_t length, TinyLmTensor& grad) {
  const std::vector<std::int64_t> buckets = CausalBuckets(spec, length);
  std::vector<double> sum(grad.values.size(), 0.0);
  for (std::int64_t h = 0; h < heads; ++h) {
    for (std::int64_t delta = 0; delta < length; ++delta)
      sum[buckets[delta] * heads + h] += by_distance[h * length + delta];
  }
  for (std::size_t e = 0; e < sum.size(); ++e) grad.values[e] += static_cast<float>(sum[e]);
}

}  // namespace posenc::tiny_lm
