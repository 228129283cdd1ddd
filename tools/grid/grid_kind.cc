#include "grid/grid_kind.h"

#include <cstdio>

#include "grid/file_digest.h"
#include "posenc/error.h"

namespace posenc::cli {
namespace {

constexpr const char* kOp = "grid";

}  // namespace

std::string CheckedGridInput(const Grid& grid, const char* name) {
  Require(grid.inputs.contains(name), kOp, std::string("inputs.") + name, Verbatim{"missing"},
          "a " + grid.kind + " grid's cells are computed from it (grid.json was edited?)");
  const nlohmann::json& input = grid.inputs.at(name);
  std::string path = input.at("path").get<std::string>();
  const std::string planned = input.at("sha256").get<std::string>();
  const std::string now = FileSha256(kOp, path);
  Require(now == planned, kOp, name, path,
          "has changed since the grid was planned (SHA-256 " + now.substr(0, 12) + "…, planned " +
              planned.substr(0, 12) + "…): plan the grid again, into another directory");
  return path;
}

double TotalCellSeconds(const std::map<std::string, nlohmann::json>& results) {
  double seconds = 0;
  for (const auto& [key, result] : results) seconds += result.at("seconds").get<double>();
  return seconds;
}

GridReport WriteGridReport(const Grid& grid, double seconds, const std::string& dir, const std::string& name,
                           const std::string& noun, std::string markdown, std::string json,
                           const std::function<void(const std::string& png, OutputFiles& files)>& draw) {
  GridReport out{.markdown = std::move(markdown),
                 .json = std::move(json),
                 .files = {dir + "/" + name + ".md", dir + "/" + name + ".json", dir + "/" + name + ".png"}};
  char summary[200];
  std::snprintf(summary, sizeof summary, "%s: %zu %s, %zu cells, %.0f s (%.1f min) of compute", name.c_str(),
                grid.entries.size(), noun.c_str(), grid.cells.size(), seconds, seconds / 60);
  out.summary = summary;
  OutputFiles files(name);
  files.Write(out.files[0], out.markdown);
  files.Write(out.files[1], out.json);
  draw(out.files[2], files);
  files.Commit();
  return out;
}

const GridKind& FindGridKind(const std::string& name) {
  for (const GridKind* kind : {&StudyGridKind(), &PasskeyGridKind(), &ZooGridKind(), &TasksGridKind()}) {
    if (name == kind->name) return *kind;
  }
  ThrowError(kOp, "kind", FormatValue(name), "is not a grid kind (study, passkey, zoo, tasks)");
}

LoadedModel LoadGridModel(const Grid& grid) { return LoadModel(CheckedGridInput(grid, "model")); }

std::vector<std::int32_t> TokenizeGridText(const Grid& grid, const BpeTokenizer& tokenizer) {
  return TokenizeFile(tokenizer, CheckedGridInput(grid, "text"));
}

nlohmann::json GridInput(const std::string& op, const std::string& path) {
  return {{"path", path}, {"sha256", FileSha256(op, path)}};
}

}  // namespace posenc::cli
