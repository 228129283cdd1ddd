// posenc zoo [--schemes S,...] [--seeds N,...] [--train-len L] [--tokens N]
//            [--lengths N,...] [--methods M;...] [--corpus FILE] [--text FILE]
//            [--eval-bytes N] [--stride-divisor K] [--bucket N] [--[no-]half-budget] [--out DIR] [--json]
//            [model and optimizer options of posenc train]
//            [--executor local|slurm ...]
//
// Train short, test long: every position scheme trained from scratch at one
// length L with the same corpus, budget, optimizer and seeds, then
// evaluated on a held-out text at 1x..16x L in sliding windows (every
// length scores the same bytes, each with close to the length's context),
// beside byte n-grams scored on the same bytes; a learned table also past
// its rows by Su's hierarchical decomposition, the RoPE models also under
// every training-free method of the real-model study. Each (scheme, seed) is a
// cell of a grid in DIR (grid.h, zoo_grid.cc): a rerun, or one that adds
// seeds or schemes, trains only what is missing; the tables, the JSON and
// the picture are merged from all cells at the end.
//
// The report's statistics: standard deviations over the seeds, paired 95%
// intervals (Student t over seeds) for every row against RoPE + window
// past L and for each step of the ranking, "within noise" when they hold
// 0; and the convergence check: every model trained again with half the
// budget (--half-budget, its own cells), a scheme converged when doubling
// the budget moves its loss at L by less than the seeds' sd; the n-grams
// also fitted on the bytes each seed's models trained on; and the verdict
// rule (zoo_report.h, ZooEarlyTraining): no extrapolation verdict or
// ranking for a scheme that fails the check or is not below the 5-gram on
// its own bytes beyond noise. --plan-only writes the grid, and
// `posenc grid status DIR` prints its cost.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "commands.h"
#include "grid/grid_executor.h"
#include "options/model_inputs.h"
#include "options/output_files.h"
#include "posenc/context_extension.h"
#include "posenc/error.h"
#include "posenc/tiny_lm_eval.h"
#include "posenc/tiny_lm_train.h"
#include "options/tiny_lm_options.h"
#include "grid/zoo_grid.h"

