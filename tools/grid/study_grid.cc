// The study grid kind: one cell is one window of one method at one length
// (its mean loss within and beyond the training length and per bucket of
// positions), computed by EvaluatePerplexity; the merge gathers each
// (method, length)'s windows into study_report's table, JSON and picture.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <span>

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

std::vector<StudyWindow> PlanStudyWindows(const std::vector<std::string>& texts,
                                          const std::vector<std::int64_t>& text_tokens, std::int64_t windows,
                                          std::int64_t length) {
  const auto documents = static_cast<std::int64_t>(texts.size());
  Require(windows >= documents, kOp, "--windows", windows,
          "must be at least the number of texts (" + std::to_string(documents) +
              "): windows are dealt round-robin over the texts, and a text no window reads would be listed for "
              "nothing");
  for (std::int64_t d = 0; d < documents; ++d) {
    const std::int64_t dealt = windows / documents + (d < windows % documents ? 1 : 0);
    const std::int64_t tokens = text_tokens[static_cast<std::size_t>(d)];
    Require(tokens >= dealt * length, kOp, "--text", texts[static_cast<std::size_t>(d)],
            "has " + std::to_string(tokens) + " tokens, fewer than the " + std::to_string(dealt) + " window(s) of " +
                std::to_string(length) + " tokens it is dealt (" + std::to_string(windows) +
                " windows round-robin over " + std::to_string(documents) +
                " text(s), never overlapping): give a longer text, more texts or fewer --windows");
  }
  std::vector<StudyWindow> out;
  out.reserve(static_cast<std::size_t>(windows));
  for (std::int64_t w = 0; w < windows; ++w) {
    const std::int64_t d = w % documents, k = w / documents;
    const std::int64_t dealt = windows / documents + (d < windows % documents ? 1 : 0);
    out.push_back({.document = d, .offset = k * (text_tokens[static_cast<std::size_t>(d)] / dealt)});
  }
  return out;
}

