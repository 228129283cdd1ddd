// posenc table show FILE [--tensor NAME] [--row-offset R]
//                   [--out-of-range error|clamp|hierarchical] [--alpha A]
//                   [--positions P,Q,...] [--json]
//
// Loads a learned position table (.npy, .safetensors or .gguf) with the strict
// readers, prints its size and source dtype, and the encodings of the given
// positions under the policy. A malformed file exits with status 2 and a
// message naming what is wrong.
#include <cstdio>
#include <iostream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "posenc/error.h"
#include "posenc/learned_table.h"

namespace posenc::cli {
namespace {

using Json = nlohmann::ordered_json;

struct TableOptions {
  std::string path;
  std::string tensor;
  std::int64_t row_offset = 0;
  std::string out_of_range = "error";
  double alpha = 0.4;
  std::vector<std::int64_t> positions;
  bool json = false;
};

void Run(const TableOptions& o) {
  const LearnedTable table = LearnedTable::Load(o.path, o.tensor);
  const LearnedTableSpec spec{
      .row_offset = o.row_offset, .out_of_range = ParseOutOfRangePolicy(o.out_of_range), .alpha = o.alpha};
  spec.Validate();
  const std::int64_t capacity = table.Capacity(spec);
  const bool unbounded = capacity == std::numeric_limits<std::int64_t>::max();
  std::vector<std::vector<float>> rows;
  for (const std::int64_t p : o.positions) rows.push_back(table.Lookup(spec, p));
  if (o.json) {
    Json j = {{"rows", table.rows()}, {"dim", table.dim()}, {"dtype", table.source_dtype()}};
    j["capacity"] = unbounded ? Json(nullptr) : Json(capacity);
    if (!o.positions.empty()) {
      j["positions"] = o.positions;
      j["encodings"] = rows;
    }
    std::cout << j.dump() << "\n";
    return;
  }
  std::printf("%s: %lld rows x %lld dims (%s); row_offset %lld, out_of_range %s: positions 0..%s\n", o.path.c_str(),
              static_cast<long long>(table.rows()), static_cast<long long>(table.dim()), table.source_dtype().c_str(),
              static_cast<long long>(o.row_offset), o.out_of_range.c_str(),
              unbounded ? "any" : std::to_string(capacity - 1).c_str());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    std::printf("%8lld:", static_cast<long long>(o.positions[i]));
    for (const float v : rows[i]) std::printf(" %10.6f", v);
    std::printf("\n");
  }
}

}  // namespace

void AddTableCommands(CLI::App& app) {
  CLI::App* table = app.add_subcommand("table", "Learned absolute position tables (.npy, .safetensors)");
  table->require_subcommand(1);
  auto options = std::make_shared<TableOptions>();
  CLI::App* show = table->add_subcommand("show", "Load a table and print its size and chosen positions");
  show->add_option("file", options->path, "A .npy, .safetensors or .gguf file")->required();
  show->add_option("--tensor", options->tensor, "safetensors entry (default: the only one)");
  show->add_option("--row-offset", options->row_offset, "Rows before position 0 (OPT/BART: 2)");
  show->add_option("--out-of-range", options->out_of_range, "error, clamp or hierarchical")->capture_default_str();
  show->add_option("--alpha", options->alpha, "Hierarchical decomposition alpha (default 0.4)");
  show->add_option("--positions", options->positions, "Positions to print")->delimiter(',');
  show->add_flag("--json", options->json, "Print JSON");
  show->callback([options] { Run(*options); });
}

}  // namespace posenc::cli
