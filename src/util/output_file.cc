// OutputFile: what an output path may be, and the temporary-and-rename that
// makes a file appear whole or not at all (include/posenc/output_file.h).
#include "posenc/output_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>  // NOLINT(modernize-deprecated-headers): POSIX kill, not in <csignal>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>

#include "posenc/error.h"

namespace posenc {
namespace {

// Symlinks followed at most, as the kernel does (ELOOP past it).
constexpr int kMaxSymlinks = 40;
// The target's name goes into its temporary's cut to this many bytes, so
// that the temporary's name (with host, pid and counter, at most 92 bytes
// more) stays within the 255 bytes file systems allow a name.
constexpr std::size_t kMaxNameInTemporary = 160;
constexpr std::size_t kMaxHostBytes = 64;
constexpr std::string_view kTemporarySuffix = ".tmp";

std::string DirectoryOf(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string NameOf(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// This machine's name as it goes into temporaries: a cluster's nodes share
// directories, and a pid says whether a writer is alive only on its own
// host. Only the characters host names have, so that it parses back.
const std::string& HostTag() {
  static const std::string tag = [] {
    char name[256] = {};
    std::string kept;
    if (::gethostname(name, sizeof name - 1) == 0) {
      for (const char* c = name; *c != '\0' && kept.size() < kMaxHostBytes; ++c) {
        const bool plain =
            (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '.' || *c == '-';
        if (plain) kept += *c;
      }
    }
    return kept.empty() ? std::string("localhost") : kept;
  }();
  return tag;
}

// ".NAME." : what every temporary of the file NAME starts with. (Appended:
// GCC 12 warns, wrongly, about "." + std::string&& here.)
std::string TemporaryPrefix(const std::string& target) {
  std::string prefix(".");
  prefix.append(NameOf(target), 0, kMaxNameInTemporary).append(".");
  return prefix;
}

bool ParseNumber(std::string_view text, std::int64_t& value) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}

// Whether `entry` is a temporary of ours (PREFIX HOST-PID-N.tmp) left by a
// writer on this host that is no longer running.
bool IsStaleTemporary(std::string_view entry, std::string_view prefix) {
  if (!entry.starts_with(prefix) || !entry.ends_with(kTemporarySuffix)) return false;
  std::string_view writer = entry.substr(prefix.size(), entry.size() - prefix.size() - kTemporarySuffix.size());
  const std::size_t counter_at = writer.rfind('-');
  if (counter_at == std::string_view::npos) return false;
  const std::size_t pid_at = writer.rfind('-', counter_at - 1);
  std::int64_t counter = 0, pid = 0;
  if (counter_at == 0 || pid_at == std::string_view::npos || !ParseNumber(writer.substr(counter_at + 1), counter) ||
      !ParseNumber(writer.substr(pid_at + 1, counter_at - pid_at - 1), pid) || pid <= 0) {
    return false;
  }
  if (writer.substr(0, pid_at) != HostTag()) return false;
  // ESRCH: no such process. EPERM means it runs (as another user): kept.
  return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

void RemoveStaleTemporaries(const std::string& target) {
  const std::string dir = DirectoryOf(target), prefix = TemporaryPrefix(target);
  const std::unique_ptr<DIR, int (*)(DIR*)> entries(::opendir(dir.c_str()), ::closedir);
  if (entries == nullptr) return;  // the temporary's creation reports why
  while (const dirent* entry = ::readdir(entries.get())) {
    if (IsStaleTemporary(entry->d_name, prefix)) ::unlink((dir + "/" + entry->d_name).c_str());
  }
}

const char* FileTypeName(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISBLK(mode)) return "a block device";
  return "an unknown kind of file";
}

}  // namespace

OutputFile::OutputFile(std::string_view op, std::string_view parameter, const std::string& path)
    : op_(op), parameter_(parameter), path_(path), target_(path) {
  if (path.empty()) Fail("must name a file (it is empty)", 0);
  if (path.find('\0') != std::string::npos) Fail("must not contain a NUL byte", 0);
  struct stat info {};
  const bool exists = ::stat(path.c_str(), &info) == 0;
  if (!exists && errno != ENOENT) Fail("cannot be written", errno);
  if (exists && S_ISDIR(info.st_mode)) Fail("is a directory, not a file that can be replaced", 0);
  if (exists && S_ISCHR(info.st_mode)) {
    // A device is written through: renaming a file onto /dev/null would
    // replace the device. Opened as named (a /dev/stdout link included).
    fd_ = ::open(path.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC);
    if (fd_ < 0) Fail("cannot be written", errno);
    return;
  }
  if (exists && !S_ISREG(info.st_mode)) {
    Fail(std::string("is ") + FileTypeName(info.st_mode) +
             ", not a regular file (outputs are regular files; a character device such as /dev/null is written "
             "through)",
         0);
  }
  // A regular file or a new name: follow symlinks to the name to replace
  // (a dangling one to the name to create), so that the temporary is
  // renamed onto the target and the link stays a link.
  for (int links = 0;; ++links) {
    struct stat link {};
    if (::lstat(target_.c_str(), &link) != 0 || !S_ISLNK(link.st_mode)) break;
    if (links == kMaxSymlinks) Fail("cannot be written", ELOOP);
    std::string to(PATH_MAX, '\0');  // not st_size: /proc's links report 64
    const ssize_t n = ::readlink(target_.c_str(), to.data(), to.size());
    if (n < 0 || static_cast<std::size_t>(n) >= to.size()) Fail("cannot be written", n < 0 ? errno : ENAMETOOLONG);
    to.resize(static_cast<std::size_t>(n));
    target_ = to.starts_with('/') ? to : DirectoryOf(target_) + "/" + to;
  }
  RemoveStaleTemporaries(target_);
  const std::string prefix =
      DirectoryOf(target_) + "/" + TemporaryPrefix(target_) + HostTag() + "-" + std::to_string(::getpid()) + "-";
  static std::atomic<unsigned> counter{0};
  // O_EXCL with mode 0666: the file gets what a plain open would give it
  // (the umask applies), without touching the process's umask.
  for (int attempt = 0; attempt < 100 && fd_ < 0; ++attempt) {
    temporary_ = prefix + std::to_string(counter++) + std::string(kTemporarySuffix);
    fd_ = ::open(temporary_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ < 0 && errno != EEXIST) break;
  }
  if (fd_ < 0) {
    const int error = errno;
    temporary_.clear();
    Fail("cannot be written", error);
  }
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!temporary_.empty()) ::unlink(temporary_.c_str());
}

void OutputFile::Write(const void* data, std::size_t size) {
  if (fd_ < 0) Fail("cannot be written", EBADF);  // after Sync: a caller's mistake, not a full disk
  const auto* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd_, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) Fail("cannot be written", n == 0 ? EIO : errno);  // a full disk: ENOSPC here or at Sync
    p += n;
    size -= static_cast<std::size_t>(n);
  }
}

void OutputFile::Sync() {
  if (fd_ < 0) return;
  // A device has no disk to flush (fsync on /dev/null is EINVAL).
  if (!temporary_.empty() && ::fsync(fd_) != 0) Fail("cannot be written", errno);
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) Fail("cannot be written", errno);
}

void OutputFile::Commit() {
  Sync();
  if (temporary_.empty()) return;  // written through, or committed before
  if (std::rename(temporary_.c_str(), target_.c_str()) != 0) Fail("cannot be replaced", errno);
  temporary_.clear();
  // The rename itself reaches the disk with the directory. Best effort: the
  // file is complete and in place either way, and some file systems refuse
  // to fsync a directory.
  const int dir_fd = ::open(DirectoryOf(target_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
}

void OutputFile::Fail(std::string_view rule, int error) const {
  std::string why(rule);
  if (error != 0) why += std::string(": ") + std::strerror(error);
  ThrowError(op_, parameter_, FormatValue(path_), why);
}

void RequireWritableOutput(std::string_view op, std::string_view parameter, const std::string& path) {
  const OutputFile probe(op, parameter, path);  // its temporary is removed again
}

}  // namespace posenc
