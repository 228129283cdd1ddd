// posenc study [--model FILE.gguf] [--text FILE...] [--lengths L,...]
//              [--methods "M;M;..."] [--windows W] [--bucket B] [--decode [--keys-as-written]]
//              [--out DIR] [--executor local|slurm ...]
//
// The context-extension experiment of Su Jianlin's "Transformer升级之路"
// posts (kexue.fm) on a real model: each method runs the same W windows of
// L tokens, drawn from one or more documents (PlanStudyWindows:
// round-robin over the texts, spread evenly within each), and the loss of
// every token is kept by its position in the window, so the table can say
// how each method does within the training length and beyond it, and the
// picture shows where it breaks. A window is the unit of independence:
// the report's intervals are over the windows and its comparisons paired
// on them.
// Method parameters default from the training length and L, and so does L
// (DefaultStudyLength: 1.5x the model's training length). A method that is
// exactly the model's own RoPE at a length (SameAsModelRope: most of them
// within the training length) shares `none`'s cells. Each (length, method,
// window) is a cell of a grid in DIR (grid.h): a rerun computes only what
// is missing. Writes DIR/study.md, DIR/study.json and DIR/study.png together
// (or none of them). Before the cells run it says what they will cost here
// (the estimate `posenc ppl` gives), and when no length is past the
// training length, that such a study shows nothing of extension.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>

#include "commands.h"
#include "grid/grid_executor.h"
#include "options/model_inputs.h"
#include "options/output_files.h"
#include "options/pass_options.h"
#include "options/run_estimate.h"
#include "posenc/error.h"
#include "grid/study_grid.h"
#include "reports/study_report.h"

namespace posenc::cli {
namespace {

constexpr const char* kOp = "study";

struct StudyOptions {
  std::string model{kDefaultModel.path};
  std::vector<std::string> texts{std::string(kDefaultStudyText.path)};
  std::vector<std::int64_t> lengths;      // empty: DefaultStudyLength(training length)
  std::vector<ContextExtension> methods;  // empty: every method with its defaults
  std::int64_t windows = 1;
  std::int64_t bucket = 256;
  PassOptions pass;  // every cell's
  std::string out;   // empty: DefaultStudyDirectory
  std::shared_ptr<ExecutorOptions> executor = std::make_shared<ExecutorOptions>();
};

// A file name's characters: letters, digits, '.', '-', '_'; others as '_'.
std::string FileNameSafe(const std::string& text) {
  std::string out = text;
  for (char& c : out) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '.' && c != '-' && c != '_') c = '_';
  }
  return out;
}

// Without --out, each study gets a directory of its own, named by its
// settings: build/studies/MODEL-L12288-<digest>, the digest (CellKey's
// SHA-256, its first 8 hex digits) covering everything the grid's settings
// hold (methods, windows, bucket, texts). The same command finds its own
// directory again and resumes there; a quick run with other settings never
// overwrites another study's results (a fixed build/study once replaced the
// main job's table with a one-length trial's).
std::string DefaultStudyDirectory(const Grid& grid, const std::string& model,
                                  const std::vector<std::int64_t>& lengths) {
  std::string name = FileNameSafe(std::filesystem::path(model).stem().string()) + "-L";
  for (std::size_t i = 0; i < lengths.size(); ++i) name += (i ? "-" : "") + std::to_string(lengths[i]);
  return "build/studies/" + name + "-" + CellKey(grid.settings).substr(0, 8);
}

// Each text once, and no two with the same content: a window of a copy is
// not a window of another document.
nlohmann::json TextInputs(const std::vector<std::string>& texts) {
  nlohmann::json inputs = nlohmann::json::object();
  for (std::size_t d = 0; d < texts.size(); ++d) {
    nlohmann::json input = GridInput(kOp, texts[d]);
    for (const auto& [name, other] : inputs.items()) {
      Require(other.at("sha256") != input.at("sha256"), kOp, "--text", texts[d],
              "has the same content as " + other.at("path").get<std::string>() +
                  ": each text must be a distinct document (a window is the unit of independence)");
    }
    inputs[StudyTextInput(d)] = std::move(input);
  }
  return inputs;
}

