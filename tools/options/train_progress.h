// Progress of `posenc train` on stderr: the step, this step's loss and the
// tokens/s. On a terminal, a bar redrawn in place (ProgressBar's look, with
// the loss, which ProgressBar has no place for); in a log (a file, a pipe,
// a batch job), one line every tenth of the steps, so that a long run's log
// shows the loss falling.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "posenc/tiny_lm_train.h"

namespace posenc::cli {

class TrainProgress {
 public:
  explicit TrainProgress(std::string label);
  void Update(const TinyLmTrainProgress& progress);
  // Ends the bar's line (terminal); nothing in a log.
  void Finish();

 private:
  void Draw(const TinyLmTrainProgress& progress);

  std::string label_;
  bool terminal_;
  bool drawn_ = false;
  std::int64_t next_log_step_ = 0;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace posenc::cli
