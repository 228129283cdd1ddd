#include "posenc/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "posenc/error.h"

namespace posenc {
namespace {
constexpr const char* kOp = "kv-cache";
}  // namespace

void KvCacheSpec::Validate() const {
  Require(kv_heads > 0, kOp, "kv_heads", kv_heads, "must be > 0");
  Require(head_dim > 0, kOp, "head_dim", head_dim, "must be > 0");
  Require(v_dim > 0, kOp, "v_dim", v_dim, "must be > 0");
  Require(window >= 0, kOp, "window", window, "must be >= 0 (0: no eviction)");
  Require(sinks >= 0, kOp, "sinks", sinks, "must be >= 0");
  Require(sinks == 0 || window > 0, kOp, "sinks", sinks, "sinks need a window (StreamingLLM)");
  Require(window > 0 || capacity > 0, kOp, "capacity", capacity, "must be > 0 without a window");
}

KvCache::KvCache(KvCacheSpec spec) : spec_(spec) {
  spec_.Validate();
  const auto slots = static_cast<std::size_t>(spec_.MaxTokens());
  const std::size_t element = DTypeSize(spec_.dtype);
  keys_.resize(slots * spec_.kv_heads * spec_.head_dim * element);
  values_.resize(slots * spec_.kv_heads * spec_.v_dim * element);
}

void KvCache::Append(const void* k, const void* v, std::int64_t tokens, std::int64_t first_position) {
  Require(tokens >= 0, kOp, "tokens", tokens, "must be >= 0");
  Require(tokens == 0 || (k != nullptr && v != nullptr), kOp, "k", Verbatim{"null"}, "must point to the keys");
  Require(first_position == next_position_ || (size() == 0 && first_position >= 0), kOp, "first_position",
          first_position, "must continue the cache at " + std::to_string(next_position_));
  Require(spec_.window > 0 || size() + tokens <= spec_.capacity, kOp, "tokens", tokens,
          "would overflow the capacity of " + std::to_string(spec_.capacity) + " tokens (" + std::to_string(size()) +
              " cached)");
  const std::size_t element = DTypeSize(spec_.dtype);
  const std::size_t key_bytes = spec_.kv_heads * spec_.head_dim * element;
  const std::size_t value_bytes = spec_.kv_heads * spec_.v_dim * element;
  for (std::int64_t t = 0; t < tokens; ++t) {
    // Sinks fill slots [0, S); the window is a ring over [S, S + W): the new
    // token replaces the oldest window token (its true position minus W).
    const std::int64_t position = first_position + t;
    std::int64_t slot = size();
    if (spec_.window > 0 && size() == spec_.MaxTokens()) {
      const auto oldest = std::min_element(true_positions_.begin() + spec_.sinks, true_positions_.end());
      slot = oldest - true_positions_.begin();
      true_positions_[slot] = position;
    } else {
      true_positions_.push_back(position);
    }
    std::memcpy(keys_.data() + slot * key_bytes, static_cast<const unsigned char*>(k) + t * key_bytes, key_bytes);
    std::memcpy(values_.data() + slot * value_bytes, static_cast<const unsigned char*>(v) + t * value_bytes,
                value_bytes);
  }
  next_position_ = first_position + tokens;
}

void KvCache::Attend(const ConstTensorView& q, const TensorView& out, const AttentionOptions& options,
                     CachePositions positions) const {
  Require(spec_.window == 0 || q.seq() == 1, kOp, "q.seq", q.seq(),
          "must be 1 with a window: earlier queries would need evicted keys");
  Require(q.seq() <= size(), kOp, "q.seq", q.seq(), "must not exceed the cached tokens " + std::to_string(size()));
  const std::int64_t n = size();
  std::vector<std::int64_t> key_positions(true_positions_);
  std::int64_t query_start = next_position_ - q.seq();
  if (positions == CachePositions::kReindexed) {
    // Rank by true position: sinks keep their slot, window tokens follow in order.
    std::vector<std::int64_t> order(true_positions_);
    std::sort(order.begin(), order.end());
    for (std::int64_t& p : key_positions) p = std::lower_bound(order.begin(), order.end(), p) - order.begin();
    query_start = n - q.seq();
  }
  AttentionInputs inputs{
      q,
      ConstTensorView{keys_.data(),
                      spec_.dtype,
                      {1, n, spec_.kv_heads, spec_.head_dim},
                      {n * spec_.kv_heads * spec_.head_dim, spec_.kv_heads * spec_.head_dim, spec_.head_dim, 1}},
      ConstTensorView{values_.data(),
                      spec_.dtype,
                      {1, n, spec_.kv_heads, spec_.v_dim},
                      {n * spec_.kv_heads * spec_.v_dim, spec_.kv_heads * spec_.v_dim, spec_.v_dim, 1}},
      out,
      TokenPositions::Offset(query_start),
      TokenPositions::Ids(std::move(key_positions)),
      {}};
  Attention(inputs, options);
}

}  // namespace posenc