// The grid: a cell per (length, method, window), every plan made and every
// window placed (PlanStudyWindows, which checks each text's length) here,
// before any cell runs. A method that is the model's own RoPE at a length
// asks for `none`'s cells.
Grid PlanGrid(const StudyOptions& o, const LoadedModel& loaded, const std::vector<std::int64_t>& text_tokens,
              const std::vector<std::int64_t>& lengths, const std::vector<ContextExtension>& extensions) {
  const DecoderModel& model = loaded.model;
  const DecoderHyperparams& hp = model.hparams();
  std::vector<std::vector<StudyWindow>> windows;
  windows.reserve(lengths.size());
  for (const auto length : lengths) windows.push_back(PlanStudyWindows(o.texts, text_tokens, o.windows, length));
  std::vector<std::string> names;
  names.reserve(extensions.size());
  for (const auto& e : extensions) names.push_back(FormatContextExtension(e));
  Grid grid{.kind = "study", .version = GridVersion(), .inputs = TextInputs(o.texts)};
  grid.inputs["model"] = GridInput(kOp, o.model);
  grid.settings = {
      {"model", o.model},     {"texts", o.texts},   {"text_tokens", text_tokens}, {"train_length", hp.context_length},
      {"windows", o.windows}, {"bucket", o.bucket}, {"methods", names},           {"lengths", lengths}};
  // The pass only where it is not the default one forward pass: the grids
  // made before it existed keep their settings and cells.
  if (o.pass.decode) grid.settings.update({{"pass", o.pass.pass_name()}, {"cached_keys", o.pass.keys_name()}});
  std::fprintf(stderr, "study: %s (trained on %lld tokens); %lld window(s) a length from", o.model.c_str(),
               static_cast<long long>(hp.context_length), static_cast<long long>(o.windows));
  for (std::size_t d = 0; d < o.texts.size(); ++d) {
    std::fprintf(stderr, "%s %s (%lld tokens)", d == 0 ? "" : ",", o.texts[d].c_str(),
                 static_cast<long long>(text_tokens[d]));
  }
  std::fprintf(stderr, "; %zu methods at", extensions.size());
  for (const auto length : lengths) std::fprintf(stderr, " %lld", static_cast<long long>(length));
  std::fprintf(stderr, " tokens\n");
  for (std::size_t l = 0; l < lengths.size(); ++l) {
    const std::int64_t length = lengths[l];
    for (std::size_t m = 0; m < extensions.size(); ++m) {
      const ExtensionPlan plan = PlanModelExtension(extensions[m], hp, length);
      const bool same = SameAsModelRope(plan, hp.rope, length);
      const std::string resolved = FormatContextExtension(plan.resolved), computed = same ? "none" : resolved;
      for (std::size_t w = 0; w < windows[l].size(); ++w) {
        const StudyWindow& at = windows[l][w];
        nlohmann::json params{{"method", computed},
                              {"length", length},
                              {"document", at.document},
                              {"offset", at.offset},
                              {"bucket", o.bucket}};
        if (o.pass.decode) params.update({{"pass", o.pass.pass_name()}, {"cached_keys", o.pass.keys_name()}});
        GridCell cell{.params = std::move(params),
                      .label = "L " + std::to_string(length) + " " + computed + " window " + std::to_string(w) + " (" +
                               std::filesystem::path(o.texts[static_cast<std::size_t>(at.document)]).stem().string() +
                               " @ " + std::to_string(at.offset) + ")",
                      .flops = model.ForwardFlops(length),
                      .memory_bytes = model.WeightBytes() + model.ActivationBytes(length) + model.CacheBytes(length)};
        AddGridEntry(grid,
                     {{"method", names[m]},
                      {"resolved", resolved},
                      {"same_as_none", same},
                      {"length", length},
                      {"window", w},
                      {"document", at.document},
                      {"offset", at.offset}},
                     cell);
      }
    }
  }
  return grid;
}

// A study whose lengths are all within the training length compares
// methods where most are the model's own RoPE: said before it runs.
void NoteWithinTrainingLength(const std::vector<std::int64_t>& lengths, std::int64_t train_length) {
  if (lengths.back() > train_length) return;
  std::fprintf(stderr,
               "study: note: every length is within the model's training length of %lld tokens, where the methods "
               "are the model's own RoPE or close to it: the rows will barely differ and nothing breaks; a length "
               "past %lld shows the effect, e.g. --lengths %lld (1.5x)\n",
               static_cast<long long>(train_length), static_cast<long long>(train_length),
               static_cast<long long>(DefaultStudyLength(train_length)));
}

