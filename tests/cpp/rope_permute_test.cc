#include "posenc/rope_permute.h"

#include <numeric>

#include "test_util.h"

namespace posenc {
namespace {

// Rows hold their own index, one int32 per row.
std::vector<std::int32_t> Rows(std::int64_t n) {
  std::vector<std::int32_t> rows(static_cast<std::size_t>(n));
  std::iota(rows.begin(), rows.end(), 0);
  return rows;
}

TEST(PermuteQkRows, MatchesHuggingFaceConversionOrder) {
  // One head of 8: interleaved pairs (0,1)(2,3)(4,5)(6,7) become half-split
  // rows [0 2 4 6 | 1 3 5 7] — view(heads, d/2, 2).transpose(1, 2).
  auto rows = Rows(16);
  PermuteQkRows(rows.data(), sizeof(std::int32_t), 2, 8, 8, PermuteDirection::kInterleavedToHalfSplit);
  EXPECT_EQ(rows, (std::vector<std::int32_t>{0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15}));
  PermuteQkRows(rows.data(), sizeof(std::int32_t), 2, 8, 8, PermuteDirection::kHalfSplitToInterleaved);
  EXPECT_EQ(rows, Rows(16));
}

TEST(PermuteQkRows, PartialRotaryLeavesTheRestInPlace) {
  auto rows = Rows(8);
  PermuteQkRows(rows.data(), sizeof(std::int32_t), 1, 8, 4, PermuteDirection::kInterleavedToHalfSplit);
  EXPECT_EQ(rows, (std::vector<std::int32_t>{0, 2, 1, 3, 4, 5, 6, 7}));
}

TEST(PermuteQkRows, BadArgumentsAreErrors) {
  auto rows = Rows(8);
  testing::ExpectError([&] { PermuteQkRows(rows.data(), 4, 1, 8, 5, PermuteDirection::kInterleavedToHalfSplit); },
                       {"[permute] rotary_dim = 5", "even"});
  testing::ExpectError([&] { PermuteQkRows(rows.data(), 4, 0, 8, 8, PermuteDirection::kInterleavedToHalfSplit); },
                       {"heads = 0"});
}

}  // namespace
}  // namespace posenc
