// Rows in groups of 8 (row_groups.h): the reordering and its inverse.
#include "kernels/row_groups.h"

#include <cstring>
#include <vector>

namespace posenc::detail {
namespace {

// Calls copy(plain_at, grouped_at, bytes) for each piece of a block: its
// offset in the GGUF's block and in row r's place of the group's block.
template <class Copy>
void ForEachPiece(const GroupedBlock& block, std::int64_t r, const Copy& copy) {
  for (std::int64_t f = 0; f < block.fields; ++f) copy(block.PlainFieldAt(f), block.FieldAt(f, r), std::size_t{2});
  for (std::int64_t v = 0; v < block.words; ++v) copy(block.PlainWordAt(v), block.WordAt(v, r), std::size_t{4});
}

}  // namespace

bool GroupsRows(GgmlType type, std::int64_t first_row, std::int64_t rows) {
  return GroupedBlockOf(type).has_value() && first_row % kGroupRows == 0 && rows % kGroupRows == 0;
}

void GroupRows(GgmlType type, std::byte* bytes, std::int64_t rows, std::int64_t row_bytes) {
  const GroupedBlock block = GroupedBlockOf(type).value();
  const std::int64_t blocks = row_bytes / block.Bytes();
  std::vector<std::byte> plain(static_cast<std::size_t>(kGroupRows * row_bytes));
  for (std::int64_t g = 0; g < rows / kGroupRows; ++g) {
    std::byte* group = bytes + g * kGroupRows * row_bytes;
    std::memcpy(plain.data(), group, plain.size());
    for (std::int64_t r = 0; r < kGroupRows; ++r) {
      for (std::int64_t b = 0; b < blocks; ++b) {
        const std::byte* from = plain.data() + r * row_bytes + b * block.Bytes();
        std::byte* to = group + b * kGroupRows * block.Bytes();
        ForEachPiece(block, r, [&](std::int64_t plain_at, std::int64_t grouped_at, std::size_t bytes) {
          std::memcpy(to + grouped_at, from + plain_at, bytes);
        });
      }
    }
  }
}

void UngroupRow(GgmlType type, const std::byte* group, std::int64_t r, std::int64_t row_bytes, std::byte* out) {
  const GroupedBlock block = GroupedBlockOf(type).value();
  for (std::int64_t b = 0; b < row_bytes / block.Bytes(); ++b) {
    const std::byte* from = group + b * kGroupRows * block.Bytes();
    std::byte* to = out + b * block.Bytes();
    ForEachPiece(block, r, [&](std::int64_t plain_at, std::int64_t grouped_at, std::size_t bytes) {
      std::memcpy(to + plain_at, from + grouped_at, bytes);
    });
  }
}

}  // namespace posenc::detail
