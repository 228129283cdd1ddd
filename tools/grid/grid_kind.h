// What a kind of grid (study, passkey, zoo) supplies to the grid machinery: how
// to check a grid file's values, how to compute one cell, how to say what it
// found in one line, and how to merge the finished cells into the kind's
// report.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grid/grid.h"
#include "options/model_inputs.h"
#include "options/output_files.h"

namespace posenc::cli {

// A merged report: the files written (all or none) and what to print.
struct GridReport {
  std::string markdown;
  std::string json;
  std::vector<std::string> files;
  std::string summary;  // the closing line: entries, cells, compute time
};

struct GridKind {
  const char* name;
  // Checks every value of the kind that ReadGrid read (settings, each
  // cell's parameters, each entry's row) by the rule of the command-line
  // flag it came from, so that compute and merge read only values the
  // command would have accepted; throws posenc::Error naming the field
  // (GridField `file` is grid.json's top level).
  void (*check)(const Grid& grid, const GridField& file);
  // Computes one cell; the inputs come from grid.inputs (checked against
  // their digests). Returns the result JSON stored in the cell's file.
  nlohmann::json (*compute)(const Grid& grid, const GridCell& cell);
  // One line for a finished cell ("found, exact, answer NLL 0.100").
  std::string (*summary)(const nlohmann::json& result);
  // Writes the report into `dir` from the finished cells (every cell of the
  // grid is there).
  GridReport (*merge)(const Grid& grid, const std::map<std::string, nlohmann::json>& results, const std::string& dir);
};

// The finished cells' compute time, added up.
double TotalCellSeconds(const std::map<std::string, nlohmann::json>& results);

// Writes DIR/NAME.md, DIR/NAME.json and DIR/NAME.png (drawn by `draw` into
// the path it is given) together or not at all, and returns them with the
// closing line "NAME: <entries> <noun>, <cells> cells, <seconds> of compute".
GridReport WriteGridReport(const Grid& grid, double seconds, const std::string& dir, const std::string& name,
                           const std::string& noun, std::string markdown, std::string json,
                           const std::function<void(const std::string& png, OutputFiles& files)>& draw);

// Throws posenc::Error naming the kind when there is no such kind.
const GridKind& FindGridKind(const std::string& name);

const GridKind& StudyGridKind();    // study_grid.cc
const GridKind& PasskeyGridKind();  // passkey_grid.cc
const GridKind& ZooGridKind();      // zoo_grid.cc
const GridKind& TasksGridKind();    // tasks_grid.cc

// The grid's model, loaded after checking that the file is still the one
// the grid was planned with (a cell computed from another file under the
// same key would be wrong silently).
LoadedModel LoadGridModel(const Grid& grid);
// The grid's text, tokenized, checked the same way.
std::vector<std::int32_t> TokenizeGridText(const Grid& grid, const BpeTokenizer& tokenizer);

// The path of the grid's input `name` ("corpus"), after checking that the
// file is still the one the grid was planned with.
std::string CheckedGridInput(const Grid& grid, const char* name);

// {"path", "sha256"} of an input file, for Grid::inputs.
nlohmann::json GridInput(const std::string& op, const std::string& path);

}  // namespace posenc::cli
