// A progress bar on stderr for long model runs: redrawn in place on a
// terminal, one line every ten seconds otherwise (CI logs stay short).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace posenc::cli {

class ProgressBar {
 public:
  // `unit` names what is counted ("tok").
  ProgressBar(std::string label, std::int64_t total, std::string unit);
  void Update(std::int64_t done);
  // Ends the line (the bar at its last state).
  void Finish();

 private:
  void Draw(std::int64_t done, bool final);

  std::string label_, unit_;
  std::int64_t total_;
  bool terminal_;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace posenc::cli
