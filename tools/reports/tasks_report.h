// posenc tasks' results: one model's evaluations (a grid cell's result, as
// JSON and back) and the merged report over the seeds, as Markdown, JSON
// and pictures (accuracy against length per task; depth x length heat maps
// of the needle).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "options/output_files.h"
#include "reports/zoo_report.h"

namespace posenc::cli {

// Answers are counted in bins of their depth (TinyLmTaskAnswer::depth):
// bin b holds depths in [b / kTaskDepthBins, (b + 1) / kTaskDepthBins), the
// last one 1 too.
inline constexpr std::int64_t kTaskDepthBins = 5;

struct TasksLength {
  std::int64_t length = 0;
  std::string resolved;        // the method with its parameters at this length; "" as trained
  bool same_as_model = false;  // the method is the model's own RoPE here: the as-trained numbers
  std::int64_t answers = 0, correct = 0;
  std::optional<double> loss;  // nats per answer byte; none: the model cannot run at this length
  std::string error;           // why not (a learned table's last row)
  std::vector<std::int64_t> depth_answers, depth_correct;  // [kTaskDepthBins]
  double seconds = 0;
};

struct TasksEvaluation {
  std::string variant;  // "rope", "rope+yarn", "learned+hierarchical"
  std::vector<TasksLength> lengths;
};

struct TasksModel {
  std::string scheme, task;
  std::int64_t seed = 0, params = 0, steps = 0, tokens = 0;
  double final_loss = 0, train_seconds = 0, seconds = 0;
  std::vector<TasksEvaluation> evaluations;  // the as-trained one first
};

nlohmann::json TasksModelJson(const TasksModel& model);
TasksModel TasksModelFromJson(const nlohmann::json& json);

struct TasksReport {
  std::vector<std::string> tasks;
  std::vector<std::string> variants;  // table rows, in order
  std::vector<std::int64_t> seeds;
  std::vector<std::int64_t> lengths;  // ascending
  TinyLmRunSettings run;
  std::int64_t sequences = 0;      // evaluated a (task, length); the needle's a depth
  std::vector<double> depths;      // the needle's
  std::int64_t recall_tokens = 0;  // a recall model's budget in bytes
  double previous_share = 0;       // of a recall model's rows, from the previous-byte stream
  std::vector<TasksModel> models;
  double seconds = 0;  // compute, all cells
};

std::string TasksMarkdown(const TasksReport& report);
std::string TasksJson(const TasksReport& report);
// tasks.png (accuracy against length, a panel a task) at `png`, and beside
// it tasks-depth.png (the needle's depth x length heat maps, a panel a
// scheme as trained), both joining `files`.
void DrawTasksPlots(const TasksReport& report, const std::string& png, OutputFiles& files);

}  // namespace posenc::cli
