// The study grid kind: one cell is one method at one length (the loss of
// every token position over the windows), computed by EvaluatePerplexity;
// the merge is study_report's table, JSON and picture.
#include <cstdio>

#include "grid/grid_kind.h"
#include "options/progress_bar.h"
#include "posenc/context_extension.h"
#include "posenc/error.h"
#include "posenc/perplexity.h"
#include "reports/study_report.h"
#include "grid/study_grid.h"

namespace posenc::cli {

constexpr const char* kOp = "study";

void CheckStudyLength(std::int64_t length) {
  Require(length >= 2 && length <= (std::int64_t{1} << 24), kOp, "--lengths", length,
          "must be in [2, 2^24] (tokens a window; one token predicts nothing)");
}

void CheckStudyWindows(std::int64_t windows) {
  Require(windows >= 1 && windows <= 1000, kOp, "--windows", windows, "must be in [1, 1000]");
}

void CheckStudyBucket(std::int64_t bucket) {
  Require(bucket >= 1 && bucket <= (1 << 20), kOp, "--bucket", bucket, "must be in [1, 2^20]");
}

namespace {

// A method's text, parsed as --methods parses it.
ContextExtension ReadMethod(const GridField& at, const nlohmann::json& object, const char* name) {
  const std::string text = at.String(object, name);
  ContextExtension method;
  at.Child(name).Check([&] { method = ParseContextExtension(text); });
  return method;
}

std::int64_t ReadLength(const GridField& at, const nlohmann::json& object) {
  const std::int64_t length = at.Int(object, "length");
  at.Child("length").Check([&] { CheckStudyLength(length); });
  return length;
}

// What a cell is computed from, each value checked as its flag is.
PerplexityOptions ReadCellParams(const GridField& at, const nlohmann::json& p) {
  PerplexityOptions options{
      .context = ReadLength(at, p), .extension = ReadMethod(at, p, "method"), .max_windows = at.Int(p, "windows")};
  at.Child("windows").Check([&] { CheckStudyWindows(options.max_windows); });
  return options;
}

// The report's settings, checked the same way; the cells come from the
// entries and the finished cells.
StudyReport ReadSettings(const GridField& at, const nlohmann::json& s) {
  StudyReport report{.model = at.String(s, "model"),
                     .text = at.String(s, "text"),
                     .text_tokens = at.Int(s, "text_tokens"),
                     .train_length = at.Int(s, "train_length"),
                     .windows = at.Int(s, "windows"),
                     .bucket = at.Int(s, "bucket"),
                     .methods = at.Strings(s, "methods"),
                     .lengths = at.Ints(s, "lengths")};
  at.Child("windows").Check([&] { CheckStudyWindows(report.windows); });
  at.Child("bucket").Check([&] { CheckStudyBucket(report.bucket); });
  for (std::size_t i = 0; i < report.lengths.size(); ++i) {
    at.Child("lengths").Child(std::to_string(i)).Check([&] { CheckStudyLength(report.lengths[i]); });
  }
  return report;
}

StudyCell ReadEntry(const GridField& at, const nlohmann::json& row) {
  return {.method = at.String(row, "method"),
          .resolved = at.String(row, "resolved"),
          .length = ReadLength(at, row),
          .same_as_none = at.Bool(row, "same_as_none")};
}

void Check(const Grid& grid, const GridField& file) {
  ReadSettings(file.Child("settings"), grid.settings);
  for (const auto& [key, cell] : grid.cells)
    ReadCellParams(file.Child("cells").Child(key).Child("params"), cell.params);
  for (std::size_t i = 0; i < grid.entries.size(); ++i) {
    ReadEntry(file.Child("entries").Child(std::to_string(i)), grid.entries[i].row);
  }
}

nlohmann::json ComputeLengthAndMethod(const Grid& grid, const GridCell& cell) {
  PerplexityOptions options = ReadCellParams({.file = "grid.json", .path = "params"}, cell.params);
  const LoadedModel loaded = LoadGridModel(grid);
  // A model trained with BOS first (Gemma) has it at the start of every window.
  if (loaded.tokenizer.add_bos()) options.bos = loaded.tokenizer.bos_id();
  const std::vector<std::int32_t> tokens = TokenizeGridText(grid, loaded.tokenizer);
  // The cell's log gets a line every half minute: a long cell (Gemma 3 at
  // 40,960 tokens: ten minutes on 2 cores) says how far it is.
  ProgressBar bar(cell.label, "tok");
  const PerplexityResult r = EvaluatePerplexity(
      loaded.model, tokens, options, [&](std::int64_t done, std::int64_t total) { bar.Update(done, total); });
  bar.Finish();
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
  // ReadGrid checked the settings and rows (Check): read again, they cannot fail.
  StudyReport report = ReadSettings({.file = "grid.json", .path = "settings"}, grid.settings);
  for (const GridEntry& entry : grid.entries) {
    const nlohmann::json& result = results.at(entry.key);
    StudyCell cell = ReadEntry({.file = "grid.json", .path = "entry"}, entry.row);
    cell.same_as_none = cell.same_as_none && cell.method != "none";
    cell.seconds = result.at("seconds").get<double>();
    cell.tokens_per_s = result.at("tokens_per_s").get<double>();
    cell.position_nll = result.at("position_nll").get<std::vector<double>>();
    report.cells.push_back(std::move(cell));
  }
  report.seconds = TotalCellSeconds(results);
  return WriteGridReport(grid, report.seconds, dir, "study", "results", StudyMarkdown(report), StudyJson(report),
                         [&](const std::string& png, OutputFiles& files) { DrawStudyPlot(report, png, files); });
}

}  // namespace

const GridKind& StudyGridKind() {
  static const GridKind kind{
      .name = "study", .check = Check, .compute = ComputeLengthAndMethod, .summary = Summary, .merge = Merge};
  return kind;
}

}  // namespace posenc::cli
