// posenc study [--model FILE.gguf] [--text FILE] [--lengths L,...] [--methods M,...]
//              [--windows W] [--out DIR] [--threads T]
//
// Seed 004's experiment on a real model: perplexity under each
// context-extension method at each context length, some of them beyond the
// model's training length. Each length L evaluates the first W windows of L
// tokens of the text (the same text for every method), with the method's
// parameters defaulting from the training length and L. A method that is
// exactly the model's own RoPE at a length (SameAsModelRope: most of them
// within the training length) is not run again: it reports the `none` value
// and says so. Writes DIR/study.md (a Markdown table), DIR/study.json and
// DIR/study.png (perplexity against length, one line per method).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "model_inputs.h"
#include "plot.h"
#include "posenc/error.h"
#include "posenc/parallel.h"
#include "posenc/perplexity.h"
#include "progress_bar.h"

namespace posenc::cli {
namespace {

using Json = nlohmann::ordered_json;
constexpr const char* kOp = "study";

struct StudyOptions {
  std::string model = kDefaultModelPath;
  std::string text = "build/texts/debian-handbook.txt";
  std::vector<std::int64_t> lengths{2048, 8192, 10240};
  std::vector<std::string> methods;  // empty: every method
  std::int64_t windows = 1;
  std::string out = "build/study";
  int threads = 0;
};

struct Cell {
  std::string method;        // as asked ("yarn")
  std::string resolved;      // with its parameters at this length
  std::int64_t length = 0;
  double ppl = 0;
  double seconds = 0;
  double tokens_per_s = 0;
  bool same_as_none = false;  // not run: the model's own RoPE at this length
};

std::string Fixed(double value, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, value);
  return buffer;
}

// "none,yarn:factor=2,logn,ntk" -> {"none", "yarn:factor=2,logn", "ntk"}: a
// comma starts a new method only where a method name follows.
std::vector<std::string> SplitMethods(const std::string& list) {
  std::vector<std::string> methods;
  std::size_t begin = 0;
  while (begin <= list.size()) {
    const std::size_t comma = std::min(list.find(',', begin), list.size());
    const std::string part = list.substr(begin, comma - begin);
    const bool parameter =
        part.find(':') == std::string::npos && (part == "logn" || part.find('=') != std::string::npos);
    if (parameter && !methods.empty()) {
      methods.back() += "," + part;
    } else {
      methods.push_back(part);
    }
    begin = comma + 1;
  }
  return methods;
}

void WriteMarkdown(const std::vector<Cell>& cells, const std::vector<std::string>& methods,
                   const std::vector<std::int64_t>& lengths, const std::string& header, const std::string& path) {
  std::ofstream out(path);
  out << header << "\n\n| method |";
  for (const auto length : lengths) out << " " << length << " |";
  out << "\n|---|";
  for (std::size_t i = 0; i < lengths.size(); ++i) out << "---:|";
  out << "\n";
  for (const std::string& method : methods) {
    out << "| " << method << " |";
    for (const auto length : lengths) {
      for (const Cell& c : cells) {
        if (c.method == method && c.length == length) out << " " << Fixed(c.ppl, 2) << (c.same_as_none ? "*" : "") << " |";
      }
    }
    out << "\n";
  }
  out << "\n\\* the method is exactly the model's own RoPE at this length (defaults at s = 1); the `none` value.\n";
  Require(out.good(), kOp, "out", path, "cannot be written");
}

void Run(const StudyOptions& o) {
  if (o.threads > 0) SetNumThreads(o.threads);
  Require(!o.lengths.empty(), kOp, "lengths", Verbatim{"[]"}, "must list at least one length");
  std::vector<std::string> methods = o.methods;
  if (methods.empty()) {
    for (const ExtensionMethod m : AllExtensionMethods()) methods.emplace_back(ExtensionMethodName(m));
  }
  std::vector<ContextExtension> extensions;
  for (const auto& m : methods) extensions.push_back(ParseContextExtension(m));  // fail before loading
  std::filesystem::create_directories(o.out);

  const auto start = std::chrono::steady_clock::now();
  const LoadedModel loaded = LoadModel(o.model);
  const std::vector<std::int32_t> tokens = TokenizeFile(loaded.tokenizer, o.text);
  const LlamaHyperparams& hp = loaded.model.hparams();
  std::fprintf(stderr, "study: %s (trained on %lld tokens), %s: %zu tokens; lengths", o.model.c_str(),
               static_cast<long long>(hp.context_length), o.text.c_str(), tokens.size());
  for (const auto length : o.lengths) {
    Require(length >= 2 && length * o.windows <= static_cast<std::int64_t>(tokens.size()), kOp, "lengths",
            length, "needs " + std::to_string(o.windows) + " window(s) within the text's " +
                        std::to_string(tokens.size()) + " tokens");
    std::fprintf(stderr, " %lld", static_cast<long long>(length));
  }
  std::fprintf(stderr, "; %zu methods\n", methods.size());

  std::vector<Cell> cells;
  for (const auto length : o.lengths) {
    double none_ppl = 0;
    std::optional<PerplexityResult> none_result;
    for (std::size_t m = 0; m < methods.size(); ++m) {
      Cell cell{methods[m], "", length};
      const ExtensionPlan plan = PlanContextExtension(extensions[m], hp.rope, hp.context_length, length);
      cell.resolved = FormatContextExtension(plan.resolved);
      if (extensions[m].method != ExtensionMethod::kNone && none_result && SameAsModelRope(plan, hp.rope, length)) {
        cell.ppl = none_ppl;
        cell.same_as_none = true;
        std::fprintf(stderr, "  L %6lld %-32s = none (the model's own RoPE at this length)\n",
                     static_cast<long long>(length), cell.resolved.c_str());
        cells.push_back(cell);
        continue;
      }
      PerplexityOptions options;
      options.context = length;
      options.extension = extensions[m];
      options.max_windows = o.windows;
      ProgressBar bar("  L " + std::to_string(length) + " " + cell.resolved, "tok");
      const PerplexityResult r =
          EvaluatePerplexity(loaded.model, tokens, options,
                             [&](std::int64_t done, std::int64_t total) { bar.Update(done, total); });
      bar.Finish();
      cell.ppl = r.ppl;
      cell.seconds = r.seconds;
      cell.tokens_per_s = r.tokens_per_s;
      if (extensions[m].method == ExtensionMethod::kNone && !extensions[m].logn) {
        none_ppl = r.ppl;
        none_result = r;
      }
      std::fprintf(stderr, "  L %6lld %-32s ppl %10.3f  (%.0f s)\n", static_cast<long long>(length),
                   cell.resolved.c_str(), r.ppl, r.seconds);
      cells.push_back(cell);
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // Outputs.
  const std::string header = "Perplexity of " + std::filesystem::path(o.model).filename().string() + " (trained on " +
                             std::to_string(hp.context_length) + " tokens) on " +
                             std::filesystem::path(o.text).filename().string() + ", first " +
                             std::to_string(o.windows) + " window(s) of each length; " + Fixed(seconds, 0) + " s on " +
                             std::to_string(NumThreads()) + " threads.";
  WriteMarkdown(cells, methods, o.lengths, header, o.out + "/study.md");

  Json json{{"model", o.model},       {"text", o.text},       {"text_tokens", tokens.size()},
            {"train_length", hp.context_length}, {"windows", o.windows}, {"threads", NumThreads()},
            {"seconds", seconds},     {"results", Json::array()}};
  for (const Cell& c : cells) {
    json["results"].push_back({{"method", c.method},
                               {"resolved", c.resolved},
                               {"length", c.length},
                               {"ppl", c.ppl},
                               {"same_as_none", c.same_as_none},
                               {"seconds", c.seconds},
                               {"tokens_per_s", c.tokens_per_s}});
  }
  std::ofstream(o.out + "/study.json") << json.dump(2) << "\n";

  LinePlot plot;
  plot.title = "Perplexity against context length (" + std::filesystem::path(o.model).stem().string() +
               ", trained on " + std::to_string(hp.context_length) + ")";
  plot.x_label = "context length (tokens)";
  plot.y_label = "perplexity (log scale)";
  plot.log_y = true;
  plot.key_position = "outside right";
  for (const std::string& method : methods) {
    PlotSeries series{method, {}, {}, false, "linespoints lw 2 pt 7"};
    for (const Cell& c : cells) {
      if (c.method == method) series.x.push_back(static_cast<double>(c.length)), series.y.push_back(c.ppl);
    }
    plot.series.push_back(series);
  }
  // The training length as a dashed vertical line across the values' range.
  const auto [lowest, highest] = std::minmax_element(cells.begin(), cells.end(),
                                                     [](const Cell& a, const Cell& b) { return a.ppl < b.ppl; });
  const auto train = static_cast<double>(hp.context_length);
  plot.series.push_back(PlotSeries{"training length", {train, train}, {lowest->ppl * 0.9, highest->ppl * 1.1}, false,
                                   "lines dt 2 lw 1 lc rgb 'black'"});
  DrawLinePlot(plot, o.out + "/study.png");

  std::ifstream table(o.out + "/study.md");
  std::printf("%s\n", std::string(std::istreambuf_iterator<char>(table), {}).c_str());
  std::printf("wrote %s/study.md, %s/study.json, %s/study.png (%.0f s)\n", o.out.c_str(), o.out.c_str(),
              o.out.c_str(), seconds);
}

}  // namespace

void AddStudyCommand(CLI::App& app) {
  auto o = std::make_shared<StudyOptions>();
  CLI::App* study = app.add_subcommand(
      "study", "Seed 004's experiment: perplexity per context-extension method per context length");
  study->add_option("--model", o->model, "GGUF model file (llama family)")->capture_default_str();
  study->add_option("--text", o->text, "UTF-8 text file (scripts/fetch-texts)")->capture_default_str();
  study->add_option("--lengths", o->lengths, "Context lengths, comma-separated")
      ->delimiter(',')
      ->check(CLI::Range(std::int64_t{2}, std::int64_t{1} << 24))
      ->capture_default_str();
  study->add_option_function<std::string>(
      "--methods", [o](const std::string& list) { o->methods = SplitMethods(list); },
      "Methods in the ppl --method form, comma-separated (\"none,yarn:factor=2,logn,rerope:window=512\"; "
      "default: every method)");
  study->add_option("--windows", o->windows, "Windows per length")->check(CLI::Range(1, 1000))->capture_default_str();
  study->add_option("--out", o->out, "Output directory")->capture_default_str();
  study->add_option("--threads", o->threads, "Threads (default: all)")->check(CLI::NonNegativeNumber);
  study->callback([o] { Run(*o); });
}

}  // namespace posenc::cli
