#include "grid/grid.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "grid/file_digest.h"
#include "options/output_files.h"
#include "posenc/error.h"

namespace posenc::cli {
namespace {

constexpr const char* kOp = "grid";
constexpr int kGridFormat = 1;

std::string GridPath(const std::string& dir) { return dir + "/grid.json"; }

// The JSON in `path`, or nullopt when it is missing, cut short or not JSON.
std::optional<nlohmann::json> ReadJsonFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json json = nlohmann::json::parse(text.str(), nullptr, false);
  if (json.is_discarded()) return std::nullopt;
  return json;
}

std::string InputDigest(const nlohmann::json& inputs, const char* name) {
  if (!inputs.contains(name)) return "";
  return inputs.at(name).value("sha256", std::string());
}

// Why a cell's or another grid's stamp does not match this grid's, or "".
// digest_of(name): the other's SHA-256 of input `name` ("" when it has
// none), for every input this grid or the kinds may have.
std::string StampMismatch(const Grid& grid, const std::string& version,
                          const std::function<std::string(const std::string&)>& digest_of) {
  if (version != grid.version) return "posenc " + version + ", this grid is posenc " + grid.version;
  std::vector<std::string> names{"model", "text", "corpus"};
  for (const auto& [name, input] : grid.inputs.items()) {
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  for (const std::string& name : names) {
    const std::string theirs = digest_of(name), ours = InputDigest(grid.inputs, name.c_str());
    if (theirs == ours) continue;
    const auto short_digest = [](const std::string& digest) {
      return digest.empty() ? std::string("(none)") : digest.substr(0, 12) + "…";
    };
    std::string why = "a " + name + " with SHA-256 ";
    why += short_digest(theirs);
    why += ", this grid's " + name + " is ";
    why += short_digest(ours);
    return why;
  }
  return "";
}

nlohmann::json GridJson(const Grid& grid) {
  nlohmann::json entries = nlohmann::json::array();
  for (const GridEntry& e : grid.entries) {
    nlohmann::json row = e.row;
    row["cell"] = e.key;
    entries.push_back(std::move(row));
  }
  nlohmann::json cells = nlohmann::json::object();
  for (const auto& [key, cell] : grid.cells) {
    cells[key] = {
        {"params", cell.params}, {"label", cell.label}, {"flops", cell.flops}, {"memory_bytes", cell.memory_bytes}};
  }
  return {{"posenc_grid", kGridFormat}, {"kind", grid.kind},  {"version", grid.version}, {"inputs", grid.inputs},
          {"settings", grid.settings},  {"entries", entries}, {"cells", cells}};
}

}  // namespace

std::string GridVersion() { return POSENC_VERSION; }

std::string CellKey(const nlohmann::json& params) {
  // nlohmann::json keeps object keys sorted: the dump is canonical.
  return Sha256Hex(params.dump()).substr(0, 24);
}

void AddGridEntry(Grid& grid, nlohmann::json row, const GridCell& cell) {
  const std::string key = CellKey(cell.params);
  grid.cells.try_emplace(key, cell);
  grid.entries.push_back({std::move(row), key});
}

std::string CellPath(const std::string& dir, const std::string& key) { return dir + "/cells/" + key + ".json"; }
std::string CellLogPath(const std::string& dir, const std::string& key) { return dir + "/logs/" + key + ".log"; }

void WriteGrid(const std::string& dir, const Grid& grid) {
  Require(!grid.entries.empty(), kOp, "cells", 0, "the grid is empty: give at least one method, length and depth");
  if (std::filesystem::exists(GridPath(dir))) {
    const std::optional<nlohmann::json> old = ReadJsonFile(GridPath(dir));
    Require(old && old->is_object() && old->contains("kind"), kOp, "out", dir,
            "holds a grid.json that is not a posenc grid: remove it or choose another directory");
    const std::string kind = old->value("kind", std::string());
    Require(kind == grid.kind, kOp, "out", dir,
            "holds a " + kind + " grid; a " + grid.kind + " grid needs a directory of its own");
    const nlohmann::json inputs = old->value("inputs", nlohmann::json::object());
    const std::string why = StampMismatch(grid, old->value("version", std::string()),
                                          [&](const std::string& name) { return InputDigest(inputs, name.c_str()); });
    Require(why.empty(), kOp, "out", dir,
            "holds the results of " + why + ": their cells cannot be mixed with these (choose another directory)");
  }
  RequireOutputDirectory(kOp, "out", dir);
  std::error_code created;
  std::filesystem::create_directories(dir + "/cells", created);
  Require(!created, kOp, "out", dir, "cannot be created as a directory: " + created.message());
  OutputFiles files(kOp);
  files.Write(GridPath(dir), GridJson(grid).dump(1) + "\n");
  files.Commit();
}

Grid ReadGrid(const std::string& dir) {
  const std::optional<nlohmann::json> json = ReadJsonFile(GridPath(dir));
  Require(json.has_value(), kOp, "dir", dir,
          "has no readable grid.json (run posenc study or posenc passkey with --out DIR first)");
  Grid grid;
  try {
    Require(json->at("posenc_grid").get<int>() == kGridFormat, kOp, "grid.json", json->at("posenc_grid").dump(),
            "is a grid format this posenc does not read");
    grid.kind = json->at("kind").get<std::string>();
    grid.version = json->at("version").get<std::string>();
    grid.inputs = json->at("inputs");
    grid.settings = json->at("settings");
    for (const auto& [key, cell] : json->at("cells").items()) {
      grid.cells[key] = GridCell{.params = cell.at("params"),
                                 .label = cell.at("label").get<std::string>(),
                                 .flops = cell.at("flops").get<double>(),
                                 .memory_bytes = cell.at("memory_bytes").get<double>()};
    }
    for (nlohmann::json row : json->at("entries")) {
      std::string key = row.at("cell").get<std::string>();
      Require(grid.cells.contains(key), kOp, "grid.json", key, "is an entry's cell that the grid does not list");
      row.erase("cell");
      grid.entries.push_back({std::move(row), std::move(key)});
    }
  } catch (const nlohmann::json::exception& e) {
    ThrowError(kOp, "grid.json", FormatValue(GridPath(dir)), std::string("is not a whole grid: ") + e.what());
  }
  return grid;
}

GridScan ScanGrid(const std::string& dir, const Grid& grid) {
  GridScan scan;
  std::error_code ec;
  for (const auto& file : std::filesystem::directory_iterator(dir + "/cells", ec)) {
    const std::string path = file.path().string();
    if (file.path().extension() != ".json") continue;  // a writer's temporary
    const std::string key = file.path().stem().string();
    const std::optional<nlohmann::json> cell = ReadJsonFile(path);
    const bool whole = cell && cell->is_object() && cell->contains("params") && cell->contains("result") &&
                       cell->value("key", std::string()) == key;
    if (!whole) {
      scan.unreadable.push_back(path);
      continue;
    }
    const nlohmann::json& params = cell->at("params");
    const std::string why = StampMismatch(grid, params.value("version", std::string()), [&](const std::string& name) {
      return params.value(name + "_sha256", std::string());
    });
    if (!why.empty()) {
      std::string note = path;
      note += ": computed by ";
      note += why;
      scan.foreign.push_back(std::move(note));
    } else if (grid.cells.contains(key)) {
      scan.finished[key] = cell->at("result");
    } else {
      ++scan.others;
    }
  }
  for (const auto& [key, cell] : grid.cells) {
    if (!scan.finished.contains(key)) scan.missing.push_back(key);
  }
  return scan;
}

void RequireNoForeignCells(const std::string& dir, const GridScan& scan) {
  if (scan.foreign.empty()) return;
  ThrowError(kOp, "out", FormatValue(dir),
             "holds " + std::to_string(scan.foreign.size()) + " cell(s) of other results, e.g. " +
                 scan.foreign.front() + ": remove them or choose another directory");
}

void WriteCellResult(const std::string& dir, const std::string& key, const GridCell& cell, const nlohmann::json& result,
                     int threads, double seconds) {
  nlohmann::json json = {{"key", key},       {"label", cell.label}, {"params", cell.params},
                         {"result", result}, {"threads", threads},  {"seconds", seconds}};
  std::filesystem::create_directories(dir + "/cells");
  OutputFiles files(kOp);
  files.Write(CellPath(dir, key), json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  files.Commit();
}

}  // namespace posenc::cli
