// Transparent huge pages for the large buffers that a decode step streams
// whole (the stored weights, the kept keys and values).
//
// With 4 KiB pages every page of a stream is a TLB miss, and the hardware
// prefetchers stop at each page's end. SmolLM2's int8 decode on a 2-core
// Zen 3, two models in one process, alternating rounds of 32 steps:
//   - the kept keys and values and the output matrix (28 MB, the one weight
//     buffer over 2 MiB) on huge pages: 1.07-1.08x after 0 cached tokens,
//     1.06x after 2,048; decode attention alone over 8,192 cached tokens
//     1.07x;
//   - then every weight matrix, carved from shared blocks (PooledBytes):
//     another 1.11-1.15x after 0 cached tokens.
// Hints only: where THP is off ("never"), or off Linux, nothing changes.
#pragma once

#include <cstddef>
#include <memory>

namespace posenc {

// Asks Linux for transparent huge pages (2 MiB) over the whole 2 MiB pages
// inside [data, data + bytes), a buffer not yet touched.
void AdviseHugePages(void* data, std::size_t bytes);

// Bytes (64-byte aligned, uninitialized) carved in order from blocks of
// 32 MiB aligned to 2 MiB and advised for huge pages (a request over 32 MiB
// gets a block of its own), so that a model's ~200 weight matrices, most of
// them under 2 MiB, share huge pages. A block is freed with the last buffer
// carved from it; its untouched tail is never resident. Thread-safe.
class PooledBytes {
 public:
  PooledBytes() = default;
  // Throws posenc::Error when the memory cannot be had.
  explicit PooledBytes(std::size_t bytes);
  std::byte* get() const { return data_; }

 private:
  std::shared_ptr<std::byte> block_;
  std::byte* data_ = nullptr;
};

}  // namespace posenc
