// Files a command writes, made visible together or not at all.
//
// Each output is written to a temporary file beside its target (same
// directory, so that rename(2) replaces the target atomically), flushed to
// disk and checked; only when every output was written are the temporaries
// renamed onto their targets. Until then the previous files stay as they
// were: a full disk, a target that is a directory, or an error halfway
// leaves no truncated or mismatched set behind (study.md of one run beside
// study.png of another), and the error names the file.
//
// SIGINT, SIGTERM and SIGHUP are held back while the object lives (the
// writing takes well under a second), so an interrupt cannot leave
// temporaries behind or stop between two renames: their handlers only note
// the signal (process-wide, whichever thread receives it), and the signal is
// raised again when the object is destroyed, after the commit.
#pragma once

#include <signal.h>  // NOLINT(modernize-deprecated-headers): POSIX sigaction, not in <csignal>

#include <array>
#include <string>
#include <string_view>
#include <vector>

namespace posenc::cli {

class OutputFiles {
 public:
  // `op` names the command in error messages ("[study] out = ...").
  explicit OutputFiles(std::string op);
  ~OutputFiles();  // removes the temporaries of an uncommitted set
  OutputFiles(const OutputFiles&) = delete;
  OutputFiles& operator=(const OutputFiles&) = delete;

  // Creates the temporary file for `target` and returns its path, for a
  // writer that fills it itself (gnuplot); throws posenc::Error naming the
  // target if it is a directory or its directory cannot be written.
  std::string Reserve(const std::string& target);
  // Writes `contents` as the new `target`.
  void Write(const std::string& target, std::string_view contents);
  // Copies the file `source` as the new `target`.
  void Copy(const std::string& target, const std::string& source);
  // Flushes every temporary to disk, then renames each onto its target.
  void Commit();

 private:
  struct Pending {
    std::string target, temporary;
  };
  const Pending& PendingFor(const std::string& target);

  std::string op_;
  std::vector<Pending> pending_;
  std::array<struct sigaction, 3> previous_handlers_{};
};

}  // namespace posenc::cli
