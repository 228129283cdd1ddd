// T5's bucketed relative position bias (Raffel et al. 2020; Mesh TensorFlow,
// Hugging Face T5Attention): a learned scalar per (bucket, head) added to the
// attention logits. Self-attention only: cross-attention has no bias.
//
// The relative position is key position - query position. Bidirectional
// (encoder) attention splits the buckets in half by the sign (positive
// distances take the upper half); causal (decoder) attention maps every
// future key (distance > 0) to bucket 0. Of the B buckets of one direction,
// distances below B/2 get one bucket each; distances from B/2 up to
// max_distance share the rest logarithmically; farther ones the last bucket.
//
// The logarithm is evaluated in float32, in the order Mesh TensorFlow and
// Hugging Face use, so that distances that fall exactly on a bucket boundary
// land where they do in trained models.
//
// In decode the query sits at the KV-cache offset: pass query_offset =
// past length (candle#899); max_distance is a parameter, not 128
// (transformers#16155).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace posenc {

enum class T5Direction { kBidirectional, kCausal };

std::string_view T5DirectionName(T5Direction direction);  // "bidirectional" / "causal"

struct T5BucketSpec {
  std::int64_t num_buckets = 32;
  std::int64_t max_distance = 128;
  T5Direction direction = T5Direction::kBidirectional;

  // Buckets per direction (num_buckets / 2 when bidirectional) and how many
  // of them hold one distance each.
  std::int64_t BucketsPerSide() const {
    return direction == T5Direction::kBidirectional ? num_buckets / 2 : num_buckets;
  }
  std::int64_t MaxExact() const { return BucketsPerSide() / 2; }
  // Throws posenc::Error naming the first field that breaks a rule:
  // num_buckets >= 2 (causal) or >= 4 and even (bidirectional, which halves
  // it); max_distance > MaxExact() (the log range must be non-empty).
  void Validate() const;
};

// The bucket of one relative position (key - query), in [0, num_buckets).
std::int64_t T5RelativeBucket(const T5BucketSpec& spec, std::int64_t relative_position);

// Buckets [q_len, k_len] for queries at query_offset + i and keys at j.
std::vector<std::int32_t> T5BucketMatrix(const T5BucketSpec& spec, std::int64_t q_len, std::int64_t k_len,
                                         std::int64_t query_offset);

// The bias [heads, q_len, k_len], float64, from the learned weights laid out
// as Hugging Face's relative_attention_bias.weight: [num_buckets, heads].
std::vector<double> T5Bias(const T5BucketSpec& spec, std::span<const double> weights, std::int64_t heads,
                           std::int64_t q_len, std::int64_t k_len, std::int64_t query_offset);

}  // namespace posenc
