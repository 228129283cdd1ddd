// Rows of a Q4_0, Q4_1, Q5_0, Q8_0 or Q4_K matrix kept 8 at a time, interleaved, for the
// integer decode kernel (int8_dot-inl.h, DotGroups): the same bytes as the
// GGUF's rows in another order, so that the kernel computes 8 rows in the
// 8 int32 lanes of one vector and converts each block's scales for 8 rows
// at once, instead of a scalar scale, a broadcast and a reduction for each
// row's block (the per-block work that kept the row-major kernel from
// reading its weights as fast as memory delivers them).
//
// A block of these types is F 2-byte fields (d; Q4_1: d, m; Q4_K: d, dmin)
// and W 4-byte words of codes (16 nibble bytes, or Q8_0's 32 bytes; Q5_0:
// its 32 fifth bits, then 16 nibble bytes; Q4_K: 12 bytes of sub-block
// scales and mins, then 128 nibble bytes). Group g (rows 8g ..
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

// A type's block as fields and words.
struct GroupedBlock {
  std::int64_t fields, words;
  constexpr std::int64_t Bytes() const { return 2 * fields + 4 * words; }
  constexpr std::int64_t FieldAt(std::int64_t f, std::int64_t r) const { return 16 * f + 2 * r; }
  constexpr std::int64_t WordAt(std::int64_t v, std::int64_t r) const { return 16 * fields + 32 * v + 4 * r; }
};
// The block of a type that can be grouped; none for the others.
constexpr std::optional<GroupedBlock> GroupedBlockOf(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0: return GroupedBlock{1, 4};
    case GgmlType::kQ4_1: return GroupedBlock{2, 4};
    case GgmlType::kQ5_0: return GroupedBlock{1, 5};
    case GgmlType::kQ4_K: return GroupedBlock{2, 35};
    case GgmlType::kQ8_0: return GroupedBlock{1, 8};
    default: return std::nullopt;
  }
}

// Whether rows [first_row, first_row + rows) of `type` are kept in groups:
// Q4_0, Q4_1, Q5_0, Q8_0 or Q4_K, whole groups that start at a multiple of 8 (so that
// work split at multiples of 8 rows never splits a group).
bool GroupsRows(GgmlType type, std::int64_t first_row, std::int64_t rows);
// `rows` GGUF rows of `type` (a GroupsRows type), row_bytes each, at
// `bytes`, regrouped in place.
void GroupRows(GgmlType type, std::byte* bytes, std::int64_t rows, std::int64_t row_bytes);
// Row r (< 8) of the group at `group` back in the GGUF's layout: row_bytes
// bytes into `out`.
void UngroupRow(GgmlType type, const std::byte* group, std::int64_t r, std::int64_t row_bytes, std::byte* out);

}  // namespace posenc::detail
