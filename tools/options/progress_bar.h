// A progress bar on stderr for long model runs: redrawn in place on a
// terminal; when stderr is a file or a pipe (a log: a grid cell's, a batch
// job's), a line every kLogInterval seconds while the step runs (count,
// rate, time left: a cell of many minutes is not silent) and one when it
// ends with its count, rate and time. The environment variable
// POSENC_PROGRESS_SECONDS sets the log's interval (seconds >= 0).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace posenc::cli {

inline constexpr double kLogInterval = 30;

class ProgressBar {
 public:
  // `unit` names what is counted ("tok").
  ProgressBar(std::string label, std::string unit);
  // `done` of `total` (the total may be known only once the work starts).
  void Update(std::int64_t done, std::int64_t total);
  // Ends the line, the work complete.
  void Finish();

 private:
  void Draw(std::int64_t done, bool final);

  std::string label_, unit_;
  std::int64_t total_ = 1;
  bool terminal_;
  double log_interval_;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace posenc::cli
