#include "grid/grid.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>

#include "grid/file_digest.h"
#include "options/output_files.h"
#include "grid/grid_kind.h"
#include "posenc/error.h"
#include "posenc/input_file.h"

namespace posenc::cli {
namespace {

constexpr const char* kOp = "grid";
// A cell key is the first 24 hex digits (96 bits) of the SHA-256 of its
// parameters: collisions are out of reach for any grid, and the grids
// published in docs/gallery keep their names.
constexpr int kGridFormat = 1;
constexpr std::size_t kCellKeyDigits = 24;

bool IsLowerHex(std::string_view text, std::size_t digits) {
  return text.size() == digits && text.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

std::string GridPath(const std::string& dir) { return dir + "/grid.json"; }

// The JSON in the regular file `path`, or nullopt when it is cut short or
// not JSON. Throws posenc::Error (parameter `parameter`) when the file is
// missing, not a regular file (a FIFO is never waited on) or larger than
// kMaxGridFileBytes.
std::optional<nlohmann::json> ReadJsonFile(const char* parameter, const std::string& path) {
  const std::string text = ReadRegularFile(kOp, parameter, path, kMaxGridFileBytes,
                                           "a grid file holds at most a million cells or 2^24 losses");
  nlohmann::json json = nlohmann::json::parse(text, nullptr, false);
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
  return Sha256Hex(params.dump()).substr(0, kCellKeyDigits);
}

bool IsCellKey(std::string_view key) { return IsLowerHex(key, kCellKeyDigits); }

void RequireCellKey(const std::string& key) {
  Require(IsCellKey(key), kOp, "key", key, "must be a cell key (24 lower-case hex digits, as in grid.json)");
}

void StampCellParams(const Grid& grid, nlohmann::json& params) {
  params["kind"] = grid.kind;
  params["version"] = grid.version;
  for (const auto& [name, input] : grid.inputs.items()) params[name + "_sha256"] = input.at("sha256");
}

void AddGridEntry(Grid& grid, nlohmann::json row, GridCell cell) {
  StampCellParams(grid, cell.params);
  const std::string key = CellKey(cell.params);
  grid.cells.try_emplace(key, std::move(cell));
  grid.entries.push_back({std::move(row), key});
}

GridField GridField::Child(std::string_view name) const {
  return {file, path.empty() ? std::string(name) : path + "." + std::string(name)};
}

void GridField::Fail(const std::string& value, std::string_view rule) const {
  ThrowError(kOp, "file", FormatValue(file), path + " = " + value + ": " + std::string(rule));
}

void GridField::FailWith(std::string_view error) const {
  ThrowError(kOp, "file", FormatValue(file), path + ": " + std::string(error));
}

namespace {

// The member `name` of `object`, or a failure naming it.
const nlohmann::json& Member(const GridField& at, const nlohmann::json& object, std::string_view name) {
  if (!object.is_object()) at.Fail(EscapeControlBytes(object.dump().substr(0, 80)), "must be a JSON object");
  const auto it = object.find(std::string(name));
  if (it == object.end()) at.Child(name).Fail("missing", "is required");
  return *it;
}

// The value as a message prints it (at most 80 characters of its JSON).
std::string Shown(const nlohmann::json& value) {
  std::string text = value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > 80) text = text.substr(0, 80) + "…";
  return EscapeControlBytes(text);
}

std::int64_t AsInt(const GridField& at, const nlohmann::json& v) {
  if (v.is_number_integer() &&
      (!v.is_number_unsigned() || v.get<std::uint64_t>() <= static_cast<std::uint64_t>(INT64_MAX))) {
    return v.get<std::int64_t>();
  }
  at.Fail(Shown(v), "must be an integer (a signed 64-bit one)");
}

double AsNumber(const GridField& at, const nlohmann::json& v) {
  if (v.is_number() && std::isfinite(v.get<double>())) return v.get<double>();
  at.Fail(Shown(v), "must be a finite number");
}

std::string AsString(const GridField& at, const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  at.Fail(Shown(v), "must be a string");
}

template <class T, class Convert>
std::vector<T> List(const GridField& at, const nlohmann::json& v, Convert convert) {
  if (!v.is_array()) at.Fail(Shown(v), "must be a list");
  std::vector<T> out;
  out.reserve(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out.push_back(convert(at.Child(std::to_string(i)), v[i]));
  return out;
}

// A member holding losses (natural-log nats): "loss", "nll", "final_loss",
// "position_nll", "loss_past_train", ...
bool IsLossName(std::string_view name) {
  const auto word = [&](std::string_view w) {
    return name == w || (name.size() > w.size() && (name.substr(name.size() - w.size() - 1) == "_" + std::string(w) ||
                                                    name.substr(0, w.size() + 1) == std::string(w) + "_"));
  };
  return word("loss") || word("nll");
}

// The most a loss in a cell may be. posenc refuses logits of magnitude 2^16
// or more (DecoderModel::Forward, the tiny models' evaluation), so a loss it
// computes is below 2^17 + ln(vocabulary): anything past 2^18 was not
// computed by posenc.
constexpr double kMaxCellLoss = 262144.0;

// "" when `value` (under a loss's name: a number, null for "no rows", or a
// list or object of them) holds only losses posenc could have computed;
// else where and why not.
// `path` and a member's name: "result.position_nll" and "0".
std::string PathOf(const std::string& path, const std::string& name) {
  std::string at = path;
  at += '.';
  at += name;
  return at;
}

std::string BadLoss(const nlohmann::json& value, const std::string& path) {
  if (value.is_null()) return "";
  if (value.is_number()) {
    const double loss = value.get<double>();
    if (std::isfinite(loss) && loss >= 0 && loss <= kMaxCellLoss) return "";
    return path + " = " + Shown(value) + ": a loss must be a finite number in [0, 2^18] nats";
  }
  if (value.is_array() || value.is_object()) {
    for (const auto& [name, item] : value.items()) {
      if (std::string why = BadLoss(item, PathOf(path, name)); !why.empty()) return why;
    }
    return "";
  }
  return path + " = " + Shown(value) + ": a loss must be a number";
}

// The same for every loss anywhere in a cell's result.
std::string BadLosses(const nlohmann::json& value, const std::string& path) {
  if (!value.is_array() && !value.is_object()) return "";
  for (const auto& [name, item] : value.items()) {
    const std::string at = PathOf(path, name);
    if (std::string why = value.is_object() && IsLossName(name) ? BadLoss(item, at) : BadLosses(item, at); !why.empty())
      return why;
  }
  return "";
}

// Why a cell file that parsed is not a cell of its key the merge can read,
// or "": its parameters must hash to its key (an edited cell would answer
// another question), its losses must be losses, and the kind must read its
// result (its summary line reads what the merge does), so that `grid
// status` never counts as finished a cell the merge refuses.
std::string BadCell(const Grid& grid, const std::string& key, const nlohmann::json& cell) {
  if (CellKey(cell.at("params")) != key) {
    return "its params hash to " + CellKey(cell.at("params")) + ", not to its key (edited?)";
  }
  const nlohmann::json& result = cell.at("result");
  if (std::string why = BadLosses(result, "result"); !why.empty()) return why;
  try {
    FindGridKind(grid.kind).summary(result);
  } catch (const nlohmann::json::exception& e) {
    return std::string("its result is not a ") + grid.kind + " cell's: " + e.what();
  } catch (const Error& e) {
    return std::string("its result is not a ") + grid.kind + " cell's: " + e.what();
  }
  return "";
}

}  // namespace

const nlohmann::json& GridField::Object(const nlohmann::json& object, std::string_view name) const {
  const nlohmann::json& v = Member(*this, object, name);
  if (!v.is_object()) Child(name).Fail(Shown(v), "must be a JSON object");
  return v;
}

const nlohmann::json& GridField::Array(const nlohmann::json& object, std::string_view name) const {
  const nlohmann::json& v = Member(*this, object, name);
  if (!v.is_array()) Child(name).Fail(Shown(v), "must be a list");
  return v;
}

std::string GridField::String(const nlohmann::json& object, std::string_view name) const {
  return AsString(Child(name), Member(*this, object, name));
}

std::int64_t GridField::Int(const nlohmann::json& object, std::string_view name) const {
  return AsInt(Child(name), Member(*this, object, name));
}

double GridField::Number(const nlohmann::json& object, std::string_view name) const {
  return AsNumber(Child(name), Member(*this, object, name));
}

bool GridField::Bool(const nlohmann::json& object, std::string_view name) const {
  const nlohmann::json& v = Member(*this, object, name);
  if (!v.is_boolean()) Child(name).Fail(Shown(v), "must be true or false");
  return v.get<bool>();
}

std::vector<std::int64_t> GridField::Ints(const nlohmann::json& object, std::string_view name) const {
  return List<std::int64_t>(Child(name), Member(*this, object, name), AsInt);
}

std::vector<double> GridField::Numbers(const nlohmann::json& object, std::string_view name) const {
  return List<double>(Child(name), Member(*this, object, name), AsNumber);
}

std::vector<std::string> GridField::Strings(const nlohmann::json& object, std::string_view name) const {
  return List<std::string>(Child(name), Member(*this, object, name), AsString);
}

std::string CellPath(const std::string& dir, const std::string& key) { return dir + "/cells/" + key + ".json"; }
std::string CellLogPath(const std::string& dir, const std::string& key) { return dir + "/logs/" + key + ".log"; }

void WriteGrid(const std::string& dir, const Grid& grid) {
  Require(!grid.entries.empty(), kOp, "cells", 0, "the grid is empty: give at least one method, length and depth");
  std::error_code ec;
  if (std::filesystem::exists(std::filesystem::symlink_status(GridPath(dir), ec))) {
    const std::optional<nlohmann::json> old = ReadJsonFile("grid.json", GridPath(dir));
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
  const std::string path = GridPath(dir);
  std::error_code ec;
  Require(std::filesystem::exists(std::filesystem::symlink_status(path, ec)), kOp, "dir", dir,
          "has no grid.json (run posenc study, passkey, zoo or tasks with --out DIR first)");
  const std::optional<nlohmann::json> json = ReadJsonFile("grid.json", path);
  const GridField top{.file = path, .path = ""};
  if (!json) top.Fail("(not JSON)", "must be a grid written by posenc (it is cut short or not JSON)");
  Grid grid;
  const std::int64_t format = top.Int(*json, "posenc_grid");
  if (format != kGridFormat) {
    top.Child("posenc_grid")
        .Fail(std::to_string(format),
              "is a grid format this posenc does not read (it reads " + std::to_string(kGridFormat) + ")");
  }
  grid.kind = top.String(*json, "kind");
  top.Child("kind").Check([&] { FindGridKind(grid.kind); });
  grid.version = top.String(*json, "version");
  grid.inputs = top.Object(*json, "inputs");
  for (const auto& [name, input] : grid.inputs.items()) {
    const GridField at = top.Child("inputs").Child(name);
    at.String(input, "path");
    const std::string digest = at.String(input, "sha256");
    if (!IsLowerHex(digest, 64))
      at.Child("sha256").Fail(FormatValue(digest), "must be a SHA-256 (64 lower-case hex digits)");
  }
  grid.settings = top.Object(*json, "settings");
  for (const auto& [key, cell] : top.Object(*json, "cells").items()) {
    const GridField at = top.Child("cells").Child(key);
    if (!IsCellKey(key)) at.Fail(FormatValue(key), "must be a cell key (24 lower-case hex digits)");
    GridCell parsed{.params = at.Object(cell, "params"),
                    .label = at.String(cell, "label"),
                    .flops = at.Number(cell, "flops"),
                    .memory_bytes = at.Number(cell, "memory_bytes")};
    if (parsed.flops < 0) at.Child("flops").Fail(FormatValue(parsed.flops), "must be >= 0");
    if (parsed.memory_bytes < 0) at.Child("memory_bytes").Fail(FormatValue(parsed.memory_bytes), "must be >= 0");
    grid.cells.emplace(key, std::move(parsed));
  }
  const nlohmann::json& entries = top.Array(*json, "entries");
  if (entries.empty()) top.Child("entries").Fail("[]", "must list at least one entry (a grid plans one or more)");
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const GridField at = top.Child("entries").Child(std::to_string(i));
    nlohmann::json row = entries[i];
    std::string key = at.String(row, "cell");
    if (!grid.cells.contains(key)) at.Child("cell").Fail(FormatValue(key), "must be a key of `cells`");
    row.erase("cell");
    grid.entries.push_back({std::move(row), std::move(key)});
  }
  FindGridKind(grid.kind).check(grid, top);
  return grid;
}

GridScan ScanGrid(const std::string& dir, const Grid& grid) {
  GridScan scan;
  std::error_code ec;
  for (const auto& file : std::filesystem::directory_iterator(dir + "/cells", ec)) {
    const std::string path = file.path().string();
    if (file.path().extension() != ".json") continue;  // a writer's temporary
    const std::string key = file.path().stem().string();
    if (!IsCellKey(key)) {
      scan.strays.push_back(path + ": not named KEY.json (ignored)");
      continue;
    }
    std::optional<nlohmann::json> cell;
    try {
      cell = ReadJsonFile("cell", path);
    } catch (const Error& e) {
      scan.unreadable.push_back(path + ": " + e.what());
      continue;
    }
    const bool whole = cell && cell->is_object() && cell->contains("params") && cell->at("params").is_object() &&
                       cell->contains("result") && cell->at("result").is_object() &&
                       cell->at("result").contains("seconds") && cell->at("result").at("seconds").is_number() &&
                       cell->value("key", std::string()) == key;
    if (!whole) {
      scan.unreadable.push_back(path + ": cut short or not a cell");
      continue;
    }
    const nlohmann::json& params = cell->at("params");
    const auto text_of = [&](const std::string& name) {
      const auto it = params.find(name);
      return it != params.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    const std::string why =
        StampMismatch(grid, text_of("version"), [&](const std::string& name) { return text_of(name + "_sha256"); });
    if (!why.empty()) {
      std::string note = path;
      note += ": computed by ";
      note += why;
      scan.foreign.push_back(std::move(note));
    } else if (const std::string bad = BadCell(grid, key, *cell); !bad.empty()) {
      std::string note = path;
      note += ": ";
      note += bad;
      scan.unreadable.push_back(std::move(note));
    } else if (grid.cells.contains(key)) {
      scan.finished[key] = cell->at("result");
      // The cell's compute time (WriteCellResult) times its threads: what
      // `grid status` turns into a rate per core.
      const auto number = [&](const char* name, double otherwise) {
        const auto it = cell->find(name);
        return it != cell->end() && it->is_number() ? it->get<double>() : otherwise;
      };
      scan.finished_core_seconds += number("seconds", 0) * std::max(1.0, number("threads", 1));
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
