#include "posenc/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>

#include "posenc/error.h"

namespace posenc {

std::string Gibibytes(double bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f GiB", bytes / static_cast<double>(1ull << 30));
  return text;
}

OpenedFile OpenRegularFile(std::string_view op, std::string_view parameter, const std::string& path) {
  // O_NONBLOCK: opening a FIFO without a writer returns at once instead of
  // waiting; it is then refused as not a regular file. Reads of a regular
  // file ignore the flag.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) ThrowError(op, parameter, FormatValue(path), std::string("cannot be opened: ") + std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    const bool directory = S_ISDIR(info.st_mode);
    ::close(fd);
    ThrowError(op, parameter, FormatValue(path),
               directory ? "is a directory, not a file"
                         : "is not a regular file (a FIFO, socket or device cannot be read as an input)");
  }
  return {fd, static_cast<std::uint64_t>(info.st_size)};
}

std::string ReadRegularFile(std::string_view op, std::string_view parameter, const std::string& path,
                            std::uint64_t max_bytes, std::string_view limit_reason) {
  const OpenedFile file = OpenRegularFile(op, parameter, path);
  if (file.size > max_bytes) {
    ::close(file.fd);
    ThrowError(op, parameter, FormatValue(path),
               "is " + std::to_string(file.size) + " bytes, more than the " + std::to_string(max_bytes) +
                   " this input may have (" + std::string(limit_reason) + ")");
  }
  std::string contents(file.size, '\0');
  std::size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = ::read(file.fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = errno;
      ::close(file.fd);
      ThrowError(op, parameter, FormatValue(path),
                 n == 0 ? "became shorter while it was read" : std::string("cannot be read: ") + std::strerror(error));
    }
    done += static_cast<std::size_t>(n);
  }
  ::close(file.fd);
  return contents;
}

std::uint64_t PhysicalMemoryBytes() {
  const std::int64_t pages = ::sysconf(_SC_PHYS_PAGES);
  const std::int64_t page_size = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return UINT64_MAX;  // unknown: the allocator decides
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_size);
}

void RequireFitsInMemory(std::string_view op, std::string_view parameter, std::int64_t value, std::string_view what,
                         double count, std::uint64_t element_bytes) {
  const double bytes = count * static_cast<double>(element_bytes);  // a double cannot overflow here
  const auto memory = PhysicalMemoryBytes();
  if (bytes <= static_cast<double>(memory)) return;
  char count_text[32];
  std::snprintf(count_text, sizeof(count_text), "%.0f", count);
  ThrowError(op, parameter, FormatValue(value),
             std::string(what) + " needs " + Gibibytes(bytes) + " (" + count_text + " values of " +
                 std::to_string(element_bytes) + " bytes), more than this machine's " +
                 Gibibytes(static_cast<double>(memory)) + " of memory");
}

std::int64_t CheckedProduct(std::initializer_list<std::int64_t> sizes) {
  std::int64_t product = 1;
  for (const std::int64_t size : sizes) {
    if (size != 0 && product > std::numeric_limits<std::int64_t>::max() / size) return -1;
    product *= size;
  }
  return product;
}

std::size_t BufferElements(std::string_view op, std::string_view parameter, std::int64_t value, std::string_view what,
                           std::initializer_list<std::int64_t> sizes, std::uint64_t element_bytes) {
  double count = 1.0;  // a double cannot overflow here; within memory, the int64 product is exact
  for (const std::int64_t size : sizes) count *= static_cast<double>(size);
  RequireFitsInMemory(op, parameter, value, what, count, element_bytes);
  return static_cast<std::size_t>(CheckedProduct(sizes));
}

}  // namespace posenc
