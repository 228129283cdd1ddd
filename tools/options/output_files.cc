#include "options/output_files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "posenc/error.h"

namespace posenc::cli {
namespace {

constexpr std::array<int, 3> kHeldSignals = {SIGINT, SIGTERM, SIGHUP};
volatile sig_atomic_t held_signal = 0;

void NoteSignal(int signal) { held_signal = signal; }

}  // namespace

OutputFiles::OutputFiles(std::string op) : op_(std::move(op)) {
  struct sigaction note {};
  note.sa_handler = NoteSignal;
  sigemptyset(&note.sa_mask);
  for (std::size_t i = 0; i < kHeldSignals.size(); ++i) sigaction(kHeldSignals[i], &note, &previous_handlers_[i]);
}

OutputFiles::~OutputFiles() {
  files_.clear();  // the temporaries of an uncommitted set, before an interrupt is let through
  for (std::size_t i = 0; i < kHeldSignals.size(); ++i) sigaction(kHeldSignals[i], &previous_handlers_[i], nullptr);
  if (const int signal = held_signal; signal != 0) {
    held_signal = 0;
    ::raise(signal);  // the default action now: the interrupt the user asked for
  }
}

void OutputFiles::Write(const std::string& target, std::string_view contents) {
  auto file = std::make_unique<OutputFile>(op_, "out", target);
  for (const auto& other : files_) {
    if (other->target() == file->target())
      ThrowError(op_, "out", FormatValue(target), "is written twice by one command");
  }
  file->Write(contents);
  files_.push_back(std::move(file));
}

void OutputFiles::Commit() {
  // Every file on disk before any is renamed: a failure leaves the old set.
  for (const auto& file : files_) file->Sync();
  for (const auto& file : files_) file->Commit();
  files_.clear();
}

void RequireOutputDirectory(const std::string& op, const std::string& parameter, const std::string& dir) {
  Require(!dir.empty(), op, parameter, dir, "must name a directory (it is empty)");
  Require(dir.find('\0') == std::string::npos, op, parameter, dir, "must not contain a NUL byte");
  std::filesystem::path existing(dir);
  struct stat info {};
  while (::stat(existing.c_str(), &info) != 0) {
    if (errno != ENOENT && errno != ENOTDIR)
      ThrowError(op, parameter, FormatValue(dir), std::string("cannot be read: ") + std::strerror(errno));
    existing = existing.has_relative_path() ? existing.parent_path() : std::filesystem::path(".");
    if (existing.empty()) existing = ".";
  }
  if (!S_ISDIR(info.st_mode)) {
    Require(existing != dir, op, parameter, dir,
            "is a file, not a directory (it names the directory the results are written to)");
    ThrowError(op, parameter, FormatValue(dir), "cannot be created: " + FormatValue(existing.string()) + " is a file");
  }
  if (::access(existing.c_str(), W_OK) != 0) {
    ThrowError(op, parameter, FormatValue(dir),
               "cannot be written: " + FormatValue(existing.string()) + ": " + std::strerror(errno));
  }
}

}  // namespace posenc::cli
