// posenc passkey [--lengths L,...] [--trials N] [--seed S] [--depths D,...] [--methods M;...]
//                [--max-new-tokens T] [--out DIR] [--model FILE] [--json]
//                [--executor local|slurm ...]
//
// Passkey retrieval (include/posenc/passkey.h) over a grid: every method at
// every length on the same N independent trials, each its own filler, key
// and depth drawn from --seed (DrawPasskeyTrial), so that methods compare
// paired. With --depths, the fixed-depth design of the first grids instead:
// N keys at each depth in the one published filler (not independent trials:
// a look by depth, not a rate). Each trial is a cell of a grid in DIR
// (grid.h): a rerun, or a run that adds methods or lengths, computes only
// what is missing; the report is merged from all cells at the end.
#include <algorithm>
#include <cstdio>
#include <optional>

#include "commands.h"
#include "grid/grid_executor.h"
#include "options/model_inputs.h"
#include "options/output_files.h"
#include "grid/passkey_grid.h"
#include "posenc/context_extension.h"
#include "posenc/error.h"
#include "posenc/input_file.h"
#include "posenc/passkey.h"

namespace posenc::cli {
namespace {

constexpr const char* kOp = "passkey";
// The model as trained beside three methods of different kinds: a frequency
// change, a distance map and a mask.
constexpr const char* kDefaultMethods = "none;yarn;self-extend;lambda";

// Independent trials per length by default: the fewest the results' rule
// (docs/results/README.md) takes for a rate.
constexpr std::int64_t kDefaultTrials = 12;

struct PasskeyOptions {
  std::string model{kDefaultModel.path};
  std::vector<std::int64_t> lengths{4096, 10240};
  std::vector<double> depths;             // empty: independent trials; else the fixed-depth design
  std::optional<std::int64_t> trials;     // kDefaultTrials, or 1 key a depth with --depths
  std::vector<ContextExtension> methods;  // kDefaultMethods unless --methods
  std::int64_t seed = 0;                  // >= 0 (an unsigned option took -1 as 2^64 - 1)
  std::int64_t max_new_tokens = 12;
  std::string out = "build/passkey";
  bool json = false;
  std::shared_ptr<ExecutorOptions> executor = std::make_shared<ExecutorOptions>();
};

// One trial of the grid: its depth, and whether it is an independent one.
struct TrialPlan {
  double depth = 0;
  std::int64_t trial = 0;
  bool independent = false;
};

// The trials at every length, the same for every method: the independent
// design's draws, or every depth x trials keys.
std::vector<TrialPlan> PlanTrials(std::uint64_t seed, std::int64_t trials, const std::vector<double>& depths) {
  std::vector<TrialPlan> plans;
  if (depths.empty()) {
    for (std::int64_t trial = 0; trial < trials; ++trial) {
      plans.push_back({.depth = DrawPasskeyTrial(seed, trial).depth, .trial = trial, .independent = true});
    }
  }
  for (const double depth : depths) {
    for (std::int64_t trial = 0; trial < trials; ++trial) plans.push_back({.depth = depth, .trial = trial});
  }
  return plans;
}

// The grid: every plan and prompt is made here, before any trial runs, so a
// method that cannot work at a length, or a length too short for the
// prompt, fails at once. A method that is the model's own RoPE at a length
// asks for `none`'s cell.
Grid PlanGrid(const PasskeyOptions& o, std::int64_t trials, const std::vector<std::int64_t>& lengths,
              const std::vector<double>& depths, const std::vector<ContextExtension>& methods) {
  const LoadedModel loaded = LoadModel(o.model);
  const DecoderModel& model = loaded.model;
  const DecoderHyperparams& hp = model.hparams();
  std::vector<std::string> names;
  names.reserve(methods.size());
  for (const auto& m : methods) names.push_back(FormatContextExtension(m));
  Grid grid{.kind = "passkey",
            .version = GridVersion(),
            .inputs = {{"model", GridInput(kOp, o.model)}},
            .settings = {{"model", o.model},
                         {"train_length", hp.context_length},
                         {"seed", o.seed},
                         {"max_new_tokens", o.max_new_tokens},
                         {"methods", names},
                         {"lengths", lengths},
                         {"trials", trials}}};
  if (depths.empty()) {
    grid.settings["design"] = kPasskeyIndependent;
  } else {
    grid.settings["depths"] = depths;
  }
  const std::vector<TrialPlan> plans = PlanTrials(static_cast<std::uint64_t>(o.seed), trials, depths);
  for (const auto length : lengths) {
    const GridCell cost{.flops = model.ForwardFlops(length),
                        .memory_bytes = model.WeightBytes() + model.ActivationBytes(length) + model.CacheBytes(length)};
    // Before the prompt is made: tokenizing 2^24 tokens of filler takes minutes.
    RequireFitsInMemory(kOp, "--lengths", length, "a trial (the weights, the activations and the key/value cache)",
                        cost.memory_bytes / sizeof(float), sizeof(float));
    MakePasskeyPrompt(loaded.tokenizer, length, 0.5, PasskeyKey(static_cast<std::uint64_t>(o.seed), 0),
                      o.max_new_tokens);
    for (std::size_t m = 0; m < methods.size(); ++m) {
      const ExtensionPlan plan = PlanModelExtension(methods[m], hp, length);
      const bool same = SameAsModelRope(plan, hp.rope, length);
      const std::string resolved = FormatContextExtension(plan.resolved), computed = same ? "none" : resolved;
      for (const TrialPlan& t : plans) {
        GridCell cell = cost;
        // The fixed-depth cells' parameters as they were: the committed grids keep their keys.
        cell.params = {{"method", computed}, {"length", length}, {"depth", t.depth},
                       {"trial", t.trial},   {"seed", o.seed},   {"max_new_tokens", o.max_new_tokens}};
        if (t.independent) cell.params["design"] = kPasskeyIndependent;
        char label[160];
        std::snprintf(label, sizeof label, "L %lld depth %.2f trial %lld %s", static_cast<long long>(length), t.depth,
                      static_cast<long long>(t.trial), computed.c_str());
        cell.label = label;
        AddGridEntry(grid,
                     {{"method", names[m]},
                      {"resolved", resolved},
                      {"same_as_none", same},
                      {"length", length},
                      {"depth", t.depth},
                      {"trial", t.trial}},
                     cell);
      }
    }
  }
  return grid;
}

void Run(const PasskeyOptions& o) {
  RequireOutputDirectory(kOp, "--out", o.out);
  CheckPasskeySeed(o.seed);
  for (const std::int64_t length : o.lengths) CheckPasskeyLength(length);
  for (const double depth : o.depths) CheckPasskeyDepth(depth);
  const std::int64_t trials = o.trials.value_or(o.depths.empty() ? kDefaultTrials : 1);
  CheckPasskeyTrials(trials);
  CheckPasskeyMaxNewTokens(o.max_new_tokens);
  std::vector<std::int64_t> lengths = o.lengths;
  std::vector<double> depths = o.depths;
  std::sort(lengths.begin(), lengths.end());
  lengths.erase(std::unique(lengths.begin(), lengths.end()), lengths.end());
  std::sort(depths.begin(), depths.end());
  depths.erase(std::unique(depths.begin(), depths.end()), depths.end());
  const Grid grid = PlanGrid(o, trials, lengths, depths, o.methods);
  GridReport report;
  if (!RunGrid(o.out, grid, *o.executor, &report)) return;
  PrintGridReport(report, o.json);
}

}  // namespace

void AddPasskeyCommand(CLI::App& app) {
  auto o = std::make_shared<PasskeyOptions>();
  CLI::App* cmd = app.add_subcommand(
      "passkey", "Passkey retrieval past the training length: a key hidden in filler, asked for at the end");
  AddModelOption(*cmd, o->model);
  cmd->add_option("--lengths", o->lengths, "Prompt lengths in tokens, comma-separated")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--trials", o->trials,
                  "Independent trials per length, 1 to 1000 (default 12), each its own filler (the landmark "
                  "sentences in an order of its own), key and depth (uniform in [0, 1]); the same trials for every "
                  "method. With --depths: keys per depth (default 1)");
  cmd->add_option("--depths", o->depths,
                  "The fixed-depth design instead (the first grids'): these depths in [0, 1], comma-separated, "
                  "--trials keys each, all in the one published filler; not independent trials")
      ->delimiter(',');
  AddMethodsOption(*cmd, std::shared_ptr<std::vector<ContextExtension>>(o, &o->methods), kDefaultMethods, "");
  cmd->add_option("--seed", o->seed, "Seed of the trials (their keys, depths and fillers)")->capture_default_str();
  cmd->add_option("--max-new-tokens", o->max_new_tokens, "Tokens generated per trial, 1 to 256")->capture_default_str();
  cmd->add_option("--out", o->out, "Grid directory (grid.json, cells/; passkey.md, passkey.json, passkey.png)")
      ->capture_default_str();
  AddExecutorOptions(*cmd, o->executor);
  cmd->add_flag("--json", o->json, "Print the JSON report");
  cmd->callback([o] {
    o->model = ResolveInput(kOp, "--model", o->model, kDefaultModel);
    Run(*o);
  });
}

}  // namespace posenc::cli
