// The study grid kind: one cell is one method at one length (the loss of
// every token position over the windows), computed by EvaluatePerplexity;
// the merge is study_report's table, JSON and picture.
#include <cstdio>

#include "grid/grid_kind.h"
#include "posenc/context_extension.h"
#include "posenc/perplexity.h"
#include "reports/study_report.h"

namespace posenc::cli {
namespace {

nlohmann::json ComputeLengthAndMethod(const Grid& grid, const GridCell& cell) {
  const nlohmann::json& p = cell.params;
  const LoadedModel loaded = LoadGridModel(grid);
  const std::vector<std::int32_t> tokens = TokenizeGridText(grid, loaded.tokenizer);
  const PerplexityOptions options{.context = p.at("length").get<std::int64_t>(),
                                  .extension = ParseContextExtension(p.at("method").get<std::string>()),
                                  .max_windows = p.at("windows").get<std::int64_t>()};
  const PerplexityResult r = EvaluatePerplexity(loaded.model, tokens, options);
  return {{"position_nll", r.position_nll}, {"seconds", r.seconds}, {"tokens_per_s", r.tokens_per_s}};
}

std::string Summary(const nlohmann::json& r) {
  const auto nll = r.at("position_nll").get<std::vector<double>>();
  double sum = 0;
  for (const double x : nll) sum += x;
  char line[96];
  std::snprintf(line, sizeof line, "ppl %.2f, %.0f tokens/s", std::exp(sum / static_cast<double>(nll.size())),
                r.at("tokens_per_s").get<double>());
  return line;
}

GridReport Merge(const Grid& grid, const std::map<std::string, nlohmann::json>& results, const std::string& dir) {
  const nlohmann::json& s = grid.settings;
  StudyReport report{.model = s.at("model").get<std::string>(),
                     .text = s.at("text").get<std::string>(),
                     .text_tokens = s.at("text_tokens").get<std::int64_t>(),
                     .train_length = s.at("train_length").get<std::int64_t>(),
                     .windows = s.at("windows").get<std::int64_t>(),
                     .bucket = s.at("bucket").get<std::int64_t>(),
                     .methods = s.at("methods").get<std::vector<std::string>>(),
                     .lengths = s.at("lengths").get<std::vector<std::int64_t>>()};
  for (const GridEntry& entry : grid.entries) {
    const nlohmann::json& result = results.at(entry.key);
    const auto method = entry.row.at("method").get<std::string>();
    report.cells.push_back({.method = method,
                            .resolved = entry.row.at("resolved").get<std::string>(),
                            .length = entry.row.at("length").get<std::int64_t>(),
                            .same_as_none = entry.row.at("same_as_none").get<bool>() && method != "none",
                            .seconds = result.at("seconds").get<double>(),
                            .tokens_per_s = result.at("tokens_per_s").get<double>(),
                            .position_nll = result.at("position_nll").get<std::vector<double>>()});
  }
  report.seconds = TotalCellSeconds(results);
  return WriteGridReport(grid, report.seconds, dir, "study", "results", StudyMarkdown(report), StudyJson(report),
                         [&](const std::string& png, OutputFiles& files) { DrawStudyPlot(report, png, files); });
}

}  // namespace

const GridKind& StudyGridKind() {
  static const GridKind kind{.name = "study", .compute = ComputeLengthAndMethod, .summary = Summary, .merge = Merge};
  return kind;
}

}  // namespace posenc::cli
