#include "options/output_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "posenc/error.h"

namespace posenc::cli {
namespace {

constexpr std::array<int, 3> kHeldSignals = {SIGINT, SIGTERM, SIGHUP};
volatile sig_atomic_t held_signal = 0;

void NoteSignal(int signal) { held_signal = signal; }

// write(2) until done: a full disk reports ENOSPC here or at fsync.
bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

}  // namespace

OutputFiles::OutputFiles(std::string op) : op_(std::move(op)) {
  struct sigaction note {};
  note.sa_handler = NoteSignal;
  sigemptyset(&note.sa_mask);
  for (std::size_t i = 0; i < kHeldSignals.size(); ++i) sigaction(kHeldSignals[i], &note, &previous_handlers_[i]);
}

OutputFiles::~OutputFiles() {
  for (const Pending& p : pending_) ::unlink(p.temporary.c_str());
  for (std::size_t i = 0; i < kHeldSignals.size(); ++i) sigaction(kHeldSignals[i], &previous_handlers_[i], nullptr);
  if (const int signal = held_signal; signal != 0) {
    held_signal = 0;
    ::raise(signal);  // the default action now: the interrupt the user asked for
  }
}

std::string OutputFiles::Reserve(const std::string& target) {
  const auto fail = [&](const std::string& why) { ThrowError(op_, "out", FormatValue(target), why); };
  std::error_code ec;
  if (std::filesystem::is_directory(target, ec)) fail("is a directory, not a file that can be replaced");
  for (const Pending& p : pending_) {
    if (p.target == target) fail("is written twice by one command");
  }
  const std::filesystem::path path(target);
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
  std::string temporary = (dir / ("." + path.filename().string() + ".XXXXXX")).string();
  const int fd = ::mkstemp(temporary.data());
  if (fd < 0) fail(std::string("cannot be written: ") + std::strerror(errno));
  // mkstemp makes 0600; the outputs get what a plain open would give them.
  const mode_t umask_bits = ::umask(0);
  ::umask(umask_bits);
  ::fchmod(fd, 0666 & ~umask_bits);
  ::close(fd);
  pending_.push_back({target, temporary});
  return temporary;
}

const OutputFiles::Pending& OutputFiles::PendingFor(const std::string& target) {
  for (const Pending& p : pending_) {
    if (p.target == target) return p;
  }
  Reserve(target);
  return pending_.back();
}

void OutputFiles::Write(const std::string& target, std::string_view contents) {
  const Pending& p = PendingFor(target);
  const int fd = ::open(p.temporary.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  bool ok = fd >= 0 && WriteAll(fd, contents);
  int error = ok ? 0 : errno;
  if (fd >= 0 && ::close(fd) != 0 && ok) {
    ok = false;
    error = errno;
  }
  if (!ok) ThrowError(op_, "out", FormatValue(target), std::string("cannot be written: ") + std::strerror(error));
}

void OutputFiles::Copy(const std::string& target, const std::string& source) {
  std::ifstream in(source, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (!in.good() && !in.eof()) ThrowError(op_, "source", FormatValue(source), "cannot be read");
  Write(target, bytes.str());
}

void OutputFiles::Commit() {
  // Every file on disk before any is renamed: a failure leaves the old set.
  for (const Pending& p : pending_) {
    const int fd = ::open(p.temporary.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || ::fsync(fd) != 0) {
      const int error = errno;
      if (fd >= 0) ::close(fd);
      ThrowError(op_, "out", FormatValue(p.target), std::string("cannot be written: ") + std::strerror(error));
    }
    ::close(fd);
  }
  while (!pending_.empty()) {
    const Pending& p = pending_.front();
    if (std::rename(p.temporary.c_str(), p.target.c_str()) != 0) {
      ThrowError(op_, "out", FormatValue(p.target), std::string("cannot be replaced: ") + std::strerror(errno));
    }
    pending_.erase(pending_.begin());
  }
}

}  // namespace posenc::cli
