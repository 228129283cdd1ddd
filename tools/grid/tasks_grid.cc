// The tasks grid kind: one cell is one scheme trained on one task with one
// seed (TrainTinyLm on MakeTinyLmTaskBatch), then evaluated on the task's
// sequences at every length: as trained, a learned table also past its
// rows by Su's hierarchical decomposition, a RoPE model also under every
// training-free method. The merge is tasks_report's tables, JSON and
// pictures.
//
// Cell parameters: the scheme, task, seed, model config and optimizer
// settings, the lengths, the methods (RoPE only), the sequences a length
// and the needle's depths. A method that is the model's own RoPE at a length
// (SameAsModelRope) reuses the as-trained numbers.
#include "grid/tasks_grid.h"

#include <chrono>
#include <cstdio>

#include "grid/grid_kind.h"
#include "grid/zoo_grid.h"
#include "posenc/context_extension.h"
#include "posenc/error.h"
#include "posenc/tiny_lm_eval.h"
#include "posenc/tiny_lm_train.h"
#include "reports/tasks_report.h"

namespace posenc::cli {
namespace {

using Json = nlohmann::json;
constexpr const char* kOp = "tasks";

struct TasksCellParams {
  std::string scheme;
  TinyLmTask task = TinyLmTask::kCopy;
  TinyLmConfig config;
  TinyLmTrainOptions train;
  std::vector<std::int64_t> lengths;
  std::vector<std::string> methods;  // RoPE only
  std::int64_t sequences = 0;
  std::vector<double> depths;  // the needle's; empty for the other tasks
  double previous_share = 0;   // the training rows from the previous-byte stream (recall's)
};

TasksCellParams ReadCellParams(const GridField& at, const Json& p) {
  TasksCellParams c{.scheme = at.String(p, "scheme"),
                    .config = ZooConfigFromJson(at.Child("model"), at.Object(p, "model")),
                    .train = ZooTrainFromJson(at.Child("train"), at.Object(p, "train")),
                    .lengths = at.Ints(p, "lengths"),
                    .methods = at.Strings(p, "methods"),
                    .sequences = at.Int(p, "sequences"),
                    .depths = at.Numbers(p, "depths"),
                    // Left out at 0 (TasksCellPreviousShare): a cell of another task.
                    .previous_share = p.contains("previous_share") ? at.Number(p, "previous_share") : 0.0};
  const std::string task = at.String(p, "task");
  at.Child("task").Check([&] { c.task = ParseTinyLmTask(task, kOp, "--tasks"); });
  at.Child("scheme").Check([&] {
    Require(c.scheme == PositionSchemeName(c.config.scheme), kOp, "scheme", c.scheme,
            "must be the model's scheme " + std::string(PositionSchemeName(c.config.scheme)));
  });
  at.Child("model").Check([&] { CheckTinyLmTaskLength(c.task, c.config.train_length, kOp, "--train-len"); });
  at.Child("train").Check([&] { c.train.Validate(c.config); });
  at.Child("lengths").Check([&] { CheckTaskLengths(c.config, c.task, c.lengths); });
  at.Child("sequences").Check([&] { CheckTaskSequences(c.sequences); });
  at.Child("previous_share").Check([&] { CheckPreviousShare(c.previous_share); });
  at.Child("depths").Check([&] {
    if (c.task == TinyLmTask::kNeedle) {
      CheckTaskDepths(c.depths);
    } else {
      Require(c.depths.empty(), kOp, "depths", Verbatim{std::to_string(c.depths.size()) + " depths"},
              "must be empty for the task " + task + " (depths place the needle)");
    }
  });
  for (std::size_t i = 0; i < c.methods.size(); ++i) {
    at.Child("methods").Child(std::to_string(i)).Check([&] {
      const ContextExtension method = ParseContextExtension(c.methods[i]);
      for (const std::int64_t length : c.lengths) PlanTinyLmExtension(c.config, method, length);
    });
  }
  return c;
}

TasksLength Evaluate(const TinyLmConfig& config, const TinyLmParams& params, std::int64_t length,
                     const TasksCellParams& p, const std::optional<ContextExtension>& method) {
  TasksLength out{.length = length,
                  .depth_answers = std::vector<std::int64_t>(kTaskDepthBins, 0),
                  .depth_correct = std::vector<std::int64_t>(kTaskDepthBins, 0)};
  out.error = MeasuredFailure(config, length, [&] {
    const TinyLmTaskEvalResult r =
        EvaluateTinyLmTask(config, params, p.task, length, p.sequences, kTaskEvalSeed, p.depths, method);
    out.loss = r.loss;
    out.seconds = r.seconds;
    out.answers = static_cast<std::int64_t>(r.outcomes.size());
    out.correct = r.Correct();
    for (const TinyLmTaskOutcome& o : r.outcomes) {
      const auto bin = std::min<std::int64_t>(kTaskDepthBins - 1, static_cast<std::int64_t>(o.depth * kTaskDepthBins));
      ++out.depth_answers[static_cast<std::size_t>(bin)];
      out.depth_correct[static_cast<std::size_t>(bin)] += o.correct ? 1 : 0;
    }
  });
  return out;
}

Json ComputeModel(const Grid& /*grid*/, const GridCell& cell) {
  // ReadGrid checked the parameters (Check): read again, they cannot fail.
  const TasksCellParams p = ReadCellParams({.file = "grid.json", .path = "params"}, cell.params);
  const auto start = std::chrono::steady_clock::now();
  const TinyLmConfig& config = p.config;
  const std::vector<TinyLmTask> tasks{p.task};
  std::printf("training %s\n", cell.label.c_str());
  std::int64_t next_report = 0;
  const TinyLmTrainResult trained = TrainTinyLm(
      config, p.train,
      [&](std::int64_t step) {
        return MakeTinyLmTaskBatch(tasks, config.train_length, p.train.batch, static_cast<std::uint64_t>(p.train.seed),
                                   step, p.previous_share);
      },
      [&](const TinyLmTrainProgress& s) {
        if (s.step < next_report && s.step != s.steps) return;
        next_report = s.step + std::max<std::int64_t>(1, s.steps / 5);
        std::printf("step %lld/%lld: answer loss %.4f, %.0f tokens/s\n", static_cast<long long>(s.step),
                    static_cast<long long>(s.steps), s.loss, s.tokens_per_s);
        std::fflush(stdout);
      });
  TasksModel model{.scheme = p.scheme,
                   .task = std::string(TinyLmTaskName(p.task)),
                   .seed = p.train.seed,
                   .params = TinyLmParameterCount(config),
                   .steps = trained.steps,
                   .tokens = trained.tokens,
                   .final_loss = trained.final_loss,
                   .train_seconds = trained.seconds};
  TasksEvaluation as_trained{.variant = p.scheme};
  for (const std::int64_t length : p.lengths) {
    as_trained.lengths.push_back(Evaluate(config, trained.params, length, p, std::nullopt));
  }
  model.evaluations.push_back(as_trained);
  for (auto& [name, entries] : EvaluateTinyLmVariants<TasksLength>(
           config, p.methods, p.lengths, as_trained.lengths,
           [&](const TinyLmConfig&c, const std::optional<ContextExtension>&method, std::int64_t length) {
             return Evaluate(c, trained.params, length, p, method);
           })) {
    model.evaluations.push_back({.variant = std::move(name), .lengths = std::move(entries)});
  }
  model.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return TasksModelJson(model);
}

std::string Summary(const Json& r) {
  const TasksModel m = TasksModelFromJson(r);
  char buf[64];
  std::snprintf(buf, sizeof buf, "answer loss %.3f;", m.final_loss);
  std::string line = buf;
  for (const TasksLength& l : m.evaluations.front().lengths) {
    if (l.answers == 0) {
      line += " " + std::to_string(l.length) + ": -";
      continue;
    }
    std::snprintf(buf, sizeof buf, " %lld: %.0f%%", static_cast<long long>(l.length),
                  100.0 * static_cast<double>(l.correct) / static_cast<double>(l.answers));
    line += buf;
  }
  return line;
}

TasksReport ReadSettings(const GridField& at, const Json& s) {
  TasksReport report{.tasks = at.Strings(s, "tasks"),
                     .seeds = at.Ints(s, "seeds"),
                     .lengths = at.Ints(s, "lengths"),
                     .run = ReadTinyLmRunSettings(at, s),
                     .sequences = at.Int(s, "sequences"),
                     .depths = at.Numbers(s, "depths")};
  // Grids written before the previous-byte stream trained recall as the others.
  report.recall_tokens = s.contains("recall_tokens") ? at.Int(s, "recall_tokens") : report.run.tokens;
  report.previous_share = s.contains("previous_share") ? at.Number(s, "previous_share") : 0.0;
  for (std::size_t i = 0; i < report.tasks.size(); ++i) {
    at.Child("tasks").Child(std::to_string(i)).Check([&] { ParseTinyLmTask(report.tasks[i], kOp, "--tasks"); });
  }
  at.Child("sequences").Check([&] { CheckTaskSequences(report.sequences); });
  at.Child("depths").Check([&] { CheckTaskDepths(report.depths); });
  at.Child("previous_share").Check([&] { CheckPreviousShare(report.previous_share); });
  report.variants = TinyLmReportVariants(at, s, kOp);
  return report;
}

void Check(const Grid& grid, const GridField& file) {
  ReadSettings(file.Child("settings"), grid.settings);
  for (const auto& [key, cell] : grid.cells)
    ReadCellParams(file.Child("cells").Child(key).Child("params"), cell.params);
  for (std::size_t i = 0; i < grid.entries.size(); ++i) {
    const GridField at = file.Child("entries").Child(std::to_string(i));
    at.String(grid.entries[i].row, "scheme");
    at.String(grid.entries[i].row, "task");
    at.Int(grid.entries[i].row, "seed");
  }
}

GridReport Merge(const Grid& grid, const std::map<std::string, Json>& results, const std::string& dir) {
  // ReadGrid checked the settings (Check): read again, they cannot fail.
  TasksReport report = ReadSettings({.file = "grid.json", .path = "settings"}, grid.settings);
  for (const GridEntry& entry : grid.entries) report.models.push_back(TasksModelFromJson(results.at(entry.key)));
  report.seconds = TotalCellSeconds(results);
  return WriteGridReport(grid, report.seconds, dir, "tasks", "models", TasksMarkdown(report), TasksJson(report),
                         [&](const std::string& png, OutputFiles& files) { DrawTasksPlots(report, png, files); });
}

}  // namespace

void CheckTaskLengths(const TinyLmConfig& config, TinyLmTask task, const std::vector<std::int64_t>& lengths) {
  Require(!lengths.empty(), kOp, "--lengths", Verbatim{"(none)"}, "must list at least one length");
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    Require(lengths[i] >= 1, kOp, "--lengths", lengths[i], "must be >= 1 (bytes a sequence)");
    CheckTinyLmTaskLength(task, lengths[i], kOp, "--lengths");
    Require(i == 0 || lengths[i] > lengths[i - 1], kOp, "--lengths", lengths[i],
            "must come after a shorter length (ascending, each once)");
  }
  CheckTinyLmReach(config, lengths.back(), kOp);
}

void CheckTaskSequences(std::int64_t sequences) {
  Require(sequences >= 1 && sequences <= (std::int64_t{1} << 20), kOp, "--sequences", sequences,
          "must be in [1, 2^20] (sequences scored a task and length)");
}

void CheckTaskDepths(const std::vector<double>& depths) {
  Require(!depths.empty(), kOp, "--depths", Verbatim{"(none)"}, "must list at least one depth");
  for (const double depth : depths) {
    Require(depth >= 0 && depth <= 1, kOp, "--depths", depth, "must be in [0, 1] (0: the start, 1: the end)");
  }
}

void CheckPreviousShare(double share) {
  Require(share >= 0 && share < 1, kOp, "--previous-share", share,
          "must be in [0, 1) (the share of a recall model's training rows from the previous-byte stream)");
}

const GridKind& TasksGridKind() {
  static const GridKind kind{
      .name = "tasks", .check = Check, .compute = ComputeModel, .summary = Summary, .merge = Merge};
  return kind;
}

}  // namespace posenc::cli
