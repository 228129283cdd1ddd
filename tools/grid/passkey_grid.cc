// The passkey grid kind: one cell is one trial (a method at a length, the
// key at a depth in a filler), computed by ScorePasskey; the merge is
// passkey_report's table, comparisons, JSON and picture.
#include <cstdio>

#include "grid/file_digest.h"
#include "grid/grid_kind.h"
#include "reports/passkey_report.h"
#include "posenc/context_extension.h"
#include "posenc/error.h"
#include "posenc/passkey.h"
#include "grid/passkey_grid.h"

namespace posenc::cli {

constexpr const char* kOp = "passkey";
constexpr std::int64_t kMaxTrials = 1000;

void CheckPasskeyLength(std::int64_t length) {
  Require(length >= 1 && length <= (std::int64_t{1} << 24), kOp, "--lengths", length, "must be in [1, 2^24]");
}

void CheckPasskeyDepth(double depth) {
  Require(depth >= 0 && depth <= 1, kOp, "--depths", depth, "must be in [0, 1] (the share of filler before the key)");
}

void CheckPasskeySeed(std::int64_t seed) { Require(seed >= 0, kOp, "--seed", seed, "must be >= 0"); }

void CheckPasskeyTrials(std::int64_t trials) {
  Require(trials >= 1 && trials <= kMaxTrials, kOp, "--trials", trials, "must be in [1, 1000]");
}

void CheckPasskeyTrial(std::int64_t trial) {
  Require(trial >= 0 && trial < kMaxTrials, kOp, "trial", trial, "must be in [0, 999] (--trials is at most 1000)");
}

void CheckPasskeyMaxNewTokens(std::int64_t max_new_tokens) {
  Require(max_new_tokens >= 1 && max_new_tokens <= 256, kOp, "--max-new-tokens", max_new_tokens, "must be in [1, 256]");
}

void CheckPasskeyDesign(const std::string& design) {
  Require(design == kPasskeyIndependent, kOp, "design", design,
          std::string("must be \"") + kPasskeyIndependent + "\" (or absent: the fixed-depth design)");
}

void CheckPasskeyDrawnDepth(std::int64_t seed, std::int64_t trial, double depth) {
  const double drawn = DrawPasskeyTrial(static_cast<std::uint64_t>(seed), trial).depth;
  Require(depth == drawn, kOp, "depth", depth,
          "must be the depth drawn for trial " + std::to_string(trial) + " from seed " + std::to_string(seed) + " (" +
              FormatValue(drawn) + ")");
}

namespace {

// What a trial is computed from (and a report row is keyed by), each value
// checked as its flag is.
struct TrialParams {
  std::string method;  // the method's text, parsed by ReadTrialParams
  std::int64_t length = 0;
  double depth = 0;
  std::int64_t trial = 0;
};

TrialParams ReadTrialParams(const GridField& at, const nlohmann::json& p) {
  TrialParams t{.method = at.String(p, "method"),
                .length = at.Int(p, "length"),
                .depth = at.Number(p, "depth"),
                .trial = at.Int(p, "trial")};
  at.Child("method").Check([&] { ParseContextExtension(t.method); });
  at.Child("length").Check([&] { CheckPasskeyLength(t.length); });
  at.Child("depth").Check([&] { CheckPasskeyDepth(t.depth); });
  at.Child("trial").Check([&] { CheckPasskeyTrial(t.trial); });
  return t;
}

std::uint64_t ReadSeed(const GridField& at, const nlohmann::json& object) {
  const std::int64_t seed = at.Int(object, "seed");
  at.Child("seed").Check([&] { CheckPasskeySeed(seed); });
  return static_cast<std::uint64_t>(seed);
}

// Whether `object` (settings or a cell's params) is of the independent
// design; absent is the fixed-depth design, whose cells never had the field.
bool ReadIndependent(const GridField& at, const nlohmann::json& object) {
  if (!object.contains("design")) return false;
  const std::string design = at.String(object, "design");
  at.Child("design").Check([&] { CheckPasskeyDesign(design); });
  return true;
}

// An independent trial's depth must be its draw: the report pairs trials by
// index, and a depth edited in grid.json would describe another trial.
void CheckDrawnDepth(const GridField& at, std::uint64_t seed, const TrialParams& t) {
  at.Child("depth").Check([&] { CheckPasskeyDrawnDepth(static_cast<std::int64_t>(seed), t.trial, t.depth); });
}

std::int64_t ReadMaxNewTokens(const GridField& at, const nlohmann::json& object) {
  const std::int64_t max_new_tokens = at.Int(object, "max_new_tokens");
  at.Child("max_new_tokens").Check([&] { CheckPasskeyMaxNewTokens(max_new_tokens); });
  return max_new_tokens;
}

PasskeyReport ReadSettings(const GridField& at, const nlohmann::json& s) {
  PasskeyReport report{.model = at.String(s, "model"),
                       .train_length = at.Int(s, "train_length"),
                       .seed = ReadSeed(at, s),
                       .max_new_tokens = ReadMaxNewTokens(at, s),
                       .independent = ReadIndependent(at, s),
                       .methods = at.Strings(s, "methods"),
                       .lengths = at.Ints(s, "lengths"),
                       .trials = at.Int(s, "trials")};
  // An independent grid's depths are drawn per trial, not listed.
  if (!report.independent) report.depths = at.Numbers(s, "depths");
  for (std::size_t i = 0; i < report.lengths.size(); ++i) {
    at.Child("lengths").Child(std::to_string(i)).Check([&] { CheckPasskeyLength(report.lengths[i]); });
  }
  for (std::size_t i = 0; i < report.depths.size(); ++i) {
    at.Child("depths").Child(std::to_string(i)).Check([&] { CheckPasskeyDepth(report.depths[i]); });
  }
  at.Child("trials").Check([&] { CheckPasskeyTrials(report.trials); });
  return report;
}

void Check(const Grid& grid, const GridField& file) {
  const PasskeyReport settings = ReadSettings(file.Child("settings"), grid.settings);
  for (const auto& [key, cell] : grid.cells) {
    const GridField at = file.Child("cells").Child(key).Child("params");
    const TrialParams t = ReadTrialParams(at, cell.params);
    const std::uint64_t seed = ReadSeed(at, cell.params);
    ReadMaxNewTokens(at, cell.params);
    if (ReadIndependent(at, cell.params) != settings.independent) {
      at.Fail(cell.params.value("design", std::string("(absent)")), "must be the design of the grid's settings");
    }
    if (settings.independent) CheckDrawnDepth(at, seed, t);
  }
  for (std::size_t i = 0; i < grid.entries.size(); ++i) {
    const GridField at = file.Child("entries").Child(std::to_string(i));
    const nlohmann::json& row = grid.entries[i].row;
    const TrialParams t = ReadTrialParams(at, row);
    at.String(row, "resolved");
    at.Bool(row, "same_as_none");
    if (settings.independent) CheckDrawnDepth(at, settings.seed, t);
  }
}

// The SHA-256 of the prompt's token ids, each as 4 little-endian bytes.
std::string PromptDigest(const std::vector<std::int32_t>& tokens) {
  std::string bytes;
  bytes.reserve(tokens.size() * 4);
  for (const std::int32_t token : tokens) {
    for (int b = 0; b < 4; ++b) bytes += static_cast<char>((static_cast<std::uint32_t>(token) >> (8 * b)) & 0xFFu);
  }
  return Sha256Hex(bytes);
}

nlohmann::json ComputeTrial(const Grid& grid, const GridCell& cell) {
  // ReadGrid checked the parameters (Check): read again, they cannot fail.
  const GridField at{.file = "grid.json", .path = "params"};
  const TrialParams t = ReadTrialParams(at, cell.params);
  const std::int64_t length = t.length, trial = t.trial, max_new_tokens = ReadMaxNewTokens(at, cell.params);
  const LoadedModel loaded = LoadGridModel(grid);
  const DecoderHyperparams& hp = loaded.model.hparams();
  const ExtensionPlan plan = PlanModelExtension(ParseContextExtension(t.method), hp, length);
  const std::uint64_t seed = ReadSeed(at, cell.params);
  const bool independent = ReadIndependent(at, cell.params);
  const PasskeyPrompt prompt =
      independent ? MakePasskeyPrompt(loaded.tokenizer, length, DrawPasskeyTrial(seed, trial), max_new_tokens)
                  : MakePasskeyPrompt(loaded.tokenizer, length, t.depth, PasskeyKey(seed, trial), max_new_tokens);
  const PasskeyScore score = ScorePasskey(loaded.model, loaded.tokenizer, prompt, plan.attention, max_new_tokens);
  nlohmann::json result{{"key", prompt.key},
                        {"prompt_tokens", static_cast<std::int64_t>(prompt.prompt.size())},
                        {"found", score.generated_has_key},
                        {"exact", score.answer_exact},
                        {"answer_nll", score.answer_nll},
                        {"generated", score.generated},
                        {"seconds", score.seconds}};
  // What the report pairs by: every method's trial must be the same prompt
  // (the fixed-depth cells of the first grids predate it).
  if (independent) result["prompt_sha256"] = PromptDigest(prompt.prompt);
  return result;
}

std::string Summary(const nlohmann::json& r) {
  char line[128];
  std::snprintf(line, sizeof line, "%s%s, answer NLL %.3f", r.at("found").get<bool>() ? "found" : "not found",
                r.at("exact").get<bool>() ? ", exact" : "", r.at("answer_nll").get<double>());
  return line + std::string(": \"") + EscapeControlBytes(r.at("generated").get<std::string>()) + "\"";
}

GridReport Merge(const Grid& grid, const std::map<std::string, nlohmann::json>& results, const std::string& dir) {
  PasskeyReport report = ReadSettings({.file = "grid.json", .path = "settings"}, grid.settings);
  for (const GridEntry& entry : grid.entries) {
    nlohmann::json cell = entry.row;
    cell.update(results.at(entry.key));
    report.cells.push_back(PasskeyCellFromJson(cell));
  }
  report.seconds = TotalCellSeconds(results);
  return WriteGridReport(grid, report.seconds, dir, "passkey", "trials", PasskeyMarkdown(report), PasskeyJson(report),
                         [&](const std::string& png, OutputFiles& files) { DrawPasskeyPicture(report, png, files); });
}

}  // namespace

const GridKind& PasskeyGridKind() {
  static const GridKind kind{
      .name = "passkey", .check = Check, .compute = ComputeTrial, .summary = Summary, .merge = Merge};
  return kind;
}

}  // namespace posenc::cli
