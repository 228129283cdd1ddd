// The passkey grid kind: one cell is one trial (a method at a length, the
// key at a depth), computed by ScorePasskey; the merge is passkey_report's
// table, JSON and heat maps.
#include <cstdio>

#include "grid/grid_kind.h"
#include "reports/passkey_report.h"
#include "posenc/context_extension.h"
#include "posenc/error.h"
#include "posenc/passkey.h"

namespace posenc::cli {
namespace {

nlohmann::json ComputeTrial(const Grid& grid, const GridCell& cell) {
  const nlohmann::json& p = cell.params;
  const LoadedModel loaded = LoadGridModel(grid);
  const LlamaHyperparams& hp = loaded.model.hparams();
  const auto length = p.at("length").get<std::int64_t>();
  const auto trial = p.at("trial").get<std::int64_t>();
  const auto max_new_tokens = p.at("max_new_tokens").get<std::int64_t>();
  const ExtensionPlan plan = PlanContextExtension(ParseContextExtension(p.at("method").get<std::string>()), hp.rope,
                                                  hp.context_length, length);
  const std::string key = PasskeyKey(p.at("seed").get<std::uint64_t>(), trial);
  const PasskeyPrompt prompt =
      MakePasskeyPrompt(loaded.tokenizer, length, p.at("depth").get<double>(), key, max_new_tokens);
  const PasskeyScore score = ScorePasskey(loaded.model, loaded.tokenizer, prompt, plan.attention, max_new_tokens);
  return {{"key", key},
          {"prompt_tokens", static_cast<std::int64_t>(prompt.prompt.size())},
          {"found", score.generated_has_key},
          {"exact", score.answer_exact},
          {"answer_nll", score.answer_nll},
          {"generated", score.generated},
          {"seconds", score.seconds}};
}

std::string Summary(const nlohmann::json& r) {
  char line[128];
  std::snprintf(line, sizeof line, "%s%s, answer NLL %.3f", r.at("found").get<bool>() ? "found" : "not found",
                r.at("exact").get<bool>() ? ", exact" : "", r.at("answer_nll").get<double>());
  return line + std::string(": \"") + EscapeControlBytes(r.at("generated").get<std::string>()) + "\"";
}

GridReport Merge(const Grid& grid, const std::map<std::string, nlohmann::json>& results, const std::string& dir) {
  const nlohmann::json& s = grid.settings;
  PasskeyReport report{.model = s.at("model").get<std::string>(),
                       .train_length = s.at("train_length").get<std::int64_t>(),
                       .seed = s.at("seed").get<std::uint64_t>(),
                       .max_new_tokens = s.at("max_new_tokens").get<std::int64_t>(),
                       .methods = s.at("methods").get<std::vector<std::string>>(),
                       .lengths = s.at("lengths").get<std::vector<std::int64_t>>(),
                       .depths = s.at("depths").get<std::vector<double>>(),
                       .trials = s.at("trials").get<std::int64_t>()};
  for (const GridEntry& entry : grid.entries) {
    nlohmann::json cell = entry.row;
    cell.update(results.at(entry.key));
    report.cells.push_back(PasskeyCellFromJson(cell));
  }
  report.seconds = TotalCellSeconds(results);
  return WriteGridReport(grid, report.seconds, dir, "passkey", "trials", PasskeyMarkdown(report), PasskeyJson(report),
                         [&](const std::string& png, OutputFiles& files) { DrawPasskeyHeatmaps(report, png, files); });
}

}  // namespace

const GridKind& PasskeyGridKind() {
  static const GridKind kind{.name = "passkey", .compute = ComputeTrial, .summary = Summary, .merge = Merge};
  return kind;
}

}  // namespace posenc::cli
