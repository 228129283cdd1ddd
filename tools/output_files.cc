#include "output_files.h"

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

}  // namespace posenc::cli
