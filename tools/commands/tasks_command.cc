// posenc tasks [--tasks T,...] [--schemes S,...] [--seeds N,...] [--train-len L]
//              [--tokens N] [--lengths N,...] [--methods M;...] [--sequences N]
//              [--depths D,...] [--out DIR] [--json]
//              [model and optimizer options of posenc train]
//              [--executor local|slurm ...]
//
// Train short, test long on tasks that need the far context
// (tiny_lm_tasks.h): each (scheme, task, seed) is a model trained at L on
// the task's sequences (the loss on the answers' bytes), then scored at 1x
// .. 16x L by exact match, a RoPE model also under every training-free
// method. Each model is a cell of a grid in DIR (grid.h, tasks_grid.cc): a
// rerun, or one that adds seeds, schemes or tasks, trains only what is
// missing; the tables (accuracy with 95% intervals over the seeds), the
// JSON and the pictures are merged from all cells at the end.
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "commands.h"
#include "grid/grid_executor.h"
#include "grid/tasks_grid.h"
#include "grid/zoo_grid.h"
#include "options/model_inputs.h"
#include "options/output_files.h"
#include "options/tiny_lm_options.h"
#include "posenc/context_extension.h"
#include "posenc/error.h"
#include "posenc/tiny_lm_eval.h"
#include "posenc/tiny_lm_tasks.h"
#include "posenc/tiny_lm_train.h"

