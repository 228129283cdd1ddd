// Training allocates the same activation and gradient buffers at every
// step. glibc serves allocations above its mmap threshold (128 KiB at
// first) with fresh mappings and returns them to the system when freed, so
// each step paid page faults and the kernel's zeroing again: measured on
// the default tiny model, 10,200 tokens/s before, 16,000-17,000 after
// keeping them in the heap (posenc bench train, 2 cores). Process-wide,
// so the commands that train call it, not the library.
#pragma once

#include <malloc.h>

namespace posenc::cli {

inline void ReuseFreedMemory() {
  mallopt(M_MMAP_THRESHOLD, 1 << 30);  // below 1 GiB: from the heap
  mallopt(M_TRIM_THRESHOLD, 1 << 30);  // keep up to 1 GiB of freed heap for the next step
}

}  // namespace posenc::cli
