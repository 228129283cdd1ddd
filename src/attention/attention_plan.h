// Internal: an attention call prepared for the tiled kernel. Everything the
// per-target code needs, in float32, dense, with RoPE already applied and the
// softmax scale (times the attention factor squared and log-n) folded into q.
#pragma once

#include <cstdint>
#include <vector>

#include "posenc/attention.h"

namespace posenc::detail {

enum class BiasKind { kNone, kAlibiDistance, kAlibiKeyPosition, kRelativeTable };

// The two-source encodings (ReRoPE, Self-Extend) score a key from the near
// pair (q1 . k1, RoPE at the true positions) when it lies at or after
// NearStart (attention_rules.h) of the query's position, from the far pair
// (q2 . k2) before it.
enum class NearKeys {
  kLastWindow,    // the `window` keys nearest the query: p - j < window
  kCurrentBlock,  // the query's block of `window` positions: j >= window floor(p / window) (llama.cpp's Self-Extend)
};
struct NearRule {
  std::int64_t window = 0;  // 0: one source, every key near
  NearKeys keys = NearKeys::kLastWindow;
};

struct AttentionPlan {
  std::int64_t batch, q_len, kv_len, q_heads, kv_heads, group, head_dim, v_dim;
  // Dense float32 copies [batch][seq][heads][dim]. q2/k2: ReRoPE's far scores
  // (q rotated to the window / leaky positions, k unrotated or at j/k).
  std::vector<float> q1, q2, k1, k2, v;
  std::vector<std::int64_t> q_positions;  // [batch * q_len]
  std::vector<std::int64_t> k_positions;  // [batch * kv_len]
  // Keys at consecutive positions (offset forms): tiles can be skipped and
  // biases loaded contiguously. Otherwise every tile is masked element-wise.
  bool keys_consecutive = true;
  std::vector<std::int64_t> kv_valid;  // [batch]
  AttentionMask mask;
  NearRule near;  // window > 0: two score sources
  BiasKind bias = BiasKind::kNone;
  std::vector<float> slopes;  // [q_heads] ALiBi
  // [q_heads][relative_span] bias by key position - query position, starting
  // at relative_min; it runs kRelativePadding past the largest key so that
  // the zero-padded keys of the last chunk read inside it.
  static constexpr std::int64_t kRelativePadding = 256;
  std::vector<float> relative_table;
  std::int64_t relative_min = 0, relative_span = 0;
  // URPE: [q_heads][relative_span] the weight of each probability on the
  // value side, by the same relative positions as relative_table; or empty.
  std::vector<float> probability_scale;
  // Shaw relative keys/values (shaw_rows = 2K + 1 > 0 when on).
  ShawRelativeSpec shaw;
  std::int64_t shaw_rows = 0;
  std::vector<float> shaw_qr;     // [batch][q_len][q_heads][rows]: scaled q . a^K (key term)
  std::vector<float> shaw_kr;     // [batch][kv_heads][rows][kv_len]: k . a^K (query term), unscaled
  std::vector<float> q_factor;    // [batch * q_len]: the scale folded into q
  std::vector<float> shaw_rel_v;  // [rows][v_dim] (value term)
  float softcap = 0;
  std::vector<float> sink_logits;  // [q_heads] or empty
  TensorView out;
};

// Validates and prepares a call (dense float32 copies, positions, the
// encoding lowered, the scale folded into q) into `plan`, whose buffers'
// capacity is reused; false when there is nothing to compute (no queries).
bool PrepareAttentionPlan(const AttentionInputs& inputs, const AttentionOptions& options, AttentionPlan& plan);

// The per-target tiled kernel (attention-inl.h).
void RunAttentionPlan(const AttentionPlan& plan);

}  // namespace posenc::detail