// What the cells still to compute in `dir` will cost here (local executor:
// a Slurm job runs elsewhere).
void AnnounceWork(const std::string& dir, const Grid& grid, const ExecutorOptions& executor) {
  const GridScan scan = ScanGrid(dir, grid);
  if (scan.missing.empty() || executor.executor != Executor::kLocal) return;
  double flops = 0;
  for (const std::string& key : scan.missing) flops += grid.cells.at(key).flops;
  std::fprintf(stderr, "study: %zu of %zu cell(s) to compute in %s, %s\n", scan.missing.size(), grid.cells.size(),
               dir.c_str(), DescribeRunEstimate(EstimateRun(flops)).c_str());
}

void Run(const StudyOptions& o) {
  if (!o.out.empty()) RequireOutputDirectory(kOp, "--out", o.out);
  for (const std::int64_t length : o.lengths) CheckStudyLength(length);
  CheckStudyWindows(o.windows);
  CheckStudyBucket(o.bucket);
  std::vector<std::int64_t> lengths = o.lengths;
  std::sort(lengths.begin(), lengths.end());
  const auto repeated = std::adjacent_find(lengths.begin(), lengths.end());
  Require(repeated == lengths.end(), kOp, "lengths", repeated == lengths.end() ? 0 : *repeated, "is listed twice");
  std::vector<ContextExtension> extensions = o.methods;
  if (extensions.empty()) {
    for (const ExtensionMethod m : AllExtensionMethods()) extensions.push_back({.method = m});
  }
  for (const std::string& text : o.texts) {
    std::error_code error;
    Require(std::filesystem::is_regular_file(text, error), kOp, "--text", text, "is not a file (not found?)");
  }
  const LoadedModel loaded = LoadModel(o.model);
  const std::int64_t train_length = loaded.model.hparams().context_length;
  if (lengths.empty()) {
    lengths = {DefaultStudyLength(train_length)};
    CheckStudyLength(lengths.front());
  }
  std::vector<std::int64_t> text_tokens;
  for (const std::string& text : o.texts) {
    text_tokens.push_back(static_cast<std::int64_t>(TokenizeFile(loaded.tokenizer, text).size()));
  }
  const Grid grid = PlanGrid(o, loaded, text_tokens, lengths, extensions);
  NoteWithinTrainingLength(lengths, train_length);
  const std::string out = o.out.empty() ? DefaultStudyDirectory(grid, o.model, lengths) : o.out;
  if (o.out.empty()) RequireOutputDirectory(kOp, "--out", out);
  AnnounceWork(out, grid, *o.executor);
  GridReport report;
  if (RunGrid(out, grid, *o.executor, &report)) PrintGridReport(report, false);
}

}  // namespace

void AddStudyCommand(CLI::App& app) {
  auto o = std::make_shared<StudyOptions>();
  CLI::App* study =
      app.add_subcommand("study",
                         "Context extension on a real model: loss by token position per method and length, within and "
                         "beyond the training length");
  AddModelOption(*study, o->model);
  study
      ->add_option("--text,--texts", o->texts,
                   "UTF-8 text files, distinct documents the windows are drawn from: window w of --windows goes to "
                   "text w mod (number of texts), and a text's n windows start at k * floor(tokens / n), k = 0..n-1 "
                   "(scripts/fetch-texts)")
      ->capture_default_str();
  study
      ->add_option("--lengths", o->lengths,
                   "Context lengths, comma-separated (default: 1.5x the model's training length, 12288 for "
                   "SmolLM2's 8192)")
      ->delimiter(',');
  AddMethodsOption(*study, std::shared_ptr<std::vector<ContextExtension>>(o, &o->methods),
                   "every method with its defaults");
  study
      ->add_option("--windows", o->windows,
                   "Windows per length, the units the intervals and paired comparisons are over (1 to 1000; at least "
                   "one per text)")
      ->capture_default_str();
  study->add_option("--bucket", o->bucket, "Tokens per point of the loss-by-position curves (1 to 2^20)")
      ->capture_default_str();
  AddPassOptions(*study, o->pass);
  study->add_option("--out", o->out,
                    "Grid directory (grid.json, cells/; study.md, study.json, study.png); default: one of its own "
                    "named by the settings, build/studies/MODEL-L<lengths>-<digest of the settings>, where the same "
                    "command resumes");
  AddExecutorOptions(*study, o->executor);
  study->callback([o] {
    o->model = ResolveInput(kOp, "--model", o->model, kDefaultModel);
    for (std::string& text : o->texts) text = ResolveInput(kOp, "--text", text, kDefaultStudyText);
    Run(*o);
  });
}

}  // namespace posenc::cli
