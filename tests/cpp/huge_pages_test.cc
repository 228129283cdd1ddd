// posenc::PooledBytes: every buffer its own 64-byte-aligned bytes, whatever
// the sizes, the order they are freed in, and the blocks they come from.
#include "util/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace posenc {
namespace {

// Each buffer filled with its own byte, then all read back: two buffers that
// overlap would show each other's byte.
void ExpectDisjoint(const std::vector<PooledBytes>& buffers, const std::vector<std::size_t>& sizes) {
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(buffers[i].get()) % 64, 0u) << i;
    std::memset(buffers[i].get(), static_cast<int>(i % 251), sizes[i]);
  }
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    for (std::size_t b = 0; b < sizes[i]; b += 4093) {
      ASSERT_EQ(static_cast<int>(buffers[i].get()[b]), static_cast<int>(i % 251)) << i << " byte " << b;
    }
    ASSERT_EQ(static_cast<int>(buffers[i].get()[sizes[i] - 1]), static_cast<int>(i % 251)) << i;
  }
}

TEST(PooledBytes, BuffersAreAlignedAndDisjointAcrossBlocks) {
  // Sizes that are not multiples of 64, that fill a 32 MiB block past its
  // end (so that a second block starts), and one larger than a block.
  std::vector<std::size_t> sizes;
  for (std::size_t i = 0; i < 40; ++i) sizes.push_back(1 + i * 1'000'003 % (3u << 20));
  sizes.push_back((40u << 20) + 17);
  sizes.push_back(1);
  std::vector<PooledBytes> buffers;
  for (const std::size_t size : sizes) buffers.emplace_back(size);
  ExpectDisjoint(buffers, sizes);
}

TEST(PooledBytes, ABufferOutlivesTheOthersOfItsBlock) {
  std::vector<std::size_t> sizes{1000, 5000, 70000};
  std::vector<PooledBytes> buffers;
  for (const std::size_t size : sizes) buffers.emplace_back(size);
  PooledBytes kept = buffers[1];
  std::memset(kept.get(), 7, sizes[1]);
  buffers.clear();  // the block stays while `kept` holds it
  std::vector<PooledBytes> later;
  for (const std::size_t size : sizes) later.emplace_back(size);
  ExpectDisjoint(later, sizes);
  for (std::size_t b = 0; b < sizes[1]; ++b) ASSERT_EQ(static_cast<int>(kept.get()[b]), 7) << b;
}

}  // namespace
}  // namespace posenc
