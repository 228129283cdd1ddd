// Shaw et al. 2018, "Self-Attention with Relative Position Representations",
// and BERT's relative_key / relative_key_query (Huang et al. 2020): learned
// vectors per clipped relative distance, added to keys (and values).
//
// With d the relative distance, clipped to [-K, K], and a = table[d + K]
// (2K + 1 rows, shared by all heads):
//   scores_ij = scale * (q_i.k_j  + [key_term] q_i.a^K_ij + [query_term] k_j.a^K_ij)
//   output_i  = sum_j p_ij (v_j + [value_term] a^V_ij)
// Shaw's paper takes d = key - query (j - i); BERT takes query - key
// (distance = position_ids_l - position_ids_r) with K = max_position - 1:
// choose with `distance`.
#pragma once

// The spec only: the fused kernel takes it through attention.h
// (ShawEncoding); the float64 reference is reference::ShawAttention in
// relative_attention.h.
#include <cstdint>

namespace posenc {

enum class RelativeDistance {
  kKeyMinusQuery,  // Shaw et al.: d = j - i
  kQueryMinusKey,  // BERT relative_key(_query): d = i - j
};

struct ShawRelativeSpec {
  std::int64_t max_distance = 0;  // K: distances clip to [-K, K]
  RelativeDistance distance = RelativeDistance::kKeyMinusQuery;
  bool key_term = true;     // q_i . a^K  (Shaw; BERT relative_key and relative_key_query)
  bool query_term = false;  // k_j . a^K  (BERT relative_key_query)
  bool value_term = false;  // a^V added to values (Shaw)

  std::int64_t Rows() const { return 2 * max_distance + 1; }
  // Table row for a query at position qpos and a key at kpos.
  std::int64_t Row(std::int64_t qpos, std::int64_t kpos) const;
  // Throws posenc::Error naming the first field that breaks a rule.
  void Validate() const;
};

}  // namespace posenc
