// posenc sinusoidal --dim D --positions N [--start S] [--order interleaved|concat]
//                   [--spacing paper|endpoints] [--base B] [--json]
//
// The sinusoidal encodings of positions S..S+N-1 (float64): one row per
// position, {"table": [[...], ...]} with --json.
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.h"
#include "posenc/error.h"
#include "posenc/sinusoidal.h"

namespace posenc::cli {
namespace {

using Json = nlohmann::ordered_json;

struct SinusoidalOptions {
  std::int64_t dim = 0;
  std::int64_t positions = 0;
  std::int64_t start = 0;
  std::string order = "interleaved";
  std::string spacing = "paper";
  double base = 10000.0;
  bool json = false;
};

void Run(const SinusoidalOptions& o) {
  Require(o.positions >= 0, "sinusoidal", "--positions", o.positions, "must not be negative");
  Require(o.start >= 0, "sinusoidal", "--start", o.start, "must not be negative");
  const SinusoidalSpec spec{.dim = o.dim,
                            .base = o.base,
                            .order = ParseSinusoidalOrder(o.order),
                            .spacing = ParseSinusoidalSpacing(o.spacing)};
  const std::vector<double> flat = SinusoidalTable(spec, o.start, o.positions);
  if (o.json) {
    Json rows = Json::array();
    for (std::int64_t p = 0; p < o.positions; ++p) {
      rows.push_back(std::vector<double>(flat.begin() + p * o.dim, flat.begin() + (p + 1) * o.dim));
    }
    std::cout << Json{{"table", rows}}.dump() << "\n";
    return;
  }
  std::printf("Sinusoidal encodings: dim %lld, order %s, spacing %s, base %g; positions %lld..%lld\n",
              static_cast<long long>(o.dim), o.order.c_str(), o.spacing.c_str(), o.base,
              static_cast<long long>(o.start), static_cast<long long>(o.start + o.positions - 1));
  for (std::int64_t p = 0; p < o.positions; ++p) {
    std::printf("%8lld:", static_cast<long long>(o.start) + p);
    for (std::int64_t d = 0; d < o.dim; ++d) std::printf(" %10.6f", flat[p * o.dim + d]);
    std::printf("\n");
  }
}

}  // namespace

void AddSinusoidalCommands(CLI::App& app) {
  auto options = std::make_shared<SinusoidalOptions>();
  CLI::App* cmd = app.add_subcommand("sinusoidal", "Sinusoidal position encodings (Vaswani et al.) as a table");
  cmd->add_option("--dim", options->dim, "Encoding dimension (odd: the last element is 0)")->required();
  cmd->add_option("--positions", options->positions, "Number of positions")->required();
  cmd->add_option("--start", options->start, "First position (default 0)");
  cmd->add_option("--order", options->order, "interleaved [s0 c0 s1 c1 ...] (paper) or concat [s... | c...]");
  cmd->add_option("--spacing", options->spacing, "paper: base^(-2k/dim); endpoints: base^(-k/(P-1)) (fairseq)");
  cmd->add_option("--base", options->base, "Frequency base (default 10000)");
  cmd->add_flag("--json", options->json, "Print {\"table\": [[...] per position]}");
  cmd->callback([options] { Run(*options); });
}

}  // namespace posenc::cli
