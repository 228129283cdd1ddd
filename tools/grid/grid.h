// A grid: the independent cells of a study, passkey, zoo or tasks run, kept in one
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
// DIR/grid.lock      locked (flock) by the run computing the grid, which
//                    writes its pid there: one run at a time (grid_lock.h).
//
// KEY is the SHA-256 of the parameters' canonical JSON (sorted keys), in 64
// lower-case hex digits: what the kind needs (the method in its resolved
// text form, the length, ...) and the stamps the grid adds to every cell
// (StampCellParams: the kind, the posenc version, each input's digest), so
// entries that ask for the same computation (a method that is the model's
// own RoPE at a length shares `none`'s cell) share one cell.
//
// The files are read as untrusted input: grid.json and cells are read only
// when they are regular files of at most kMaxGridFileBytes (a FIFO or a
// device is refused, never waited on), every key must be a cell key (so a
// key names a file inside DIR/cells, nothing else), and every value is
// checked by the rule of the command-line flag it came from (the kinds'
// `check`): a bad one is a posenc::Error naming the file, the field, the
// value and the rule (GridField).
#pragma once

#include <cstdint>
#include <map>
#include <string_view>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "posenc/error.h"

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
  std::string kind;                       // "study" | "passkey" | "zoo"
  std::string version;                    // of the posenc that planned it
  nlohmann::json inputs;                  // {"model": {"path", "sha256"}, ["text": {...}]}
  nlohmann::json settings;                // the kind's, for the merge
  std::vector<GridEntry> entries;         // in report order
  std::map<std::string, GridCell> cells;  // by key
};

// The posenc version grids and cells are stamped with.
std::string GridVersion();

// Adds `row` answered by `cell` (shared when another entry already asked for
// the same parameters). The cell's parameters are the kind's; the grid
// stamps them (StampCellParams) before they are hashed into the key.
void AddGridEntry(Grid& grid, nlohmann::json row, GridCell cell);
// Adds what every cell of `grid` is computed from: "kind", "version" and
// "<input>_sha256" for each of grid.inputs (a cell file carries them, so a
// directory that mixes versions or inputs is caught by ScanGrid).
void StampCellParams(const Grid& grid, nlohmann::json& params);
// The SHA-256 of the parameters' canonical JSON, its first 24 lower-case hex digits.
std::string CellKey(const nlohmann::json& params);
// Whether `key` has a cell key's form (so that it names a file in DIR/cells
// and nothing else: no "/", no "..").
bool IsCellKey(std::string_view key);
// Throws posenc::Error "[grid] key = ...: must be a cell key" unless it is one.
void RequireCellKey(const std::string& key);

// The most a grid.json or a cell file may hold: a grid of about a million
// cells, or a study cell's loss at each of 2^24 positions.
inline constexpr std::uint64_t kMaxGridFileBytes = std::uint64_t{512} << 20;

// Where a value of a grid file is, for the errors of reading it:
//   [grid] file = "DIR/grid.json": cells.KEY.params.windows = 0: must be ...
// The typed readers throw naming the field when it is missing or of another
// type; Check runs a flag's own check (which throws posenc::Error) and
// rethrows its error naming the file and the field.
struct GridField {
  std::string file;
  std::string path;  // "cells.KEY.params"; empty at the top level

  GridField Child(std::string_view name) const;
  [[noreturn]] void Fail(const std::string& value, std::string_view rule) const;
  template <class CheckFn>
  void Check(CheckFn&& check) const {
    try {
      check();
    } catch (const Error& e) {
      FailWith(e.what());
    }
  }
  [[noreturn]] void FailWith(std::string_view error) const;

  // Members of `object` named `name`, of one type each.
  const nlohmann::json& Object(const nlohmann::json& object, std::string_view name) const;
  const nlohmann::json& Array(const nlohmann::json& object, std::string_view name) const;
  std::string String(const nlohmann::json& object, std::string_view name) const;
  std::int64_t Int(const nlohmann::json& object, std::string_view name) const;
  double Number(const nlohmann::json& object, std::string_view name) const;  // finite
  bool Bool(const nlohmann::json& object, std::string_view name) const;
  std::vector<std::int64_t> Ints(const nlohmann::json& object, std::string_view name) const;
  std::vector<double> Numbers(const nlohmann::json& object, std::string_view name) const;
  std::vector<std::string> Strings(const nlohmann::json& object, std::string_view name) const;
};

// Writes DIR/grid.json (creating DIR). Throws posenc::Error naming the
// mismatch when DIR already holds a grid of another kind, posenc version,
// model or text: their cells would be mixed with these.
void WriteGrid(const std::string& dir, const Grid& grid);
// Throws posenc::Error naming the file, the field, the value and the rule
// when DIR/grid.json is missing, not a regular file, too large, not a grid,
// or holds a value its kind's command would not accept.
Grid ReadGrid(const std::string& dir);

// What DIR/cells holds for a grid.
struct GridScan {
  std::map<std::string, nlohmann::json> finished;  // key -> result, for the grid's cells
  std::vector<std::string> missing;                // keys of the grid's cells not (validly) there
  // "path: why" for cell files cut short or not a cell, or invalid (params
  // that do not hash to the key, a loss that is not a number in [0, 2^18],
  // a result the kind cannot read): redone, never merged.
  std::vector<std::string> unreadable;
  std::vector<std::string> foreign;  // "path: why" for cells of another version or input
  std::vector<std::string> strays;   // "path: why" for files in cells/ not named KEY.json
  std::int64_t others = 0;           // finished cells of this grid's inputs no entry asks for
  double finished_core_seconds = 0;  // of the finished cells: seconds x threads
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
