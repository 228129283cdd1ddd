// DeBERTa disentangled attention (He et al. 2021; DeBERTa-v2/v3 in Hugging
// Face): content-to-content plus content-to-position (c2p) and
// position-to-content (p2c) terms over log-bucketed relative positions.
//
// With delta(i, j) = LogBucket(qpos_i - kpos_j), span S = position_buckets
// (or max_relative_positions when buckets are off) and c(x) = clamp(x + S,
// 0, 2S - 1):
//
//   scores_ij = scale * ( q_i.k_j
//                       + [c2p] q_i.Kr[c(delta(i, j))]
//                       + [p2c] k_j.Qr[c(-delta(j, i))] )
//   scale = 1 / sqrt(head_dim * (1 + c2p + p2c))
//
// Kr and Qr are the relative embeddings projected per head by the key and
// query projections (share_att_key), [heads, 2S, head_dim]. LogBucket keeps
// distances |d| <= S/2 as they are and maps larger ones logarithmically up to
// max_relative_positions; it is evaluated in float32 as in the reference
// implementation, so boundary distances land in the same bucket.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "posenc/relative_attention.h"

namespace posenc {

struct DebertaRelativeSpec {
  std::int64_t position_buckets = 256;        // <= 0: no log buckets
  std::int64_t max_relative_positions = 512;  // deberta-v3-base: max_position_embeddings
  bool c2p = true;
  bool p2c = true;

  std::int64_t Span() const { return position_buckets > 0 ? position_buckets : max_relative_positions; }
  double Scale(std::int64_t head_dim) const;
  // Throws posenc::Error naming the first field that breaks a rule.
  void Validate() const;
};

// make_log_bucket_position: relative position -> bucketed relative position.
std::int64_t DebertaLogBucket(std::int64_t relative_position, std::int64_t bucket_size, std::int64_t max_position);
// build_relative_position: [q_len, k_len] of LogBucket(query_offset + i - j)
// (raw i - j when buckets are off).
std::vector<std::int64_t> DebertaRelativePositions(const DebertaRelativeSpec& spec, std::int64_t q_len,
                                                   std::int64_t k_len, std::int64_t query_offset = 0);

namespace reference {
// pos_key = Kr, pos_query = Qr, each [heads, 2 * Span(), head_dim]; one may
// be empty when its term is off. Default scale spec.Scale(head_dim).
RelativeAttentionResult DebertaAttention(const RelativeAttentionInputs& inputs, const DebertaRelativeSpec& spec,
                                         std::span<const double> pos_key, std::span<const double> pos_query);
}  // namespace reference

}  // namespace posenc
