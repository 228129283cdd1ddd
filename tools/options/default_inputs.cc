#include "options/default_inputs.h"

#include <filesystem>
#include <optional>
#include <system_error>

#include "posenc/error.h"

namespace posenc::cli {
namespace {

namespace fs = std::filesystem;

// The source tree the running tool sits in (it is built at
// <tree>/build/<preset>/tools/posenc), recognized by its fetch script.
std::optional<fs::path> SourceTreeOfTool() {
  std::error_code error;
  const fs::path tool = fs::read_symlink("/proc/self/exe", error);
  if (error) return std::nullopt;
  for (fs::path dir = tool.parent_path(); !dir.empty(); dir = dir.parent_path()) {
    if (fs::is_regular_file(dir / "scripts" / "fetch-model", error)) return dir;
    if (dir == dir.root_path()) break;
  }
  return std::nullopt;
}

}  // namespace

std::string ResolveInput(std::string_view op, std::string_view option, const std::string& path,
                         const DefaultInput& default_input) {
  if (path != default_input.path) return path;
  std::error_code error;
  if (fs::exists(path, error)) return path;
  const std::optional<fs::path> tree = SourceTreeOfTool();
  if (tree && fs::exists(*tree / path, error)) return (*tree / path).string();
  const std::string where =
      "not in the current directory" + (tree ? " nor in the tool's source tree " + tree->string() : "");
  ThrowError(op, option, FormatValue(path),
             where + "; run " + std::string(default_input.fetch_script) + " in the source tree, or pass " +
                 std::string(option) + " FILE");
}

}  // namespace posenc::cli
