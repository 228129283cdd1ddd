// ALiBi (Press et al. 2021, "Train Short, Test Long"): no position embedding;
// each head adds slope_h times a linear function of the distance to its
// attention logits.
//
// Slopes for n heads, n a power of two: slope_h = 2^(-max_bias (h+1) / n),
// h = 0..n-1 (max_bias = 8: 8 heads give 1/2, 1/4, ..., 1/256). For other n,
// with m the largest power of two below n: the m slopes above, then every
// other slope of the 2m series (its odd powers 1, 3, 5, ...) for the n - m
// remaining heads. The result is in head order and is never sorted
// (mlx#343). Under tensor parallelism a shard's slopes are a slice of the
// global head count's list (flashinfer#5101), not the slopes of its own count.
//
// Forms of the bias for query position i and key position j:
//   kDistance     -slope * |i - j|   the paper's bias; symmetric, so also
//                                    right for encoders (flash-attention#540)
//   kKeyPosition  +slope * j         BLOOM's build_alibi_tensor: on causal
//                                    rows it differs from kDistance by a
//                                    per-row constant (the same softmax) but
//                                    the raw scores differ.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace posenc {

enum class AlibiForm { kDistance, kKeyPosition };

std::string_view AlibiFormName(AlibiForm form);  // "distance" / "key-position"
AlibiForm ParseAlibiForm(std::string_view name);

struct AlibiSpec {
  std::int64_t heads = 0;  // the global head count (slopes depend on it)
  double max_bias = 8.0;
  AlibiForm form = AlibiForm::kDistance;

  // Throws posenc::Error naming the first field that breaks a rule.
  void Validate() const;
};

// The bias of a query at position p and a key at position j: the formula
// every scalar path uses (AlibiBias, the float64 reference attention). The
// SIMD kernel adds the key-position form as slope * (j - p), the same
// softmax without float32 losing a large j.
inline double AlibiBiasAt(AlibiForm form, double slope, std::int64_t p, std::int64_t j) {
  return form == AlibiForm::kDistance ? -slope * static_cast<double>(p > j ? p - j : j - p)
                                      : slope * static_cast<double>(j);
}

// One slope per head, in head order, float64.
std::vector<double> AlibiSlopes(const AlibiSpec& spec);
// The slopes of heads [head_begin, head_begin + head_count) of the global
// list: what one tensor-parallel shard uses.
std::vector<double> AlibiSlopes(const AlibiSpec& spec, std::int64_t head_begin, std::int64_t head_count);

// The bias [heads, q_len, k_len], float64, for queries at positions
// query_offset + i and keys at positions j (query_offset = k_len - q_len is
// KV-cache decode and plain self-attention).
std::vector<double> AlibiBias(const AlibiSpec& spec, std::int64_t q_len, std::int64_t k_len, std::int64_t query_offset);

// BLOOM's per-key form with left padding: key position = the number of real
// tokens before it in its row (padding gets 0), times the slope. mask is
// [batch, k_len] (1 = token, 0 = padding); returns [batch, heads, k_len].
std::vector<double> AlibiKeyBiasFromMask(const AlibiSpec& spec, std::span<const std::uint8_t> mask, std::int64_t batch,
                                         std::int64_t k_len);

}  // namespace posenc
