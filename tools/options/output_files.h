// Files a command writes, made visible together or not at all.
//
// Each output is a posenc::OutputFile (posenc/output_file.h: what a target
// may be, the temporary beside it): only when every output was written and
// flushed to disk are the temporaries renamed onto their targets. Until then
// the previous files stay as they were: a full disk, a target that is a
// directory, or an error halfway leaves no truncated or mismatched set
// behind (study.md of one run beside study.png of another), and the error
// names the file.
//
// SIGINT, SIGTERM and SIGHUP are held back while the object lives (the
// writing takes well under a second), so an interrupt cannot leave
// temporaries behind or stop between two renames: their handlers only note
// the signal (process-wide, whichever thread receives it), and the signal is
// raised again when the object is destroyed, after the commit.
#pragma once

#include <signal.h>  // NOLINT(modernize-deprecated-headers): POSIX sigaction, not in <csignal>

#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/output_file.h"

namespace posenc::cli {

class OutputFiles {
 public:
  // `op` names the command in error messages ("[study] out = ...").
  explicit OutputFiles(std::string op);
  ~OutputFiles();  // removes the temporaries of an uncommitted set
  OutputFiles(const OutputFiles&) = delete;
  OutputFiles& operator=(const OutputFiles&) = delete;

  // Writes `contents` as the new `target`; throws posenc::Error naming the
  // target when it cannot be (see OutputFile) or is written twice.
  void Write(const std::string& target, std::string_view contents);
  // Flushes every temporary to disk, then renames each onto its target.
  void Commit();

 private:
  std::string op_;
  std::vector<std::unique_ptr<OutputFile>> files_;
  std::array<struct sigaction, 3> previous_handlers_{};
};

// Throws posenc::Error naming `dir` unless it can hold a command's outputs:
// an existing directory, or a new name whose nearest existing ancestor is a
// writable directory (the command creates it). Commands call it before
// their work; nothing is created. `parameter` names it ("--out").
void RequireOutputDirectory(const std::string& op, const std::string& parameter, const std::string& dir);

}  // namespace posenc::cli
