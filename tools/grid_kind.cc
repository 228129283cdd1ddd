#include "grid_kind.h"

#include "file_digest.h"
#include "posenc/error.h"

namespace posenc::cli {
namespace {

constexpr const char* kOp = "grid";

// The path of input `name`, after checking its digest.
std::string CheckedInput(const Grid& grid, const char* name) {
  const nlohmann::json& input = grid.inputs.at(name);
  std::string path = input.at("path").get<std::string>();
  const std::string planned = input.at("sha256").get<std::string>();
  const std::string now = FileSha256(kOp, path);
  Require(now == planned, kOp, name, path,
          "has changed since the grid was planned (SHA-256 " + now.substr(0, 12) + "…, planned " +
              planned.substr(0, 12) + "…): plan the grid again, into another directory");
  return path;
}

}  // namespace

const GridKind& FindGridKind(const std::string& name) {
  for (const GridKind* kind : {&StudyGridKind(), &PasskeyGridKind()}) {
    if (name == kind->name) return *kind;
  }
  ThrowError(kOp, "kind", FormatValue(name), "is not a grid kind (study, passkey)");
}

LoadedModel LoadGridModel(const Grid& grid) { return LoadModel(CheckedInput(grid, "model")); }

std::vector<std::int32_t> TokenizeGridText(const Grid& grid, const BpeTokenizer& tokenizer) {
  return TokenizeFile(tokenizer, CheckedInput(grid, "text"));
}

nlohmann::json GridInput(const std::string& op, const std::string& path) {
  return {{"path", path}, {"sha256", FileSha256(op, path)}};
}

}  // namespace posenc::cli