std::string StudyTextInput(std::size_t document) {
  return document == 0 ? std::string("text") : "text" + std::to_string(document + 1);
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

// Where a window lies, checked against the number of texts (the offset is
// checked against the text's tokens where they are known: the cell).
StudyWindow ReadWindow(const GridField& at, const nlohmann::json& object, std::size_t documents) {
  const StudyWindow window{.document = at.Int(object, "document"), .offset = at.Int(object, "offset")};
  at.Child("document").Check([&] {
    Require(window.document >= 0 && window.document < static_cast<std::int64_t>(documents), kOp, "document",
            window.document, "must name one of the grid's " + std::to_string(documents) + " text(s)");
  });
  at.Child("offset").Check([&] { Require(window.offset >= 0, kOp, "offset", window.offset, "must be >= 0"); });
  return window;
}

// What a cell is computed from, each value checked as its flag is: one
// window of one method at one length.
struct WindowParams {
  PerplexityOptions options;
  StudyWindow window;
  std::int64_t bucket = 0;
};
// The pass of a cell or of the settings: written only for the decode pass
// (older grids have none: one forward pass).
struct StudyPass {
  std::string pass = "prefill", cached_keys = "relowered";
};
StudyPass ReadPass(const GridField& at, const nlohmann::json& object) {
  StudyPass out;
  if (object.contains("pass")) out.pass = at.String(object, "pass");
  if (object.contains("cached_keys")) out.cached_keys = at.String(object, "cached_keys");
  if (out.pass != "prefill" && out.pass != "decode") at.Child("pass").Fail(out.pass, "must be prefill or decode");
  if (out.cached_keys != "relowered" && out.cached_keys != "as-written") {
    at.Child("cached_keys").Fail(out.cached_keys, "must be relowered or as-written");
  }
  if (out.cached_keys == "as-written" && out.pass != "decode") {
    at.Child("cached_keys").Fail(out.cached_keys, "needs the decode pass (keys kept by a cache)");
  }
  return out;
}

WindowParams ReadCellParams(const GridField& at, const nlohmann::json& p, std::size_t documents) {
  WindowParams params{
      .options = {.context = ReadLength(at, p), .extension = ReadMethod(at, p, "method"), .max_windows = 1},
      .window = ReadWindow(at, p, documents),
      .bucket = at.Int(p, "bucket")};
  at.Child("bucket").Check([&] { CheckStudyBucket(params.bucket); });
  const StudyPass pass = ReadPass(at, p);
  params.options.pass = pass.pass == "decode" ? PerplexityPass::kDecode : PerplexityPass::kPrefill;
  params.options.cached_keys = pass.cached_keys == "as-written" ? CachedKeys::kAsWritten : CachedKeys::kRelowered;
  return params;
}

// The report's settings, checked the same way; the cells come from the
// entries and the finished cells.
StudyReport ReadSettings(const GridField& at, const nlohmann::json& s) {
  StudyReport report{.model = at.String(s, "model"),
                     .texts = at.Strings(s, "texts"),
                     .text_tokens = at.Ints(s, "text_tokens"),
                     .train_length = at.Int(s, "train_length"),
                     .windows = at.Int(s, "windows"),
                     .bucket = at.Int(s, "bucket"),
                     .methods = at.Strings(s, "methods"),
                     .lengths = at.Ints(s, "lengths")};
  const StudyPass pass = ReadPass(at, s);
  report.pass = pass.pass;
  report.cached_keys = pass.cached_keys;
  if (report.texts.empty()) at.Child("texts").Fail("[]", "must list at least one text");
  if (report.text_tokens.size() != report.texts.size()) {
    at.Child("text_tokens")
        .Fail(std::to_string(report.text_tokens.size()) + " values",
              "must hold one token count per text (" + std::to_string(report.texts.size()) + ")");
  }
  at.Child("windows").Check([&] { CheckStudyWindows(report.windows); });
  at.Child("bucket").Check([&] { CheckStudyBucket(report.bucket); });
  for (std::size_t i = 0; i < report.lengths.size(); ++i) {
    at.Child("lengths").Child(std::to_string(i)).Check([&] { CheckStudyLength(report.lengths[i]); });
  }
  return report;
}

// An entry: one method as asked, at one length, on one window.
struct StudyEntry {
  StudyCell cell;  // its method, resolved form, length and same_as_none
  std::int64_t window = 0;
  StudyWindow where;
};
StudyEntry ReadEntry(const GridField& at, const nlohmann::json& row, std::size_t documents) {
  StudyEntry entry{.cell = {.method = at.String(row, "method"),
                            .resolved = at.String(row, "resolved"),
                            .length = ReadLength(at, row),
                            .same_as_none = at.Bool(row, "same_as_none")},
                   .window = at.Int(row, "window"),
                   .where = ReadWindow(at, row, documents)};
  return entry;
}

void Check(const Grid& grid, const GridField& file) {
  const StudyReport settings = ReadSettings(file.Child("settings"), grid.settings);
  const std::size_t documents = settings.texts.size();
  for (const auto& [key, cell] : grid.cells)
    ReadCellParams(file.Child("cells").Child(key).Child("params"), cell.params, documents);
  for (std::size_t i = 0; i < grid.entries.size(); ++i) {
    ReadEntry(file.Child("entries").Child(std::to_string(i)), grid.entries[i].row, documents);
  }
}

// The mean of -ln p over the predicted positions [begin, end) of a window
// (position_nll[i] predicts the token at position i + 1).
double MeanNll(const std::vector<double>& position_nll, std::int64_t begin, std::int64_t end) {
  double sum = 0;
  for (std::int64_t p = std::max<std::int64_t>(begin, 1); p < end; ++p) sum += position_nll[p - 1];
  return sum / static_cast<double>(end - std::max<std::int64_t>(begin, 1));
}

// One window through the model; the cell keeps its mean loss within the
// training length, beyond it and over all of the window, and its loss per
// bucket of positions (the curves' points), not every position's.
nlohmann::json ComputeWindow(const Grid& grid, const GridCell& cell) {
  const GridField at{.file = "grid.json", .path = "params"};
  const StudyReport settings = ReadSettings({.file = "grid.json", .path = "settings"}, grid.settings);
  WindowParams p = ReadCellParams(at, cell.params, settings.texts.size());
  const LoadedModel loaded = LoadGridModel(grid);
  // A model trained with BOS first (Gemma) has it at the start of every window.
  if (loaded.tokenizer.add_bos()) p.options.bos = loaded.tokenizer.bos_id();
  const std::vector<std::int32_t> tokens = TokenizeFile(
      loaded.tokenizer, CheckedGridInput(grid, StudyTextInput(static_cast<std::size_t>(p.window.document)).c_str()));
  const std::int64_t length = p.options.context;
  Require(p.window.offset <= static_cast<std::int64_t>(tokens.size()) - length, kOp, "offset", p.window.offset,
          "leaves fewer than the window's " + std::to_string(length) + " tokens of the text's " +
              std::to_string(tokens.size()));
  // The cell's log gets a line every half minute: a long cell (Gemma 3 at
  // 40,960 tokens: ten minutes on 2 cores) says how far it is.
  ProgressBar bar(cell.label, "tok");
  const PerplexityResult r = EvaluatePerplexity(
      loaded.model,
      std::span(tokens).subspan(static_cast<std::size_t>(p.window.offset), static_cast<std::size_t>(length)), p.options,
      [&](std::int64_t done, std::int64_t total) { bar.Update(done, total); });
  bar.Finish();
  const std::int64_t train = std::min(settings.train_length, length);
  std::vector<double> bucket_nll;
  for (std::int64_t begin = 0; begin < length; begin += p.bucket) {
    bucket_nll.push_back(MeanNll(r.position_nll, begin, std::min(begin + p.bucket, length)));
  }
  nlohmann::json result{{"nll", MeanNll(r.position_nll, 1, length)},
                        {"nll_within", MeanNll(r.position_nll, 1, train)},
                        {"nll_beyond", nullptr},
                        {"bucket_nll", bucket_nll},
                        {"seconds", r.seconds},
                        {"tokens_per_s", r.tokens_per_s}};
  if (length > settings.train_length) result["nll_beyond"] = MeanNll(r.position_nll, settings.train_length, length);
  return result;
}

std::string Summary(const nlohmann::json& r) {
  char line[96];
  std::snprintf(line, sizeof line, "ppl %.2f, %.0f tokens/s", std::exp(r.at("nll").get<double>()),
                r.at("tokens_per_s").get<double>());
  return line;
}

StudyWindowResult ReadWindowResult(const nlohmann::json& result, const StudyWindow& where) {
  StudyWindowResult out{.document = where.document,
                        .offset = where.offset,
                        .nll = result.at("nll").get<double>(),
                        .nll_within = result.at("nll_within").get<double>(),
                        .bucket_nll = result.at("bucket_nll").get<std::vector<double>>(),
                        .seconds = result.at("seconds").get<double>()};
  if (!result.at("nll_beyond").is_null()) out.nll_beyond = result.at("nll_beyond").get<double>();
  return out;
}

GridReport Merge(const Grid& grid, const std::map<std::string, nlohmann::json>& results, const std::string& dir) {
  // ReadGrid checked the settings and rows (Check): read again, they cannot fail.
  StudyReport report = ReadSettings({.file = "grid.json", .path = "settings"}, grid.settings);
  for (const GridEntry& entry : grid.entries) {
    StudyEntry e = ReadEntry({.file = "grid.json", .path = "entry"}, entry.row, report.texts.size());
    e.cell.same_as_none = e.cell.same_as_none && e.cell.method != "none";
    auto it = std::find_if(report.cells.begin(), report.cells.end(),
                           [&](const StudyCell& c) { return c.method == e.cell.method && c.length == e.cell.length; });
    if (it == report.cells.end()) it = report.cells.insert(report.cells.end(), std::move(e.cell));
    it->windows.push_back(ReadWindowResult(results.at(entry.key), e.where));
  }
  report.seconds = TotalCellSeconds(results);
  return WriteGridReport(grid, report.seconds, dir, "study", "results", StudyMarkdown(report), StudyJson(report),
                         [&](const std::string& png, OutputFiles& files) { DrawStudyPlot(report, png, files); });
}

}  // namespace

const GridKind& StudyGridKind() {
  static const GridKind kind{
      .name = "study", .check = Check, .compute = ComputeWindow, .summary = Summary, .merge = Merge};
  return kind;
}

}  // namespace posenc::cli
