// Position arithmetic of the Shaw, XLNet and DeBERTa relative forms (the
// attention references are in reference/relative_attention_reference.cc).
#include <algorithm>
#include <cmath>
#include <string>

#include "posenc/deberta_relative.h"
#include "posenc/error.h"
#include "posenc/input_file.h"
#include "posenc/shaw_relative.h"
#include "posenc/sinusoidal.h"
#include "posenc/xlnet_relative.h"

namespace posenc {

// ------------------------------------------------------------------- Shaw

void ShawRelativeSpec::Validate() const {
  Require(max_distance >= 0, "shaw", "max_distance", max_distance, "must not be negative");
  Require(max_distance <= (std::int64_t{1} << 30), "shaw", "max_distance", max_distance, "must be <= 2^30");
  Require(distance == RelativeDistance::kKeyMinusQuery || distance == RelativeDistance::kQueryMinusKey, "shaw",
          "distance", static_cast<int>(distance), "must be kKeyMinusQuery or kQueryMinusKey");
}

std::int64_t ShawRelativeSpec::Row(std::int64_t qpos, std::int64_t kpos) const {
  const std::int64_t d = distance == RelativeDistance::kKeyMinusQuery ? kpos - qpos : qpos - kpos;
  return std::clamp(d, -max_distance, max_distance) + max_distance;
}

// ------------------------------------------------------------------ XLNet

std::vector<double> XLNetRelativeDistances(std::int64_t q_len, std::int64_t k_len, XLNetAttnType type,
                                           std::int64_t clamp_len) {
  Require(q_len >= 0, "xlnet", "q_len", q_len, "must not be negative");
  Require(k_len >= 0, "xlnet", "k_len", k_len, "must not be negative");
  Require(clamp_len >= 0, "xlnet", "clamp_len", clamp_len, "must not be negative (0 = no clamp)");
  Require(type == XLNetAttnType::kBidirectional || type == XLNetAttnType::kUnidirectional, "xlnet", "attn_type",
          static_cast<int>(type), "must be kBidirectional or kUnidirectional");
  const std::int64_t end = type == XLNetAttnType::kBidirectional ? -q_len : -1;  // exclusive
  std::vector<double> distances;
  // k_len - end distances: checked in double, where the sum cannot overflow.
  RequireFitsInMemory("xlnet", "k_len", k_len, "the distances", static_cast<double>(k_len) - static_cast<double>(end),
                      sizeof(double));
  distances.reserve(static_cast<std::size_t>(k_len - end));
  for (std::int64_t d = k_len; d > end; --d) {
    const std::int64_t clamped = clamp_len > 0 ? std::clamp(d, -clamp_len, clamp_len) : d;
    distances.push_back(static_cast<double>(clamped));
  }
  return distances;
}

std::vector<double> XLNetRelativeEncoding(std::int64_t d_model, std::int64_t q_len, std::int64_t k_len,
                                          XLNetAttnType type, std::int64_t clamp_len) {
  Require(d_model > 0 && d_model % 2 == 0, "xlnet", "d_model", d_model, "must be even and > 0");
  const SinusoidalSpec spec{
      .dim = d_model, .base = 10000.0, .order = SinusoidalOrder::kConcat, .spacing = SinusoidalSpacing::kPaper};
  return SinusoidalTable(spec, XLNetRelativeDistances(q_len, k_len, type, clamp_len));
}

// ---------------------------------------------------------------- DeBERTa

void DebertaRelativeSpec::Validate() const {
  Require(max_relative_positions > 0, "deberta", "max_relative_positions", max_relative_positions, "must be > 0");
  if (position_buckets > 0) {
    Require(position_buckets >= 4 && position_buckets % 2 == 0, "deberta", "position_buckets", position_buckets,
            "must be even and >= 4 when buckets are on (<= 0 turns them off)");
    Require(max_relative_positions - 1 > position_buckets / 2, "deberta", "max_relative_positions",
            max_relative_positions,
            "must be > position_buckets / 2 + 1 = " + std::to_string(position_buckets / 2 + 1) +
                " (the log range must be non-empty)");
  }
  Require(Span() <= (std::int64_t{1} << 30), "deberta", "span", Span(), "must be <= 2^30");
}

double DebertaRelativeSpec::Scale(std::int64_t head_dim) const {
  const int factor = 1 + (c2p ? 1 : 0) + (p2c ? 1 : 0);
  return 1.0 / std::sqrt(static_cast<double>(head_dim) * factor);
}

std::int64_t DebertaLogBucket(std::int64_t relative_position, std::int64_t bucket_size, std::int64_t max_position) {
  const std::int64_t mid = bucket_size / 2;
  Require(mid >= 2, "deberta", "bucket_size", bucket_size, "must be >= 4");
  Require(max_position - 1 > mid, "deberta", "max_position", max_position,
          "must be > bucket_size / 2 + 1 = " + std::to_string(mid + 1));
  const std::int64_t magnitude = relative_position < 0 ? -relative_position : relative_position;
  if (magnitude <= mid) return relative_position;
  // float32 as make_log_bucket_position computes it:
  // ceil(log(|d| / mid) / log((max_position - 1) / mid) * (mid - 1)) + mid
  const float ratio = static_cast<float>(magnitude) / static_cast<float>(mid);
  const float log_range =
      std::log(static_cast<float>(static_cast<double>(max_position - 1) / static_cast<double>(mid)));
  const float log_pos = std::ceil(std::log(ratio) / log_range * static_cast<float>(mid - 1)) + static_cast<float>(mid);
  const auto bucket = static_cast<std::int64_t>(log_pos);
  return relative_position < 0 ? -bucket : bucket;
}

std::vector<std::int64_t> DebertaRelativePositions(const DebertaRelativeSpec& spec, std::int64_t q_len,
                                                   std::int64_t k_len, std::int64_t query_offset) {
  spec.Validate();
  Require(q_len >= 0, "deberta", "q_len", q_len, "must not be negative");
  Require(k_len >= 0, "deberta", "k_len", k_len, "must not be negative");
  std::vector<std::int64_t> positions(
      BufferElements("deberta", "q_len", q_len, "the [q_len, k_len] positions", {q_len, k_len}, sizeof(std::int64_t)));
  for (std::int64_t i = 0; i < q_len; ++i) {
    for (std::int64_t j = 0; j < k_len; ++j) {
      const std::int64_t d = query_offset + i - j;
      positions[i * k_len + j] =
          spec.position_buckets > 0 ? DebertaLogBucket(d, spec.position_buckets, spec.max_relative_positions) : d;
    }
  }
  return positions;
}

}  // namespace posenc
