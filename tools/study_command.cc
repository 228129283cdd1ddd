// posenc study [--model FILE.gguf] [--text FILE] [--lengths L,...]
//              [--methods "M;M;..."] [--windows W] [--bucket B] [--out DIR]
//              [--threads T]
//
// The context-extension experiment of Su Jianlin's "Transformer升级之路"
// posts (kexue.fm) on a real model: each method runs W windows of L tokens
// from the start of the text, and the loss of every token is kept by its
// position in the window, so the table can say how each method does within
// the training length and beyond it, and the picture shows where it breaks.
// Method parameters default from the training length and L. A method that
// is exactly the model's own RoPE at a length (SameAsModelRope: most of them
// within the training length) shares `none`'s run. Writes DIR/study.md,
// DIR/study.json and DIR/study.png together (or none of them).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>

#include "commands.h"
#include "model_inputs.h"
#include "output_files.h"
#include "posenc/error.h"
#include "posenc/parallel.h"
#include "posenc/perplexity.h"
#include "progress_bar.h"
#include "study_report.h"

namespace posenc::cli {
namespace {

constexpr const char* kOp = "study";

struct StudyOptions {
  std::string model = kDefaultModelPath;
  std::string text = "build/texts/debian-handbook.txt";
  // 1.5x SmolLM2's 8192: far enough past it for every method to show its
  // behaviour, short enough for the whole default study to take ~8 minutes.
  std::vector<std::int64_t> lengths{12288};
  std::vector<ContextExtension> methods;  // empty: every method with its defaults
  std::int64_t windows = 1;
  std::int64_t bucket = 256;
  std::string out = "build/study";
  int threads = 0;
};

void Run(const StudyOptions& o) {
  if (o.threads > 0) SetNumThreads(o.threads);
  Require(!o.lengths.empty(), kOp, "lengths", Verbatim{"[]"}, "must list at least one length");
  std::vector<std::int64_t> lengths = o.lengths;
  std::sort(lengths.begin(), lengths.end());
  const auto repeated = std::adjacent_find(lengths.begin(), lengths.end());
  Require(repeated == lengths.end(), kOp, "lengths", repeated == lengths.end() ? 0 : *repeated, "is listed twice");
  std::vector<ContextExtension> extensions = o.methods;
  if (extensions.empty()) {
    for (const ExtensionMethod m : AllExtensionMethods()) extensions.push_back({.method = m});
  }

  const auto start = std::chrono::steady_clock::now();
  const LoadedModel loaded = LoadModel(o.model);
  const std::vector<std::int32_t> tokens = TokenizeFile(loaded.tokenizer, o.text);
  const LlamaHyperparams& hp = loaded.model.hparams();
  for (const auto length : lengths) {
    Require(length * o.windows <= static_cast<std::int64_t>(tokens.size()), kOp, "lengths", length,
            "needs " + std::to_string(o.windows) + " window(s) within the text's " + std::to_string(tokens.size()) +
                " tokens");
  }
  StudyReport report{.model = o.model,
                     .text = o.text,
                     .text_tokens = static_cast<std::int64_t>(tokens.size()),
                     .train_length = hp.context_length,
                     .windows = o.windows,
                     .bucket = o.bucket,
                     .lengths = lengths};
  for (const auto& e : extensions) report.methods.push_back(FormatContextExtension(e));
  std::fprintf(stderr, "study: %s (trained on %lld tokens), %s: %zu tokens; %zu methods at", o.model.c_str(),
               static_cast<long long>(hp.context_length), o.text.c_str(), tokens.size(), extensions.size());
  for (const auto length : lengths) std::fprintf(stderr, " %lld", static_cast<long long>(length));
  std::fprintf(stderr, " tokens\n");

  for (const auto length : lengths) {
    std::optional<StudyCell> model_rope;  // `none` at this length, shared by the methods equal to it
    for (std::size_t m = 0; m < extensions.size(); ++m) {
      const ExtensionPlan plan = PlanContextExtension(extensions[m], hp.rope, hp.context_length, length);
      StudyCell cell{.method = report.methods[m], .resolved = FormatContextExtension(plan.resolved), .length = length};
      const bool same = SameAsModelRope(plan, hp.rope, length);
      if (same && model_rope) {
        cell.same_as_none = cell.method != "none";
        cell.position_nll = model_rope->position_nll;
        std::fprintf(stderr, "  L %lld %s: the model's own RoPE at this length (none's run)\n",
                     static_cast<long long>(length), cell.resolved.c_str());
        report.cells.push_back(std::move(cell));
        continue;
      }
      PerplexityOptions options{.context = length, .extension = extensions[m], .max_windows = o.windows};
      ProgressBar bar("  L " + std::to_string(length) + " " + cell.resolved, "tok");
      PerplexityResult r = EvaluatePerplexity(loaded.model, tokens, options,
                                              [&](std::int64_t done, std::int64_t total) { bar.Update(done, total); });
      bar.Finish();
      cell.seconds = r.seconds;
      cell.tokens_per_s = r.tokens_per_s;
      cell.position_nll = std::move(r.position_nll);
      if (length > hp.context_length) {
        std::fprintf(stderr, "  L %lld %s: ppl %.2f within the training length, %.2f beyond\n",
                     static_cast<long long>(length), cell.resolved.c_str(),
                     PerplexityOfTokens(cell, 1, hp.context_length),
                     PerplexityOfTokens(cell, hp.context_length, length));
      }
      if (same) model_rope = cell;
      report.cells.push_back(std::move(cell));
    }
  }
  report.threads = NumThreads();
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  const std::string markdown = StudyMarkdown(report);
  const std::string md = o.out + "/study.md", json = o.out + "/study.json", png = o.out + "/study.png";
  std::filesystem::create_directories(o.out);
  OutputFiles files(kOp);
  files.Write(md, markdown);
  files.Write(json, StudyJson(report));
  DrawStudyPlot(report, png, files);
  files.Commit();
  std::printf("%s\nwrote %s, %s, %s\nstudy: %zu cells in %.0f s (%.1f min) on %d threads\n", markdown.c_str(),
              md.c_str(), json.c_str(), png.c_str(), report.cells.size(), report.seconds, report.seconds / 60,
              report.threads);
}

}  // namespace

void AddStudyCommand(CLI::App& app) {
  auto o = std::make_shared<StudyOptions>();
  CLI::App* study =
      app.add_subcommand("study",
                         "Context extension on a real model: loss by token position per method and length, within and "
                         "beyond the training length");
  study->add_option("--model", o->model, "GGUF model file (llama family)")->capture_default_str();
  study->add_option("--text", o->text, "UTF-8 text file (scripts/fetch-texts)")->capture_default_str();
  study->add_option("--lengths", o->lengths, "Context lengths, comma-separated (default 12288: 1.5x SmolLM2's 8192)")
      ->delimiter(',')
      ->check(CLI::Range(std::int64_t{2}, std::int64_t{1} << 24));
  AddMethodsOption(*study, std::shared_ptr<std::vector<ContextExtension>>(o, &o->methods),
                   "every method with its defaults");
  study->add_option("--windows", o->windows, "Windows per length (the loss at each position is their mean)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  study->add_option("--bucket", o->bucket, "Tokens per point of the loss-by-position curves")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  study->add_option("--out", o->out, "Output directory")->capture_default_str();
  study->add_option("--threads", o->threads, "Threads (default: all)")->check(CLI::NonNegativeNumber);
  study->callback([o] { Run(*o); });
}

}  // namespace posenc::cli
