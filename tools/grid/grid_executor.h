// Running a grid's missing cells: here, several at once (`local`), or as
// one Slurm job array (`slurm`); then merging the report.
//
// Each cell is computed by its own `posenc grid cell DIR KEY` process, the
// same command on a laptop and on a cluster node, so the two executors give
// bitwise the same numbers (posenc's kernels do not depend on the thread
// count).
#pragma once

#include <memory>
#include <chrono>
#include <string>

#include <CLI/CLI.hpp>

#include "grid/grid.h"
#include "grid/grid_kind.h"

namespace posenc::cli {

enum class Executor { kLocal, kSlurm };

struct ExecutorOptions {
  Executor executor = Executor::kLocal;
  int jobs = 0;     // local: cells at once (0: as many as the cores and the memory allow)
  int threads = 0;  // threads per cell (0: local, the cores shared among the jobs; slurm, --cpus-per-task)
  // slurm: passed to sbatch when given.
  std::string partition, time, mem;
  int cpus_per_task = 0;
  bool no_wait = false;  // slurm: submit, print how to follow up, return
  // Write grid.json and stop, computing nothing: `posenc grid status DIR`
  // then prints the grid's cost before a cell runs or a job is submitted.
  bool plan_only = false;
  // slurm: how long sbatch and each squeue may take before they are killed
  // and posenc stops with an error saying so.
  double slurm_timeout_s = 60;
};

// --executor, --jobs, --threads, --partition, --time, --cpus-per-task,
// --mem, --no-wait, --slurm-timeout, --plan-only.
void AddExecutorOptions(CLI::App& command, const std::shared_ptr<ExecutorOptions>& options);

// Writes the grid into `dir`, computes its missing cells with the chosen
// executor and merges the report. Returns false when the report was not
// merged (slurm --no-wait). Throws posenc::Error for a directory holding
// other results or in use by another run (grid_lock.h: DIR/grid.lock is
// held for the whole run, so the second fails at once), a cell that failed
// (naming it and its log), a Slurm option not in Slurm's syntax, sbatch
// missing, failing or not answering within --slurm-timeout (naming the
// command and what it printed), squeue the same.
//
// Local executor: a SIGINT, SIGTERM or SIGHUP to this process is sent on to
// the running cells; once they have exited, this process dies of the same
// signal (exit status 128 + its number: 130 for SIGINT, 143 for SIGTERM).
// The finished cells are kept and the same command resumes. A SIGKILL,
// which nothing can catch, takes the running cells with it (each dies with
// this process). (Slurm: the job array keeps running; `posenc grid status
// DIR` follows it.)
bool RunGrid(const std::string& dir, const Grid& grid, const ExecutorOptions& options, GridReport* report);

// Merges the report of a grid whose cells are all finished; throws
// posenc::Error listing the missing ones otherwise.
GridReport MergeGrid(const std::string& dir, const Grid& grid);

// Prints what a run or merge did: the Markdown (or JSON) and the files.
void PrintGridReport(const GridReport& report, bool json);

// RunGrid, then (when the grid finished here) PrintGridReport and the run's
// wall time since `start` as "<op>: this run took N s" (on stderr with
// --json, so that stdout stays one JSON document).
void RunGridAndReport(const char* op, const std::string& dir, const Grid& grid, const ExecutorOptions& options,
                      bool json, std::chrono::steady_clock::time_point start);

}  // namespace posenc::cli
