// Rows of a Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q5_K or Q6_K matrix kept 8 at a
// time, interleaved, for the integer decode kernel (int8_dot-inl.h,
// DotGroups): the same bytes as the GGUF's rows in another order, so that
// the kernel computes 8 rows in the 8 int32 lanes of one vector and
// converts each block's scales for 8 rows at once, instead of a scalar
// scale, a broadcast and a reduction for each row's block (the per-block
// work that kept the row-major kernel from reading its weights as fast as
// memory delivers them).
//
// A block of these types is F 2-byte fields (d; Q4_1: d, m; Q4_K, Q5_K: d,
// dmin) and W 4-byte words of codes (16 nibble bytes, or Q8_0's 32 bytes;
// Q5_0: its 32 fifth bits, then 16 nibble bytes; Q4_K: 12 bytes of
// sub-block scales and mins, Q5_K's 32 bytes of fifth bits, then 128
// nibble bytes; Q6_K: GroupedBlock's order).
// Group g (rows 8g ..
// 8g+7 of the segment), block b is 8 blocks' bytes at
// group_bytes + 8 block_bytes b, group_bytes = 8 row_bytes apart:
//   [16 f + 2 r, +2)           field f of row r
//   [16 F + 32 v + 4 r, +4)    code word v of row r
// so code vector v holds, in int32 lane r, row r's code bytes 4v .. 4v+3
// (weights 4v .. 4v+3; with nibbles, the high ones are 16+4v .. 16+4v+3;
// Q5_0's vector 0 holds each row's fifth bits, its nibbles start at v = 1).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "posenc/gguf.h"

namespace posenc::detail {

constexpr std::int64_t kGroupRows = 8;

// A type's block as fields and words, and where each is in the GGUF's
// block: there the fields come first and the words follow in order, except
// Q6_K's. Its d comes last, and its group keeps the words in the order its
// kernel reads them, so that a group is read front to back (the hardware
// prefetchers follow it): the 4 words of scales, then per half h the 8
// words of high bits (GGUF words 32 + 8h ..) and the 16 of low nibbles
// (GGUF words 16h ..).
struct GroupedBlock {
  GgmlType type;
  std::int64_t fields, words;
  constexpr std::int64_t Bytes() const { return 2 * fields + 4 * words; }
  constexpr std::int64_t FieldAt(std::int64_t f, std::int64_t r) const { return 16 * f + 2 * r; }
  constexpr std::int64_t WordAt(std::int64_t v, std::int64_t r) const { return 16 * fields + 32 * v + 4 * r; }
  // Offsets in the GGUF's block of field f and of (grouped) word v.
  constexpr std::int64_t PlainFieldAt(std::int64_t f) const {
    return (type == GgmlType::kQ6_K ? 4 * words : 0) + 2 * f;
  }
  constexpr std::int64_t PlainWordAt(std::int64_t v) const {
    if (type != GgmlType::kQ6_K) return 2 * fields + 4 * v;
    if (v < 4) return 4 * (48 + v);
    const std::int64_t half = (v - 4) / 24, at = (v - 4) % 24;
    return 4 * (at < 8 ? 32 + 8 * half + at : 16 * half + at - 8);
  }
};
// The block of a type that can be grouped; none for the others.
constexpr std::optional<GroupedBlock> GroupedBlockOf(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0: return GroupedBlock{type, 1, 4};
    case GgmlType::kQ4_1: return GroupedBlock{type, 2, 4};
    case GgmlType::kQ5_0: return GroupedBlock{type, 1, 5};
    case GgmlType::kQ4_K: return GroupedBlock{type, 2, 35};
    case GgmlType::kQ5_K: return GroupedBlock{type, 2, 43};
    case GgmlType::kQ6_K: return GroupedBlock{type, 1, 52};
    case GgmlType::kQ8_0: return GroupedBlock{type, 1, 8};
    default: return std::nullopt;
  }
}

// Whether rows [first_row, first_row + rows) of `type` are kept in groups:
// Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q5_K or Q6_K, whole groups that start at a multiple of 8 (so that
// work split at multiples of 8 rows never splits a group).
bool GroupsRows(GgmlType type, std::int64_t first_row, std::int64_t rows);
// `rows` GGUF rows of `type` (a GroupsRows type), row_bytes each, at
// `bytes`, regrouped in place.
void GroupRows(GgmlType type, std::byte* bytes, std::int64_t rows, std::int64_t row_bytes);
// Row r (< 8) of the group at `group` back in the GGUF's layout: row_bytes
// bytes into `out`.
void UngroupRow(GgmlType type, const std::byte* group, std::int64_t r, std::int64_t row_bytes, std::byte* out);

}  // namespace posenc::detail
