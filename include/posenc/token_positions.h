// Absolute positions of the tokens of a [batch, seq] block, for the encodings
// that are added to embeddings (sinusoidal, learned tables) and for the
// relative forms that need each token's position (ALiBi with left padding).
//
//   Offset(start)    token s of every row is at start + s (a KV-cache offset)
//   Offsets(v)       token s of row b is at v[b] + s (per-row decode offsets)
//   Ids(v)           token s of row b is at v[b * seq + s] (left padding,
//                    packed sequences: any positions at all)
//
// The three forms agree: Offsets({o, o}) equals Ids of o, o+1, ... per row.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace posenc {

// The largest position any posenc call accepts: 2^53, the last integer a
// float64 holds exactly (angles p * theta_i are formed in double). It also
// keeps position arithmetic (offset + s, query - key) far from int64 overflow.
inline constexpr std::int64_t kMaxPosition = std::int64_t{1} << 53;

class TokenPositions {
 public:
  static TokenPositions Offset(std::int64_t start);
  static TokenPositions Offsets(std::vector<std::int64_t> offsets);
  static TokenPositions Ids(std::vector<std::int64_t> ids);

  // Throws posenc::Error "[op] ..." unless the positions fit [batch, seq] and
  // every one is in [0, kMaxPosition].
  void Validate(std::string_view op, std::int64_t batch, std::int64_t seq) const;
  std::int64_t At(std::int64_t b, std::int64_t s, std::int64_t seq) const {
    if (!ids_.empty()) return ids_[static_cast<std::size_t>(b * seq + s)];
    return (offsets_.empty() ? start_ : offsets_[static_cast<std::size_t>(b)]) + s;
  }
  // True when every row sees the same positions (Offset): kernels then
  // compute each position's encoding once for the whole batch.
  bool SharedAcrossBatch() const { return ids_.empty() && offsets_.empty(); }
  // Largest position + 1 over [batch, seq] (0 when empty).
  std::int64_t Length(std::int64_t batch, std::int64_t seq) const;

 private:
  std::int64_t start_ = 0;
  std::vector<std::int64_t> offsets_;
  std::vector<std::int64_t> ids_;
};

// Hugging Face's positions for a left-padded batch: with mask [batch, seq]
// (1 = real token, 0 = padding), a real token's position is the number of
// real tokens before it in its row (cumsum(mask) - 1); padding tokens get
// `pad_position` (BLOOM's ALiBi uses 0, GPT-2 uses 1). Returns [batch * seq].
std::vector<std::int64_t> PositionIdsFromMask(std::span<const std::uint8_t> mask, std::int64_t batch, std::int64_t seq,
                                              std::int64_t pad_position = 0);

}  // namespace posenc
