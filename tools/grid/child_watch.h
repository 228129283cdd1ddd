// Waiting for child processes (a grid's cells) while staying killable the
// right way. A SIGINT, SIGTERM or SIGHUP sent to this process alone (kill,
// a batch system; Ctrl-C at a terminal reaches the whole process group) would
// end it and leave its children running as orphans, still writing cells.
// While a ChildWatch lives, those signals and SIGCHLD are caught, by
// whichever thread receives them, and each wakes Wait through one self-pipe;
// the owner then forwards the stop signal to its children, waits for them,
// and calls DieOf, so this process still ends by the signal (exit status
// 128 + its number: 130 for SIGINT, 143 for SIGTERM), as it would have.
#pragma once

#include <signal.h>  // NOLINT(modernize-deprecated-headers): POSIX sigaction, not in <csignal>

#include <array>

namespace posenc::cli {

class ChildWatch {
 public:
  // A stop signal this process ignores (nohup, a shell's background job)
  // stays ignored.
  ChildWatch();
  ~ChildWatch();  // restores the previous handlers
  ChildWatch(const ChildWatch&) = delete;
  ChildWatch& operator=(const ChildWatch&) = delete;

  // Blocks until a child may have changed state or a stop signal came
  // (either may have happened before the call: nothing is missed).
  void Wait() const;
  // The first stop signal received (SIGINT, SIGTERM or SIGHUP), or 0.
  int StopSignal() const;
  // Ends this process by `signal` under its default disposition.
  [[noreturn]] static void DieOf(int signal);

 private:
  static constexpr std::array<int, 4> kSignals{SIGCHLD, SIGINT, SIGTERM, SIGHUP};
  std::array<struct sigaction, 4> previous_{};
  std::array<bool, 4> installed_{};
};

}  // namespace posenc::cli
