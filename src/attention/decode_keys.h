// Internal: the keys and values of one sequence kept between decode steps in
// the form the decode kernel reads, so that a step computes only its own
// token's key and reads the rest: each key lowered once, when appended (RoPE
// at its position; ReRoPE's and Self-Extend's far copy beside it), packed in
// chunks of 16 keys:
//   keys1, keys2  [kv_head][chunk][head_dim][16]   (keys2: the far copy)
//   values        [kv_head][key][value_cols]       (v_dim rounded up to 16, zero-padded)
// 16 keys a chunk are one AVX-512 vector, two AVX2 or four SSE4/NEON
// vectors: the layout does not depend on the SIMD target.
//
// Only encodings whose key lowering depends on the key alone (its value and
// position) can be kept so: NoPE and the RoPE family (every frequency
// scaling, ReRoPE, Leaky ReRoPE, Self-Extend). Keys sit at positions
// first()..tokens()-1: first() is 0 unless DropFront forgot the oldest
// (a sliding-window layer keeps only what its window can still see).
#pragma once

#include <cstdint>
#include <vector>

#include "attention/attention_plan.h"
#include "hwy/aligned_allocator.h"
#include "posenc/attention.h"

namespace posenc::detail {

class DecodeKeys {
 public:
  static constexpr std::int64_t kChunk = 16;

  // Whether the options' keys can be kept lowered (see above).
  static bool Supports(const AttentionOptions& options);

  // The position after the last kept key, and the position of the first.
  std::int64_t tokens() const { return tokens_; }
  std::int64_t first() const { return first_; }
  // Keys held: tokens() - first().
  std::int64_t kept() const { return tokens_ - first_; }
  // Whether the kept keys were lowered as `options` lowers keys, for these
  // shapes: otherwise Reset first.
  bool LoweredAs(const AttentionOptions& options, std::int64_t kv_heads, std::int64_t head_dim,
                 std::int64_t v_dim) const;
  // Empty, for keys lowered as `options` lowers them, the next appended at
  // position `first` (a multiple of kChunk).
  void Reset(const AttentionOptions& options, std::int64_t kv_heads, std::int64_t head_dim, std::int64_t v_dim,
             std::int64_t first = 0);
  // Appends the lowered keys and the values of a prepared call over new
  // tokens (plan.k1, plan.k2, plan.v: batch 1, kv_len new tokens at
  // positions tokens(), tokens() + 1, ...).
  void Append(const AttentionPlan& plan);
  // Lowers (as `options`, which Reset was given) and appends n keys and
  // values as they were before lowering: k [n, kv_heads, head_dim], v [n,
  // kv_heads, v_dim], float32, at positions tokens() onwards.
  void AppendRaw(const float* k, const float* v, std::int64_t n, const AttentionOptions& options);
  // Forgets the keys at tokens and after (tokens >= first()).
  void Truncate(std::int64_t tokens);
  // Forgets the keys before `position` (a multiple of kChunk in [first(),
  // tokens()]), moving the rest to the front of the buffers.
  void DropFront(std::int64_t position);
  // Bytes held (the capacity).
  double Bytes() const;

  // How the kept keys were lowered (Reset's options).
  const PositionEncoding& encoding() const { return encoding_; }
  std::int64_t kv_heads() const { return kv_heads_; }
  std::int64_t head_dim() const { return head_dim_; }
  std::int64_t v_dim() const { return v_dim_; }
  std::int64_t value_cols() const { return value_cols_; }
  bool two_keys() const { return two_keys_; }
  // Head h's packed keys (chunk after chunk) and values (key after key),
  // from the key at first().
  const float* Keys1(std::int64_t h) const { return keys1_.get() + h * capacity_ * head_dim_; }
  const float* Keys2(std::int64_t h) const { return keys2_.get() + h * capacity_ * head_dim_; }
  const float* Values(std::int64_t h) const { return values_.get() + h * capacity_ * value_cols_; }

 private:
  static std::int64_t Chunked(std::int64_t keys);
  void Reserve(std::int64_t keys);
  // New buffers of `capacity` keys with the kept keys from index `skip` (a
  // multiple of kChunk) on.
  void Reallocate(std::int64_t capacity, std::int64_t skip);

  PositionEncoding encoding_;
  std::int64_t kv_heads_ = 0, head_dim_ = 0, v_dim_ = 0, value_cols_ = 0;
  bool two_keys_ = false;
  std::int64_t first_ = 0;  // a multiple of kChunk
  std::int64_t tokens_ = 0;
  std::int64_t capacity_ = 0;  // keys, a multiple of kChunk
  hwy::AlignedFreeUniquePtr<float[]> keys1_, keys2_, values_;
};

// Keys per split-K work item: fixed, so that the partials (and their
// combination) do not depend on the thread count; 256 keys of one head are
// 64 KiB of keys and values at head_dim 64, an L2-sized stream.
constexpr std::int64_t kDecodeSegment = 256;

// Attention of the single query token of `query` (a prepared call: q1, q2
// with the scale folded in, its position, mask, ReRoPE window, softcap and
// sink logits) over every kept key, written to query.out. Split-K: work items
// are (kv head, 256 keys), each reduced by one thread to a partial softmax
// (max, sum, weighted values); the partials of a head are combined in key
// order, so the result does not depend on the thread count.
void DecodeAttention(const AttentionPlan& query, const DecodeKeys& keys);

}  // namespace posenc::detail