namespace posenc::cli {
namespace {

constexpr const char* kOp = "tasks";

// The default model: small enough that the default grid (2 schemes x 4
// tasks x 3 seeds) fits in 20 minutes on 2 cores, large enough to solve
// copy and the needle within L. Four heads, not two: with two, T5 and ALiBi
// formed the recall circuit in one seed of three at any budget tried.
TinyLmConfig DefaultModel() {
  TinyLmConfig c;
  c.train_length = 32;
  c.d_model = 64;
  c.layers = 2;
  c.heads = 4;
  c.ffn_hidden = 256;
  return c;
}
constexpr std::int64_t kDefaultTokens = 2000000;
constexpr std::int64_t kDefaultBatch = 32;
constexpr double kDefaultLr = 3e-3;
constexpr std::int64_t kRecallBudgetFactor = 4;
constexpr const char* kDefaultSchemes = "rope,t5";
constexpr const char* kDefaultMethods = "linear;ntk;yarn;rerope;window;self-extend";

struct TasksOptions {
  std::vector<std::string> tasks;    // empty: all
  std::vector<std::string> schemes;  // empty: kDefaultSchemes; "all": every scheme
  std::vector<std::int64_t> seeds{0, 1, 2};
  std::vector<std::int64_t> lengths;      // empty: 1, 2, 4, 8, 16 x L
  std::vector<ContextExtension> methods;  // kDefaultMethods unless --methods
  std::int64_t sequences = 32;
  std::vector<double> depths{0, 0.25, 0.5, 0.75, 1};
  // A quarter of a recall model's rows from the previous-byte stream
  // (MakeTinyLmPreviousByteRow): without them no model leaves the plateau.
  double previous_share = 0.25;
  // A recall model's budget in bytes; 0: kRecallBudgetFactor x --tokens.
  // Its circuit forms later than the other tasks' heads, and whether it
  // forms depends on the seed: at L = 32 with 4 heads, T5 learned it in 2
  // seeds of 3 with 4 million bytes and in 3 of 3 with 8 million.
  std::int64_t recall_tokens = 0;
  std::string out = "build/tasks";
  bool json = false;
  TinyLmFlags flags{DefaultModel()};
  TinyLmTrainOptions train;
  std::shared_ptr<ExecutorOptions> executor = std::make_shared<ExecutorOptions>();
};

// What --recall-tokens 0 means, for its help and its error.
std::string RecallTokensDefault() { return "0: " + std::to_string(kRecallBudgetFactor) + " x --tokens"; }

std::int64_t RecallTokens(const TasksOptions& o) {
  return o.recall_tokens > 0 ? o.recall_tokens : kRecallBudgetFactor * o.train.tokens;
}

// The grid: every option, scheme config, method plan and length checked
// here, before a minute of training.
Grid PlanGrid(const TasksOptions& o, const std::vector<TinyLmTask>& tasks, const std::vector<PositionScheme>& schemes,
              const std::vector<std::int64_t>& lengths, const std::vector<ContextExtension>& methods) {
  const std::int64_t train_length = o.flags.model().train_length;
  std::vector<std::string> names, scheme_names, task_names;
  for (const ContextExtension& m : methods) names.push_back(FormatContextExtension(m));
  for (const PositionScheme& s : schemes) scheme_names.emplace_back(PositionSchemeName(s));
  for (const TinyLmTask t : tasks) task_names.emplace_back(TinyLmTaskName(t));
  nlohmann::json train = ZooTrainJson(o.train);
  train.erase("seed");
  Grid grid{.kind = "tasks",
            .version = GridVersion(),
            .inputs = nlohmann::json::object(),
            .settings = {{"tasks", task_names},
                         {"schemes", scheme_names},
                         {"seeds", o.seeds},
                         {"lengths", lengths},
                         {"methods", names},
                         {"model", ZooModelJson(o.flags.model())},
                         {"train", train},
                         {"sequences", o.sequences},
                         {"depths", o.depths},
                         {"recall_tokens", RecallTokens(o)},
                         {"previous_share", o.previous_share}}};
  for (const PositionScheme& scheme : schemes) {
    const TinyLmGridScheme planned = PlanTinyLmGridScheme(o.flags.Config(scheme), o.train, methods, lengths);
    const TinyLmConfig& config = planned.config;
    for (const TinyLmTask task : tasks) {
      CheckTinyLmTaskLength(task, train_length, kOp, "--train-len");
      TinyLmTrainOptions train_task = o.train;
      if (task == TinyLmTask::kRecall) train_task.tokens = RecallTokens(o);
      CheckTaskLengths(config, task, lengths);
      const bool needle = task == TinyLmTask::kNeedle;
      double flops =
          static_cast<double>(train_task.Steps(config)) * TinyLmTrainStepFlops(config, o.train.batch, train_length);
      for (const std::int64_t length : lengths) {
        const double sequences = static_cast<double>(o.sequences) * (needle ? static_cast<double>(o.depths.size()) : 1);
        flops += sequences * TinyLmTrainStepFlops(config, 1, length) / 3 * planned.evaluations;
      }
      const double activations = static_cast<double>(o.train.batch * train_length) *
                                 static_cast<double>(config.layers * (8 * config.d_model + 2 * config.ffn_hidden + 2)) *
                                 4;
      for (const std::int64_t seed : o.seeds) {
        TinyLmTrainOptions seeded = train_task;
        seeded.seed = seed;
        const std::string task_name(TinyLmTaskName(task));
        GridCell cell{
            .params = {{"scheme", PositionSchemeName(scheme)},
                       {"task", task_name},
                       {"model", ZooConfigJson(config)},
                       {"train", ZooTrainJson(seeded)},
                       {"lengths", lengths},
                       {"methods", planned.methods},
                       {"sequences", o.sequences},
                       {"depths", needle ? o.depths : std::vector<double>{}}},
            .label = std::string(PositionSchemeName(scheme)) + " " + task_name + " seed " + std::to_string(seed),
            .flops = flops,
            .memory_bytes = 2 * activations + (256 << 20)};
        // Only where rows are mixed in: the cells of the other tasks keep the
        // keys of grids written before the previous-byte stream existed.
        if (task == TinyLmTask::kRecall && o.previous_share > 0) cell.params["previous_share"] = o.previous_share;
        AddGridEntry(grid, {{"scheme", PositionSchemeName(scheme)}, {"task", task_name}, {"seed", seed}}, cell);
      }
    }
  }
  return grid;
}

void Run(const TasksOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  RequireOutputDirectory(kOp, "--out", o.out);
  const std::int64_t train_length = o.flags.model().train_length;
  Require(o.train.tokens > 0, kOp, "--tokens", o.train.tokens, "must be > 0 (the training budget in bytes a model)");
  Require(o.recall_tokens >= 0, kOp, "--recall-tokens", o.recall_tokens,
          "must be >= 0 (a recall model's budget in bytes; " + RecallTokensDefault() + ")");
  TasksOptions sorted = o;
  sorted.seeds = SeedsOption(kOp, o.seeds);
  CheckTaskSequences(o.sequences);
  CheckTaskDepths(o.depths);
  CheckPreviousShare(o.previous_share);
  std::vector<TinyLmTask> tasks;
  if (o.tasks.empty()) {
    tasks.assign(AllTinyLmTasks().begin(), AllTinyLmTasks().end());
  } else {
    for (const std::string& name : o.tasks) {
      const TinyLmTask task = ParseTinyLmTask(name, kOp, "--tasks");
      Require(std::find(tasks.begin(), tasks.end(), task) == tasks.end(), kOp, "--tasks", name, "is listed twice");
      tasks.push_back(task);
    }
  }
  const std::vector<PositionScheme> schemes = SchemesOption(kOp, "--schemes", o.schemes, kDefaultSchemes);
  for (const std::int64_t length : o.lengths) {
    Require(length >= 1, kOp, "--lengths", length, "must be >= 1 (bytes a sequence)");
  }
  const std::vector<std::int64_t> lengths = TestLengthsOption(o.lengths, train_length);
  RunGridAndReport(kOp, o.out, PlanGrid(sorted, tasks, schemes, lengths, o.methods), *o.executor, o.json, start);
}

}  // namespace

void AddTasksCommand(CLI::App& app) {
  auto o = std::make_shared<TasksOptions>();
  o->train.tokens = kDefaultTokens;
  o->train.batch = kDefaultBatch;
  o->train.lr = kDefaultLr;
  o->train.min_lr = kDefaultLr / 10;
  o->train.log_every = kZooLogEvery;
  CLI::App* cmd = app.add_subcommand(
      "tasks", "Train short, test long on tasks that need the far context: copy, recall, needle, even");
  cmd->add_option("--tasks", o->tasks,
                  std::string("Tasks, comma-separated (") + std::string(TinyLmTaskList()) + "; default: all)")
      ->delimiter(',');
  cmd->add_option(
      "--schemes", o->schemes,
      std::string("Schemes, comma-separated, or all (") + PositionSchemeList() + "; default: " + kDefaultSchemes + ")");
  cmd->add_option("--seeds", o->seeds, "Seeds (init and training sequences), comma-separated")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--tokens", o->train.tokens, "Training budget in bytes, per model")->capture_default_str();
  cmd->add_option("--recall-tokens", o->recall_tokens,
                  "Training budget in bytes of a recall model (default " + RecallTokensDefault() + ")")
      ->capture_default_str();
  cmd->add_option("--lengths", o->lengths, "Evaluated lengths (default: 1, 2, 4, 8, 16 x L)")->delimiter(',');
  AddMethodsOption(*cmd, std::shared_ptr<std::vector<ContextExtension>>(o, &o->methods), kDefaultMethods,
                   "(RoPE models)");
  cmd->add_option("--sequences", o->sequences, "Sequences scored a (task, length); the needle's a depth")
      ->capture_default_str();
  cmd->add_option("--depths", o->depths, "The needle's depths in [0, 1], comma-separated")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--previous-share", o->previous_share,
                  "Share of a recall model's training rows from the previous-byte stream (each byte's answer the "
                  "byte before it: the first head of an induction circuit); 0: recall's rows alone")
      ->capture_default_str();
  cmd->add_option("--out", o->out, "Grid directory (grid.json, cells/; tasks.md, tasks.json, tasks.png)")
      ->capture_default_str();
  o->flags.Add(*cmd);
  AddTinyLmTrainOptions(*cmd, o->train);
  AddExecutorOptions(*cmd, o->executor);
  cmd->add_flag("--json", o->json, "Print the JSON report");
  cmd->callback([o] { Run(*o); });
}

}  // namespace posenc::cli
