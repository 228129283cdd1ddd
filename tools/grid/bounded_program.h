// Running a helper program (sbatch, squeue) that may hang or print without
// end: its output is read through a pipe and kept up to a bound, and it is
// killed when it has not finished within the time it is given, so posenc
// always comes back and can say what happened.
#pragma once

#include <string>
#include <vector>

namespace posenc::cli {

struct ProgramOutput {
  int status = 0;          // waitpid's status, when it finished
  bool timed_out = false;  // killed (SIGKILL) at the deadline
  std::string output;      // stdout and stderr together, at most kMaxKeptBytes (trailing blanks cut)
  bool cut = false;        // it printed more than that
};

inline constexpr std::size_t kMaxKeptBytes = 4000;

// Runs `argv` (argv[0] found on PATH) and waits at most `timeout_s` seconds.
// Throws std::system_error when it cannot be started.
ProgramOutput RunBoundedProgram(const std::vector<std::string>& argv, double timeout_s);

}  // namespace posenc::cli