namespace posenc::cli {
namespace {

constexpr const char* kOp = "zoo";
// The training budget of a model (bytes): sized so that the default zoo
// (8 schemes x 2 seeds, evaluations included) fits in 20 minutes on 2 cores.
constexpr std::int64_t kDefaultTokens = 786432;

struct ZooOptions {
  std::vector<std::string> schemes;  // empty: kDefaultSchemes; "all": every scheme
  std::vector<std::int64_t> seeds{0, 1};
  std::vector<std::int64_t> lengths;      // empty: 1, 2, 4, 8, 16 x L
  std::vector<ContextExtension> methods;  // kDefaultMethods unless --methods
  std::string corpus{kDefaultTrainCorpus.path};
  std::string text{kDefaultValidationText.path};
  std::int64_t eval_bytes = 32768;
  // Sliding windows of stride length / 2: every byte sees at least half the
  // length, each byte runs through the model twice (a quarter of the
  // length: 3/4 of it, four times the cost of evaluation).
  std::int64_t stride_divisor = 2;
  std::int64_t bucket = 0;  // 0: L / 8
  // The convergence check: every model also trained with half the budget
  // and scored at L (half the training again, little evaluation).
  bool half_budget = true;
  std::string out = "build/zoo";
  bool json = false;
  TinyLmFlags flags;
  TinyLmTrainOptions train;
  std::shared_ptr<ExecutorOptions> executor = std::make_shared<ExecutorOptions>();
};

// The notes' schemes and KERPLE; FIRE (and any scheme beyond these) runs
// with --schemes all or by name, so that the default stays within 20
// minutes on 2 cores.
constexpr const char* kDefaultSchemes = "nope,sinusoidal,learned,shaw,t5,alibi,rope,kerple";

// Every method of the real-model study; logn on its own as "none:logn".
constexpr const char* kDefaultMethods =
    "linear;ntk;dynamic-ntk;yarn;rerope;leaky-rerope;window;lambda;none:logn;self-extend";

std::int64_t FileBytes(const char* flag, const std::string& path) {
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(path, ec);
  Require(!ec, kOp, flag, path, "cannot be read (" + ec.message() + "); scripts/fetch-texts builds the default texts");
  return static_cast<std::int64_t>(bytes);
}

// The grid: every option, scheme config, method plan and window checked
// here, before a minute of training.
Grid PlanGrid(const ZooOptions& o, const std::vector<PositionScheme>& schemes, const std::vector<std::int64_t>& lengths,
              const std::vector<ContextExtension>& methods) {
  const std::int64_t train_length = o.flags.model().train_length;
  const std::int64_t corpus_bytes = FileBytes("--corpus", o.corpus), text_bytes = FileBytes("--text", o.text);
  Require(corpus_bytes > train_length, kOp, "--corpus", o.corpus,
          "has " + std::to_string(corpus_bytes) +
              " bytes, fewer than one window of --train-len + 1 = " + std::to_string(train_length + 1));
  // Every length scores the same bytes, 1..eval_bytes of the text, in
  // sliding windows (zoo_grid.cc's Evaluate).
  CheckZooEvalBytes(o.eval_bytes, lengths);
  Require(text_bytes > o.eval_bytes, kOp, "--text", o.text,
          "has " + std::to_string(text_bytes) + " bytes, fewer than --eval-bytes + 1 = " +
              std::to_string(static_cast<std::uint64_t>(o.eval_bytes) + 1) + " (byte 0 is context only)");
  std::vector<std::string> names;
  names.reserve(methods.size());
  for (const ContextExtension& m : methods) names.push_back(FormatContextExtension(m));
  std::vector<std::string> scheme_names;
  scheme_names.reserve(schemes.size());
  for (const PositionScheme& s : schemes) scheme_names.emplace_back(PositionSchemeName(s));
  const nlohmann::json model = ZooModelJson(o.flags.model());
  nlohmann::json train = ZooTrainJson(o.train);
  train.erase("seed");
  const std::int64_t bucket = o.bucket > 0 ? o.bucket : std::max<std::int64_t>(1, train_length / 8);
  CheckZooBucket(bucket);
  Grid grid{.kind = "zoo",
            .version = GridVersion(),
            .inputs = {{"corpus", GridInput(kOp, o.corpus)}, {"text", GridInput(kOp, o.text)}},
            .settings = {{"schemes", scheme_names},
                         {"seeds", o.seeds},
                         {"lengths", lengths},
                         {"methods", names},
                         {"model", model},
                         {"train", train},
                         {"corpus", o.corpus},
                         {"text", o.text},
                         {"eval_bytes", o.eval_bytes},
                         {"stride_divisor", o.stride_divisor},
                         {"bucket", bucket}}};
  for (const PositionScheme& scheme : schemes) {
    const TinyLmGridScheme planned = PlanTinyLmGridScheme(o.flags.Config(scheme), o.train, methods, lengths);
    const TinyLmConfig& config = planned.config;
    CheckZooLengths(config, lengths);
    // The order of work: training, then each evaluation's forward passes.
    double flops =
        static_cast<double>(o.train.Steps(config)) * TinyLmTrainStepFlops(config, o.train.batch, train_length);
    for (const std::int64_t length : lengths) {
      // As the cell computes them: about eval_bytes / stride windows.
      const std::int64_t windows = 1 + (o.eval_bytes - length) / ZooStride(length, o.stride_divisor);
      flops += static_cast<double>(windows) * TinyLmTrainStepFlops(config, 1, length) / 3 * planned.evaluations;
    }
    const double rows = static_cast<double>(o.train.batch * train_length);
    const double activations =
        rows * static_cast<double>(config.layers * (8 * config.d_model + 2 * config.ffn_hidden + 2)) * 4;
    // The texts, the bytes the model trained on (the n-grams on them), and
    // the n-grams' counting, one fit at a time: two 8-byte keys a byte of
    // the corpus or of the trained bytes, then the tables.
    const auto seen_bytes = static_cast<double>(o.train.Steps(config) * o.train.batch * (train_length + 1));
    const double memory = 2 * activations + static_cast<double>(corpus_bytes + text_bytes) + seen_bytes +
                          32.0 * std::max(static_cast<double>(corpus_bytes), seen_bytes) + (256 << 20);
    const auto cell = [&](const TinyLmTrainOptions& train, const std::vector<std::int64_t>& cell_lengths,
                          const std::vector<std::string>& cell_methods, std::string label, double cell_flops) {
      return GridCell{.params = {{"scheme", PositionSchemeName(scheme)},
                                 {"model", ZooConfigJson(config)},
                                 {"train", ZooTrainJson(train)},
                                 {"lengths", cell_lengths},
                                 {"methods", cell_methods},
                                 {"eval_bytes", o.eval_bytes},
                                 {"windows", kZooWindows},
                                 {"stride_divisor", o.stride_divisor},
                                 {"bucket", bucket}},
                      .label = std::move(label),
                      .flops = cell_flops,
                      .memory_bytes = memory};
    };
    for (const std::int64_t seed : o.seeds) {
      TinyLmTrainOptions seeded = o.train;
      seeded.seed = seed;
      const std::string label = std::string(PositionSchemeName(scheme)) + " seed " + std::to_string(seed);
      AddGridEntry(grid, {{"scheme", PositionSchemeName(scheme)}, {"seed", seed}},
                   cell(seeded, lengths, planned.methods, label, flops));
      if (!o.half_budget) continue;
      // The twin: half the bytes (the same seed, schedule shape and
      // batches' start), scored at L alone, as trained.
      TinyLmTrainOptions half = seeded;
      half.tokens = o.train.tokens / 2;
      const std::int64_t windows_at_train_length =
          1 + (o.eval_bytes - train_length) / ZooStride(train_length, o.stride_divisor);
      const double half_flops =
          static_cast<double>(half.Steps(config)) * TinyLmTrainStepFlops(config, o.train.batch, train_length) +
          static_cast<double>(windows_at_train_length) * TinyLmTrainStepFlops(config, 1, train_length) / 3;
      AddGridEntry(grid, {{"scheme", PositionSchemeName(scheme)}, {"seed", seed}, {"budget", kZooHalfBudget}},
                   cell(half, {train_length}, {}, label + " half budget", half_flops));
    }
  }
  return grid;
}

void Run(const ZooOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  RequireOutputDirectory(kOp, "--out", o.out);
  const std::int64_t train_length = o.flags.model().train_length;
  Require(train_length >= 2, kOp, "--train-len", train_length,
          "must be >= 2 (a sequence of one byte has nothing to attend to)");
  Require(o.train.tokens > 0, kOp, "--tokens", o.train.tokens, "must be > 0 (the training budget in bytes a model)");
  if (o.half_budget) {
    // The twin's budget must be a step (TinyLmTrainOptions::Validate names --tokens).
    Require(o.train.tokens / 2 >= o.train.batch * train_length, kOp, "--tokens", o.train.tokens,
            "must be >= 2 steps of --batch x --train-len = " + std::to_string(2 * o.train.batch * train_length) +
                " bytes with --half-budget (its twin trains on half of it); or --no-half-budget");
  }
  CheckZooStrideDivisor(o.stride_divisor);
  Require(o.bucket >= 0, kOp, "--bucket", o.bucket, "must be >= 0 (0: L / 8)");
  ZooOptions sorted = o;
  sorted.seeds = SeedsOption(kOp, o.seeds);
  const std::vector<PositionScheme> schemes = SchemesOption(kOp, "--schemes", o.schemes, kDefaultSchemes);
  const std::vector<std::int64_t> lengths = TestLengthsOption(o.lengths, train_length);
  CheckZooLengths(o.flags.model(), lengths);
  RunGridAndReport(kOp, o.out, PlanGrid(sorted, schemes, lengths, o.methods), *o.executor, o.json, start);
}

}  // namespace

void AddZooCommand(CLI::App& app) {
  auto o = std::make_shared<ZooOptions>();
  o->train.tokens = kDefaultTokens;
  o->train.log_every = kZooLogEvery;
  CLI::App* cmd = app.add_subcommand(
      "zoo", "Train short, test long: every position scheme trained at one length, evaluated up to 16x past it");
  // Not split by CLI11, which drops empty names (",rope"): SchemeListOption
  // splits and refuses them.
  cmd->add_option(
      "--schemes", o->schemes,
      std::string("Schemes, comma-separated, or all (") + PositionSchemeList() + "; default: " + kDefaultSchemes + ")");
  cmd->add_option("--seeds", o->seeds, "Seeds (init and batches), comma-separated")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--tokens", o->train.tokens, "Training budget in bytes, per model")->capture_default_str();
  cmd->add_option("--lengths", o->lengths, "Evaluated lengths (default: 1, 2, 4, 8, 16 x L)")->delimiter(',');
  AddMethodsOption(*cmd, std::shared_ptr<std::vector<ContextExtension>>(o, &o->methods), kDefaultMethods,
                   "(RoPE models)");
  cmd->add_option("--corpus", o->corpus, "Training corpus (bytes)")->capture_default_str();
  cmd->add_option("--text", o->text, "Held-out text (bytes)")->capture_default_str();
  cmd->add_option("--eval-bytes", o->eval_bytes,
                  "Bytes scored at every length: the text's bytes 1..N, in sliding windows (at least every length)")
      ->capture_default_str();
  cmd->add_option("--stride-divisor", o->stride_divisor,
                  "The windows slide by length / K: every byte sees at least length - stride + 1 bytes, and costs "
                  "about K forward passes")
      ->capture_default_str();
  cmd->add_option("--bucket", o->bucket, "Positions per point of the loss curves (0: L / 8)")->capture_default_str();
  cmd->add_flag("--half-budget,!--no-half-budget", o->half_budget,
                "The convergence check: every model also trained with half the budget and scored at L (default on)");
  cmd->add_option("--out", o->out, "Grid directory (grid.json, cells/; zoo.md, zoo.json, zoo.png)")
      ->capture_default_str();
  o->flags.Add(*cmd);
  AddTinyLmTrainOptions(*cmd, o->train);
  AddExecutorOptions(*cmd, o->executor);
  cmd->add_flag("--json", o->json, "Print the JSON report");
  cmd->callback([o] {
    o->corpus = ResolveInput(kOp, "--corpus", o->corpus, kDefaultTrainCorpus);
    o->text = ResolveInput(kOp, "--text", o->text, kDefaultValidationText);
    Run(*o);
  });
}

}  // namespace posenc::cli
