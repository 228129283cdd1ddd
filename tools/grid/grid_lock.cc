#include "grid/grid_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "options/output_files.h"
#include "posenc/error.h"

namespace posenc::cli {
namespace {

constexpr const char* kOp = "grid";

// The pid the holder wrote, or "" (it may not have written it yet).
std::string HolderPid(int fd) {
  char buffer[32] = {};
  const ssize_t n = ::pread(fd, buffer, sizeof buffer - 1, 0);
  std::string pid(buffer, n > 0 ? static_cast<std::size_t>(n) : 0);
  pid = pid.substr(0, pid.find('\n'));
  return pid.find_first_not_of("0123456789") == std::string::npos ? pid : "";
}

}  // namespace

GridLock::GridLock(const std::string& dir) {
  RequireOutputDirectory(kOp, "out", dir);
  std::error_code created;
  std::filesystem::create_directories(dir, created);
  Require(!created, kOp, "out", dir, "cannot be created as a directory: " + created.message());
  const std::string path = dir + "/grid.lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd_ < 0)
    ThrowError(kOp, "out", FormatValue(dir),
               "cannot hold its lock file grid.lock: " + std::string(std::strerror(errno)));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    const std::string pid = HolderPid(fd_);
    ::close(fd_);
    if (error != EWOULDBLOCK) {
      ThrowError(kOp, "out", FormatValue(dir), "cannot lock grid.lock: " + std::string(std::strerror(error)));
    }
    ThrowError(kOp, "out", FormatValue(dir),
               "is in use by another run (" + (pid.empty() ? std::string("its pid not yet written") : "pid " + pid) +
                   ", which holds " + dir +
                   "/grid.lock): two runs on one directory would compute the same cells twice; wait for it to "
                   "finish, or stop it, then run again (the finished cells are kept)");
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  // The pid is for the message above only: a failure to write it changes nothing.
  if (::ftruncate(fd_, 0) == 0) {
    [[maybe_unused]] const ssize_t n = ::pwrite(fd_, pid.data(), pid.size(), 0);
  }
}

GridLock::~GridLock() { ::close(fd_); }

}  // namespace posenc::cli
