// A grid: the independent cells of a study or passkey run, kept in one
// results directory so that any machine, or any node of a cluster, can
// compute any cell, a finished cell is never computed again, and the
// report is merged from whatever is there.
//
// DIR/grid.json      the plan: kind, posenc version, inputs (model and text
//                    with their SHA-256), the kind's settings, the report's
//                    entries (each names the cell that answers it) and the
//                    cells (the parameters that determine each).
// DIR/cells/KEY.json one finished cell: its key, parameters and result,
//                    written to a temporary name and renamed, so a killed
//                    cell leaves nothing that looks finished.
// DIR/logs/KEY.log   what the cell's process printed (local executor).
// DIR/slurm/         sbatch scripts, their key lists and the tasks' logs.
//
// KEY is the SHA-256 of the parameters' canonical JSON (sorted keys), which
// hold the model's and text's digests, the method in its resolved text form,
// the length and the rest the kind needs, and the posenc version: entries
// that ask for the same computation (a method that is the model's own RoPE
// at a length shares `none`'s cell) share one cell.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace posenc::cli {

// A cell to compute: what determines it, and what it costs. (The NOLINT:
// nlohmann::json's noexcept move runs assertions clang-tidy cannot see into.)
// NOLINTNEXTLINE(bugprone-exception-escape)
struct GridCell {
  nlohmann::json params;    // hashed into the key; read by the kind's Compute
  std::string label;        // for progress lines ("L 4096 depth 0.10 none")
  double flops = 0;         // of its forward passes: the order of work, the cost model
  double memory_bytes = 0;  // peak, for how many cells run at once
};

// One row of the report and the cell that answers it.
struct GridEntry {
  nlohmann::json row;  // the kind's fields: method as asked, resolved form, length, ...
  std::string key;
};

// NOLINTNEXTLINE(bugprone-exception-escape): as GridCell's
struct Grid {
  std::string kind;                       // "study" | "passkey"
  std::string version;                    // of the posenc that planned it
  nlohmann::json inputs;                  // {"model": {"path", "sha256"}, ["text": {...}]}
  nlohmann::json settings;                // the kind's, for the merge
  std::vector<GridEntry> entries;         // in report order
  std::map<std::string, GridCell> cells;  // by key
};

// The posenc version grids and cells are stamped with.
std::string GridVersion();

// Adds `row` answered by the cell with `params` (shared when another entry
// already asked for the same parameters).
void AddGridEntry(Grid& grid, nlohmann::json row, const GridCell& cell);
std::string CellKey(const nlohmann::json& params);

// Writes DIR/grid.json (creating DIR). Throws posenc::Error naming the
// mismatch when DIR already holds a grid of another kind, posenc version,
// model or text: their cells would be mixed with these.
void WriteGrid(const std::string& dir, const Grid& grid);
// Throws posenc::Error when DIR/grid.json is missing or not a grid.
Grid ReadGrid(const std::string& dir);

// What DIR/cells holds for a grid.
struct GridScan {
  std::map<std::string, nlohmann::json> finished;  // key -> result, for the grid's cells
  std::vector<std::string> missing;                // keys of the grid's cells not (validly) there
  std::vector<std::string> unreadable;             // cell files cut short or not a cell: redone
  std::vector<std::string> foreign;                // "path: why" for cells of another version or input
  std::int64_t others = 0;                         // finished cells of this grid's inputs no entry asks for
};
GridScan ScanGrid(const std::string& dir, const Grid& grid);
// Throws posenc::Error naming the first foreign cell: a directory that mixes
// versions or models is never merged silently.
void RequireNoForeignCells(const std::string& dir, const GridScan& scan);

// Writes DIR/cells/KEY.json for a computed cell (temporary name, fsync,
// rename).
void WriteCellResult(const std::string& dir, const std::string& key, const GridCell& cell, const nlohmann::json& result,
                     int threads, double seconds);

std::string CellPath(const std::string& dir, const std::string& key);
std::string CellLogPath(const std::string& dir, const std::string& key);

}  // namespace posenc::cli
