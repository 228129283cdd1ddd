// XLNet / Transformer-XL relative attention (Dai et al. 2019, Yang et al.
// 2019): sinusoidal encodings of relative distances, projected per head, with
// learned global content and position biases u (r_w_bias) and v (r_r_bias):
//
//   scores_ij = scale * ( (q_i + u).k_j                     content (ac)
//                       + (q_i + v).r[d_ij]                 position (bd)
//                       + (q_i + s).seg[differs_ij] )       segment (ef, optional)
//
// with d_ij = (query position) - j, the query at position mem_len + i
// (mem_len = k_len - q_len). XLNet materializes r for the distances
// k_len, k_len - 1, ..., -q_len + 1 (row m holds distance k_len - m) and
// aligns them with rel_shift; the reference indexes row k_len - d_ij directly.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "posenc/relative_attention.h"

namespace posenc {

enum class XLNetAttnType {
  kBidirectional,   // "bi": distances k_len down to -q_len + 1 (q_len + k_len rows)
  kUnidirectional,  // "uni": distances k_len down to 0 (k_len + 1 rows)
};

// The distances XLNet encodes, in row order, clamped to [-clamp_len,
// clamp_len] when clamp_len > 0.
std::vector<double> XLNetRelativeDistances(std::int64_t q_len, std::int64_t k_len, XLNetAttnType type,
                                           std::int64_t clamp_len = 0);
// Their sinusoidal encodings [rows, d_model]: concat order [sin | cos],
// w_k = 10000^(-2k/d_model) (XLNetModel.relative_positional_encoding).
std::vector<double> XLNetRelativeEncoding(std::int64_t d_model, std::int64_t q_len, std::int64_t k_len,
                                          XLNetAttnType type, std::int64_t clamp_len = 0);

struct XLNetRelativeInputs {
  std::span<const double> rel_k;     // [batch, heads, q_len + k_len, head_dim]: row m is distance k_len - m
  std::span<const double> r_w_bias;  // [heads, head_dim]  u
  std::span<const double> r_r_bias;  // [heads, head_dim]  v
  // Segment term: all three given, or all empty.
  std::span<const double> r_s_bias;               // [heads, head_dim]
  std::span<const double> seg_embed;              // [2, heads, head_dim]: same, different segment
  std::span<const std::uint8_t> segment_differs;  // [batch, q_len, k_len]: 1 = different segments
};

namespace reference {
// Default scale 1/sqrt(head_dim). The query offset must be k_len - q_len
// (XLNet's memory length), the default.
RelativeAttentionResult XLNetAttention(const RelativeAttentionInputs& inputs, const XLNetRelativeInputs& rel);
}  // namespace reference

}  // namespace posenc
