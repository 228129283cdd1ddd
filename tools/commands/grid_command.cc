// posenc grid cell DIR KEY [--threads T]   compute one cell (what the executors run)
// posenc grid status DIR [--rate-from DIR2] finished / missing cells, Slurm jobs, the grid's cost
//                                          (TFLOP; core-hours at DIR2's or its own finished cells' rate)
// posenc grid merge DIR [--json]           the report from the finished cells
//
// The follow-up commands of a grid run by `posenc study`, `posenc passkey`
// or `posenc zoo` (grid.h says what a grid directory holds).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "commands.h"
#include "grid/grid.h"
#include "grid/grid_executor.h"
#include "grid/grid_kind.h"
#include "posenc/error.h"
#include "posenc/input_file.h"
#include "posenc/parallel.h"

namespace posenc::cli {
namespace {

constexpr const char* kOp = "grid";

struct GridOptions {
  std::string dir, key;
  std::string rate_from;  // status: the grid whose finished cells give the rate
  int threads = 0;
  bool json = false;
};

void ComputeCell(const GridOptions& o) {
  RequireCellKey(o.key);
  const Grid grid = ReadGrid(o.dir);
  const auto it = grid.cells.find(o.key);
  Require(it != grid.cells.end(), kOp, "key", o.key, "is not a cell of the grid in " + o.dir);
  if (o.threads > 0) SetNumThreads(o.threads);
  const GridKind& kind = FindGridKind(grid.kind);
  std::fprintf(stderr, "grid cell %s: %s, %d thread(s)\n", o.key.c_str(), it->second.label.c_str(), NumThreads());
  const auto start = std::chrono::steady_clock::now();
  const nlohmann::json result = kind.compute(grid, it->second);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  WriteCellResult(o.dir, o.key, it->second, result, NumThreads(), seconds);
  std::printf("%s: %s, %.1f s\n", it->second.label.c_str(), kind.summary(result).c_str(), seconds);
}

// Flops per core-second of a grid's finished cells; 0 without one.
double FinishedRate(const Grid& grid, const GridScan& scan) {
  double flops = 0;
  for (const auto& [key, result] : scan.finished) flops += grid.cells.at(key).flops;
  return flops > 0 && scan.finished_core_seconds > 0 ? flops / scan.finished_core_seconds : 0;
}

void PrintStatus(const GridOptions& o) {
  const Grid grid = ReadGrid(o.dir);
  const GridScan scan = ScanGrid(o.dir, grid);
  // The inputs the kind has (study: model and text; passkey: model; zoo:
  // corpus and text), whichever they are: ReadGrid checked their form.
  std::string inputs;
  for (const auto& [name, input] : grid.inputs.items()) {
    inputs += ", " + name + " " + EscapeControlBytes(input.at("path").get<std::string>());
  }
  std::printf("%s: a %s grid of posenc %s%s\n", o.dir.c_str(), grid.kind.c_str(), grid.version.c_str(), inputs.c_str());
  std::printf("cells: %zu, finished %zu, missing %zu\n", grid.cells.size(), scan.finished.size(), scan.missing.size());
  // The cost model: each cell's planned flops, turned into core time at the
  // finished cells' rate (flops per core-second), or another grid's
  // (--rate-from) before any cell of this one ran.
  double total_flops = 0, missing_flops = 0;
  for (const auto& [key, cell] : grid.cells) total_flops += cell.flops;
  for (const std::string& key : scan.missing) missing_flops += grid.cells.at(key).flops;
  std::string source = "the finished cells";
  double rate = FinishedRate(grid, scan);
  if (!o.rate_from.empty()) {
    const Grid other = ReadGrid(o.rate_from);
    rate = FinishedRate(other, ScanGrid(o.rate_from, other));
    Require(rate > 0, kOp, "--rate-from", o.rate_from, "has no finished cell to measure a rate from");
    source = o.rate_from + "'s finished cells";
  }
  std::printf("cost: %.3g TFLOP in all", total_flops / 1e12);
  if (rate > 0) {
    std::printf(", about %.1f core-hours at %.2f GFLOP/s per core (%s)", total_flops / rate / 3600, rate / 1e9,
                source.c_str());
  }
  std::printf("\n");
  if (rate > 0 && !scan.missing.empty()) {
    std::printf("compute left: about %.1f core-minutes (%s: %.2f GFLOP/s per core)\n", missing_flops / rate / 60,
                source.c_str(), rate / 1e9);
  }
  for (std::size_t i = 0; i < scan.missing.size() && i < 10; ++i) {
    std::printf("  missing %s %s\n", scan.missing[i].c_str(), grid.cells.at(scan.missing[i]).label.c_str());
  }
  if (scan.missing.size() > 10) std::printf("  … and %zu more\n", scan.missing.size() - 10);
  for (const std::string& why : scan.unreadable) std::printf("  not a whole cell (computed again): %s\n", why.c_str());
  for (const std::string& why : scan.strays) std::printf("  not a cell: %s\n", why.c_str());
  for (const std::string& why : scan.foreign) std::printf("  of other results (merge refuses): %s\n", why.c_str());
  if (scan.others > 0)
    std::printf("  %lld finished cell(s) of earlier grids, not asked for now\n", static_cast<long long>(scan.others));
  // slurm/jobs: one line per submitted array (grid_executor.cc); read only
  // as a regular file of bounded size, like every grid file.
  const std::string jobs_path = o.dir + "/slurm/jobs";
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(jobs_path, ec))) return;
  std::istringstream jobs(ReadRegularFile(kOp, "slurm/jobs", jobs_path, kMaxGridFileBytes, "one line a submission"));
  std::string id, stamp, count;
  while (jobs >> id >> stamp >> count)
    std::printf("slurm job %s: %s cells (%s)\n", id.c_str(), count.c_str(), stamp.c_str());
}

void Merge(const GridOptions& o) {
  const Grid grid = ReadGrid(o.dir);
  PrintGridReport(MergeGrid(o.dir, grid), o.json);
}

}  // namespace

void AddGridCommands(CLI::App& app) {
  CLI::App* grid = app.add_subcommand("grid",
                                      "Follow up a grid (posenc study/passkey/zoo --out DIR): status, merge; "
                                      "cell computes one cell");
  grid->require_subcommand(1);
  auto o = std::make_shared<GridOptions>();
  CLI::App* cell = grid->add_subcommand("cell", "Compute one cell of a grid (what the local and Slurm executors run)");
  cell->add_option("dir", o->dir, "Grid directory")->required();
  cell->add_option("key", o->key, "Cell key (grid.json)")->required();
  cell->add_option("--threads", o->threads, "Threads (default: all)")->check(CLI::Range(1, 1024));
  cell->callback([o] { ComputeCell(*o); });
  CLI::App* status = grid->add_subcommand("status", "Finished and missing cells, Slurm jobs, compute left");
  status->add_option("dir", o->dir, "Grid directory")->required();
  status->add_option("--rate-from", o->rate_from,
                     "Another grid's directory: its finished cells' GFLOP/s per core price this grid (one planned with "
                     "--plan-only, before a cell ran)");
  status->callback([o] { PrintStatus(*o); });
  CLI::App* merge = grid->add_subcommand("merge", "Write the report from the finished cells (all must be there)");
  merge->add_option("dir", o->dir, "Grid directory")->required();
  merge->add_flag("--json", o->json, "Print the JSON report");
  merge->callback([o] { Merge(*o); });
}

}  // namespace posenc::cli
