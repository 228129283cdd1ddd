// posenc eval --model CKPT.gguf [--lengths 128,256,...] [--text FILE]
//             [--windows W] [--learned-past-table error|hierarchical]
//             [--method NAME[:k=v,...]] [--buckets N] [--threads T] [--json]
//
// The loss of a `posenc train` checkpoint on a held-out text at each length
// (include/posenc/tiny_lm_eval.h): nats per byte, bits per byte and
// perplexity, beside the byte-unigram baseline (the training corpus's byte
// frequencies applied to the text) that a model must beat to have learned
// anything. --json adds the loss per position, averaged over buckets.
// --method runs a RoPE model under a training-free context-extension method
// (the ppl/study form; defaults from the checkpoint's training length and
// each evaluated length).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "commands.h"
#include "options/reuse_freed_memory.h"
#include "options/default_inputs.h"
#include "options/integer_options.h"
#include "posenc/context_extension.h"
#include "posenc/error.h"
#include "posenc/input_file.h"
#include "posenc/parallel.h"
#include "posenc/tiny_lm_checkpoint.h"
#include "posenc/tiny_lm_eval.h"
#include "options/progress_bar.h"

namespace posenc::cli {
namespace {

constexpr const char* kOp = "eval";
constexpr std::uint64_t kMaxTextBytes = std::uint64_t{1} << 30;

struct EvalOptions {
  std::string model;
  std::vector<std::int64_t> lengths;  // empty: 1, 2, 4, 8, 16 x the training length
  std::string text{kDefaultValidationText.path};
  std::int64_t windows = 64;
  std::string learned_past_table = "error";
  std::string method = "none";
  std::int64_t buckets = 32;
  int threads = 0;
  bool json = false;
};

// The position curve in at most `buckets` runs of equal width (the last may
// be shorter), each with the positions it covers.
nlohmann::ordered_json Buckets(const std::vector<double>& position_loss, std::int64_t buckets) {
  const auto length = static_cast<std::int64_t>(position_loss.size());
  const std::int64_t width = (length + buckets - 1) / buckets;
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  std::int64_t start = 0;
  for (const double loss : BucketPositionLoss(position_loss, width)) {
    out.push_back({{"start", start}, {"end", std::min(length, start + width)}, {"loss", loss}});
    start += width;
  }
  return out;
}

void Run(EvalOptions o) {
  ReuseFreedMemory();
  Require(o.windows >= 1, kOp, "--windows", o.windows, "must be >= 1");
  Require(o.buckets >= 1, kOp, "--buckets", o.buckets, "must be >= 1");
  for (const std::int64_t length : o.lengths) {
    Require(length >= 1, kOp, "--lengths", length, "must be >= 1 (bytes predicted a window)");
  }
  const ContextExtension method = ParseContextExtension(o.method);  // fails before the checkpoint loads
  const LearnedPastTable past_table = [&] {
    if (o.learned_past_table == "error") return LearnedPastTable::kError;
    if (o.learned_past_table == "hierarchical") return LearnedPastTable::kHierarchical;
    ThrowError(kOp, "--learned-past-table", FormatValue(o.learned_past_table), "must be one of error, hierarchical");
  }();
  TinyLmCheckpoint checkpoint = LoadTinyLmCheckpoint(o.model);
  TinyLmConfig& config = checkpoint.config;
  config.learned_past_table = past_table;
  const std::int64_t train_length = config.train_length;
  if (o.lengths.empty()) {
    for (const std::int64_t factor : {1, 2, 4, 8, 16}) o.lengths.push_back(factor * train_length);
  }
  // Before any work: a learned table ends at its last row, randomized
  // positions at their range.
  const std::int64_t rows = config.PositionExtent();
  for (const std::int64_t length : o.lengths) {
    Require(config.position_range == 0 || length <= config.position_range, kOp, "--lengths", length,
            "must be <= position_range = " + std::to_string(config.position_range) + " of " + o.model +
                " (trained at randomized positions from [0, position_range))");
    if (!PositionSchemeCapabilities(config.scheme).position_rows || length <= rows) continue;
    Require(past_table == LearnedPastTable::kHierarchical, kOp, "--lengths", length,
            "is past the learned position table of " + std::to_string(rows) + " rows of " + o.model +
                "; pass --learned-past-table hierarchical (Su's decomposition, up to " + std::to_string(rows * rows) +
                ") or lengths <= " + std::to_string(rows));
    Require(length <= rows * rows, kOp, "--lengths", length,
            "must be <= rows^2 = " + std::to_string(rows * rows) +
                ", the most the hierarchical decomposition of the learned table reaches");
  }
  std::vector<std::string> resolved;  // the method at each length, every default filled in (errors now)
  for (const std::int64_t length : o.lengths) {
    resolved.push_back(FormatContextExtension(
        IsModelAsTrained(method) ? method : PlanTinyLmExtension(config, method, length).resolved));
  }
  if (o.threads > 0) SetNumThreads(o.threads);
  o.text = ResolveInput(kOp, "--text", o.text, kDefaultValidationText);
  const std::string bytes = ReadRegularFile(kOp, "--text", o.text, kMaxTextBytes, "the text is read into memory");
  const std::span<const std::uint8_t> text(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
  const std::int64_t longest = *std::max_element(o.lengths.begin(), o.lengths.end());
  Require(static_cast<std::int64_t>(text.size()) > longest, kOp, "--text", o.text,
          "has " + std::to_string(text.size()) + " bytes, fewer than one window of the longest length + 1 = " +
              std::to_string(static_cast<std::uint64_t>(longest) + 1));  // exact up to 2^63

  const ByteCounts& corpus_counts = checkpoint.info.corpus_byte_counts;
  const bool corpus_known = std::any_of(corpus_counts.begin(), corpus_counts.end(), [](auto c) { return c > 0; });
  const double unigram_text = ByteUnigramLoss(CountBytes(text), text);
  const double unigram_corpus = corpus_known ? ByteUnigramLoss(corpus_counts, text) : 0.0;

  std::vector<TinyLmEvalResult> results;
  for (const std::int64_t length : o.lengths) {
    ProgressBar bar(std::string(kOp) + " " + o.method + " L" + std::to_string(length), "windows");
    results.push_back(EvaluateTinyLm(config, checkpoint.params, text, length, o.windows, method,
                                     [&](std::int64_t done, std::int64_t total) { bar.Update(done, total); }));
    bar.Finish();
  }
  const std::string scheme(PositionSchemeName(config.scheme));
  if (o.json) {
    nlohmann::ordered_json lengths = nlohmann::ordered_json::array();
    for (std::size_t i = 0; i < results.size(); ++i) {
      const TinyLmEvalResult& r = results[i];
      lengths.push_back({{"length", r.length},
                         {"x_train_length", static_cast<double>(r.length) / static_cast<double>(train_length)},
                         {"windows", r.windows},
                         {"loss", r.loss},
                         {"bits_per_byte", r.BitsPerByte()},
                         {"perplexity", r.Perplexity()},
                         {"method", resolved[i]},
                         {"tokens_per_s", r.tokens_per_s},
                         {"seconds", r.seconds},
                         {"position_loss", Buckets(r.position_loss, o.buckets)}});
    }
    nlohmann::ordered_json out{
        {"model", o.model},
        {"scheme", scheme},
        {"train_length", train_length},
        {"trained_tokens", checkpoint.info.tokens},
        {"train_loss", checkpoint.info.final_loss},
        {"learned_past_table", LearnedPastTableName(past_table)},
        {"method", o.method},
        {"text", o.text},
        {"text_bytes", text.size()},
        {"unigram",
         {{"corpus_frequencies", corpus_known ? nlohmann::ordered_json(unigram_corpus) : nullptr},
          {"text_frequencies", unigram_text}}},
        {"threads", NumThreads()},
        {"lengths", lengths}};
    std::cout << out.dump(2) << "\n";
    return;
  }
  // The corpus is text from the file: its control bytes (an ANSI escape, a
  // newline) are printed as \xNN, never raw to the terminal.
  std::printf("model %s: %s, trained at L %lld on %lld bytes of %s (train loss %.4f)\n",
              EscapeControlBytes(o.model).c_str(), scheme.c_str(), static_cast<long long>(train_length),
              static_cast<long long>(checkpoint.info.tokens), EscapeControlBytes(checkpoint.info.corpus).c_str(),
              checkpoint.info.final_loss);
  std::printf("text %s: %zu bytes; byte-unigram baseline ", EscapeControlBytes(o.text).c_str(), text.size());
  if (corpus_known) std::printf("%.4f nats/byte (training corpus's frequencies), ", unigram_corpus);
  std::printf("%.4f (the text's own)\n", unigram_text);
  std::printf("%8s %7s %8s %10s %10s %10s  %s\n", "length", "x L", "windows", "nats/byte", "bits/byte", "ppl",
              "method");
  for (std::size_t i = 0; i < results.size(); ++i) {
    const TinyLmEvalResult& r = results[i];
    std::printf("%8lld %7.2f %8lld %10.4f %10.4f %10.3f  %s\n", static_cast<long long>(r.length),
                static_cast<double>(r.length) / static_cast<double>(train_length), static_cast<long long>(r.windows),
                r.loss, r.BitsPerByte(), r.Perplexity(), resolved[i].c_str());
  }
}

}  // namespace

void AddEvalCommand(CLI::App& app) {
  auto o = std::make_shared<EvalOptions>();
  CLI::App* eval = app.add_subcommand("eval", "Loss of a posenc train checkpoint at each length on a held-out text");
  eval->add_option("--model", o->model, "Checkpoint (GGUF) of posenc train")->required();
  eval->add_option("--lengths", o->lengths, "Lengths to evaluate (default: 1, 2, 4, 8, 16 x the training length)")
      ->delimiter(',');
  eval->add_option("--text", o->text, "Held-out text (bytes)")->capture_default_str();
  eval->add_option("--windows", o->windows, "Windows a length (evenly spaced, never overlapping)")
      ->capture_default_str();
  eval->add_option("--learned-past-table", o->learned_past_table,
                   "A learned table past its rows: error or hierarchical (Su's decomposition)")
      ->capture_default_str();
  eval->add_option("--method", o->method,
                   ExtensionMethodsSynopsis() + " (RoPE models; defaults from the training length and each length)")
      ->capture_default_str();
  eval->add_option("--buckets", o->buckets, "Buckets of the per-position loss in --json")->capture_default_str();
  eval->add_option("--threads", o->threads, "Threads (default: all)")->check(IntegerAtLeast(0));
  eval->add_flag("--json", o->json, "Print one JSON object");
  eval->callback([o] { Run(*o); });
}

}  // namespace posenc::cli
