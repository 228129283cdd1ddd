#include "util/huge_pages.h"

#include <cstdint>

#ifdef __linux__
#include <sys/mman.h>
#endif

namespace posenc {

void AdviseHugePages([[maybe_unused]] void* data, [[maybe_unused]] std::size_t bytes) {
#ifdef __linux__
  constexpr std::size_t kHuge = std::size_t{2} << 20;
  // Bytes from data to the first 2 MiB boundary; the whole pages after it.
  const std::size_t skip = (kHuge - reinterpret_cast<std::uintptr_t>(data) % kHuge) % kHuge;
  if (bytes >= skip + kHuge) madvise(static_cast<char*>(data) + skip, (bytes - skip) / kHuge * kHuge, MADV_HUGEPAGE);
#endif
}

}  // namespace posenc
