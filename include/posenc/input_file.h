// Reading input files and sizing buffers without surprises. A path that is a
// directory, a FIFO or a device is refused before it is read (a FIFO would
// block on open, /dev/zero never ends), a file over the caller's limit is
// refused before it is read whole, and a buffer larger than this machine's
// memory is refused before it is allocated: each an Error naming the
// parameter, the value and the rule.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace posenc {

// The whole contents of the regular file at `path`, at most `max_bytes`
// (why that limit: `limit_reason`, printed with the error).
//   ReadRegularFile("rope freqs", "--hf-config", path, 16 << 20, "a config.json is a few KB")
std::string ReadRegularFile(std::string_view op, std::string_view parameter, const std::string& path,
                            std::uint64_t max_bytes, std::string_view limit_reason);

// Opens `path` for reading (O_RDONLY | O_CLOEXEC) after checking that it is a
// regular file; returns the descriptor and its size. The caller closes it.
struct OpenedFile {
  int fd = -1;
  std::uint64_t size = 0;
};
OpenedFile OpenRegularFile(std::string_view op, std::string_view parameter, const std::string& path);

// "64.0 GiB": how memory sizes read in messages.
std::string Gibibytes(double bytes);

// Physical memory of this machine in bytes.
std::uint64_t PhysicalMemoryBytes();

// Throws unless count × element_bytes (computed without overflow) fits in
// this machine's physical memory: "[op] parameter = value: <what> needs
// 64.0 GiB (count × 8 bytes), more than this machine's 23.4 GiB of memory".
void RequireFitsInMemory(std::string_view op, std::string_view parameter, std::int64_t value, std::string_view what,
                         double count, std::uint64_t element_bytes);

// sizes[0] × sizes[1] × ... (each >= 0), or -1 where the product overflows
// int64: a count compared against a product of lengths must not meet a
// wrapped one (2^32 × 2^32 wraps to 0).
std::int64_t CheckedProduct(std::initializer_list<std::int64_t> sizes);

// The element count of a buffer shaped by `sizes` (each >= 0), after
// RequireFitsInMemory on their product: a product too large for memory, or
// for int64, is refused with "needs … GiB" instead of wrapping.
//   std::vector<double> bias(BufferElements(kOp, "q_len", q_len, "the bias", {heads, q_len, k_len}, 8));
std::size_t BufferElements(std::string_view op, std::string_view parameter, std::int64_t value, std::string_view what,
                           std::initializer_list<std::int64_t> sizes, std::uint64_t element_bytes);

}  // namespace posenc
