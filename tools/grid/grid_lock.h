// One run at a time in a grid directory. Two runs on one --out would each
// compute every missing cell (twice the work, two writers of each cell
// file), and a run with other settings would rewrite grid.json under the
// first. A run holds an exclusive flock on DIR/grid.lock for its whole
// length; the kernel releases it when the run ends, however it ends (a
// SIGKILL included), so a lock is never left behind. The file keeps the
// holder's pid, for the error the next run gives.
#pragma once

#include <string>

namespace posenc::cli {

class GridLock {
 public:
  // Creates DIR (after RequireOutputDirectory's checks) and takes the lock.
  // Throws posenc::Error "[grid] out = "DIR": is in use by another run
  // (pid N) ..." at once when another process holds it.
  explicit GridLock(const std::string& dir);
  ~GridLock();  // releases the lock (the file stays: removing it would race a run opening it)
  GridLock(const GridLock&) = delete;
  GridLock& operator=(const GridLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace posenc::cli
