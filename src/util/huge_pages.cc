#include "util/huge_pages.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <mutex>

#include "posenc/error.h"
#include "sanitizer/asan_interface.h"

#ifdef __linux__
#include <sys/mman.h>
#endif

namespace posenc {
namespace {

constexpr std::size_t kHuge = std::size_t{2} << 20;
constexpr std::size_t kBlock = std::size_t{32} << 20;
constexpr std::size_t kAlign = 64;

// The block that PooledBytes carves from (kBlock bytes); weak, so that a
// block whose buffers are all gone is freed.
struct Pool {
  std::mutex mutex;
  std::weak_ptr<std::byte> block;
  std::size_t used = 0;
};

Pool& ThePool() {
  static Pool pool;
  return pool;
}

std::shared_ptr<std::byte> NewBlock(std::size_t bytes) {
  void* memory = std::aligned_alloc(kHuge, bytes);
  Require(memory != nullptr, "weights", "bytes", bytes, "allocation failed");
  AdviseHugePages(memory, bytes);
  // Under ASan, bytes not carved out yet stay poisoned: a read past a
  // buffer's end into them is reported as past an allocation would be.
  ASAN_POISON_MEMORY_REGION(memory, bytes);
  return {static_cast<std::byte*>(memory), [](std::byte* p) { std::free(p); }};
}

}  // namespace

void AdviseHugePages([[maybe_unused]] void* data, [[maybe_unused]] std::size_t bytes) {
#ifdef __linux__
  // Bytes from data to the first 2 MiB boundary; the whole pages after it.
  const std::size_t skip = (kHuge - reinterpret_cast<std::uintptr_t>(data) % kHuge) % kHuge;
  if (bytes >= skip + kHuge) madvise(static_cast<char*>(data) + skip, (bytes - skip) / kHuge * kHuge, MADV_HUGEPAGE);
#endif
}

PooledBytes::PooledBytes(std::size_t bytes) {
  const std::size_t size = (std::max<std::size_t>(bytes, 1) + kAlign - 1) / kAlign * kAlign;
  if (size > kBlock) {
    block_ = NewBlock((size + kHuge - 1) / kHuge * kHuge);
    data_ = block_.get();
    ASAN_UNPOISON_MEMORY_REGION(data_, bytes);
    return;
  }
  Pool& pool = ThePool();
  const std::lock_guard lock(pool.mutex);
  block_ = pool.block.lock();
  if (block_ == nullptr || pool.used + size > kBlock) {
    block_ = NewBlock(kBlock);
    pool.block = block_;
    pool.used = 0;
  }
  data_ = block_.get() + pool.used;
  pool.used += size;
  ASAN_UNPOISON_MEMORY_REGION(data_, bytes);
}

}  // namespace posenc
