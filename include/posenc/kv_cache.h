// A key/value cache for decoding one sequence, with StreamingLLM eviction.
//
// Keys are stored before RoPE, so every positional policy can use them: RoPE
// rotates them at whatever position the policy says, ReRoPE's far part reads
// them unrotated, and a re-indexed cache rotates them at their slot. Each
// cached token keeps its true position for good.
//
// Eviction (StreamingLLM, Xiao et al. 2023): with sinks S and window W the
// cache holds the first S tokens and the last W tokens ever appended; older
// tokens in between are dropped. Attention over such a cache sees exactly
// the keys of the Λ-shaped mask (sinks + window) of the full sequence.
//
// Positions given to attention:
//   kTrue       keys and queries at their positions in the whole text (the
//               Λ mask's semantics; positions grow without bound)
//   kReindexed  keys at their slot 0..size-1 and the query at the slot after
//               the last key (StreamingLLM's choice: positions stay inside
//               the training length)
#pragma once

#include <cstdint>
#include <vector>

#include "posenc/attention.h"
#include "posenc/dtype.h"

namespace posenc {

enum class CachePositions { kTrue, kReindexed };

struct KvCacheSpec {
  std::int64_t kv_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t v_dim = 0;
  DType dtype = DType::kF32;
  std::int64_t sinks = 0;     // kept forever (with a window)
  std::int64_t window = 0;    // most recent tokens kept; 0: keep everything
  std::int64_t capacity = 0;  // tokens held at most when window is 0
  void Validate() const;
  std::int64_t MaxTokens() const { return window > 0 ? sinks + window : capacity; }
};

class KvCache {
 public:
  explicit KvCache(KvCacheSpec spec);

  // Appends `tokens` tokens: k [tokens, kv_heads, head_dim], v [tokens,
  // kv_heads, v_dim] (contiguous, the spec's dtype) at true positions
  // first_position, first_position + 1, ...; evicts what the window drops.
  // Throws posenc::Error on a shape mismatch, positions that do not follow
  // the last cached one, or (without a window) overflowing the capacity —
  // checked before anything is written.
  void Append(const void* k, const void* v, std::int64_t tokens, std::int64_t first_position);

  std::int64_t size() const { return static_cast<std::int64_t>(true_positions_.size()); }
  const std::vector<std::int64_t>& true_positions() const { return true_positions_; }
  // The position the next appended token will have.
  std::int64_t next_position() const { return next_position_; }

  // Attention of q [1, q_len, q_heads, head_dim] (the last q_len tokens
  // appended) over the cache, written to out [1, q_len, q_heads, v_dim].
  void Attend(const ConstTensorView& q, const TensorView& out, const AttentionOptions& options,
              CachePositions positions) const;

 private:
  KvCacheSpec spec_;
  std::vector<unsigned char> keys_, values_;  // [slot][kv_heads][dim]
  std::vector<std::int64_t> true_positions_;  // [slot]
  std::int64_t next_position_ = 0;
};

}  // namespace posenc
