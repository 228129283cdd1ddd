#include "reports/tasks_report.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>

#include "posenc/rate_interval.h"
#include "posenc/tiny_lm_tasks.h"
#include "reports/plot.h"

namespace posenc::cli {
namespace {

using Json = nlohmann::json;

Json LengthJson(const TasksLength& l) {
  Json j{{"length", l.length}, {"answers", l.answers}, {"correct", l.correct}, {"seconds", l.seconds}};
  if (!l.resolved.empty()) j["resolved"] = l.resolved;
  if (l.same_as_model) j["same_as_model"] = true;
  if (l.loss) j["loss"] = *l.loss;
  if (!l.error.empty()) j["error"] = l.error;
  j["depth_answers"] = l.depth_answers;
  j["depth_correct"] = l.depth_correct;
  return j;
}

TasksLength LengthFromJson(const Json& j) {
  TasksLength l{.length = j.at("length").get<std::int64_t>(),
                .resolved = j.value("resolved", std::string()),
                .same_as_model = j.value("same_as_model", false),
                .answers = j.at("answers").get<std::int64_t>(),
                .correct = j.at("correct").get<std::int64_t>(),
                .error = j.value("error", std::string()),
                .depth_answers = j.at("depth_answers").get<std::vector<std::int64_t>>(),
                .depth_correct = j.at("depth_correct").get<std::vector<std::int64_t>>(),
                .seconds = j.at("seconds").get<double>()};
  if (j.contains("loss")) l.loss = j.at("loss").get<double>();
  return l;
}

// The outcomes of every seed's model of `task` for `variant` at length
// index i, as the intervals take them; empty when no model ran there.
std::vector<SeedOutcomes> Outcomes(const TasksReport& r, const std::string& task, const std::string& variant,
                                   std::size_t i, std::optional<std::int64_t> depth_bin = std::nullopt) {
  std::vector<SeedOutcomes> seeds;
  for (const TasksModel& m : r.models) {
    if (m.task != task) continue;
    for (const TasksEvaluation& e : m.evaluations) {
      if (e.variant != variant || i >= e.lengths.size() || !e.lengths[i].loss) continue;
      const TasksLength& l = e.lengths[i];
      const SeedOutcomes o = depth_bin
                                 ? SeedOutcomes{.successes = l.depth_correct[static_cast<std::size_t>(*depth_bin)],
                                                .trials = l.depth_answers[static_cast<std::size_t>(*depth_bin)]}
                                 : SeedOutcomes{.successes = l.correct, .trials = l.answers};
      if (o.trials > 0) seeds.push_back(o);
    }
  }
  return seeds;
}

std::optional<RateInterval> Interval(const std::vector<SeedOutcomes>& seeds) {
  if (seeds.empty()) return std::nullopt;
  return SeedBootstrapInterval(seeds);
}

std::string LengthLabel(std::int64_t length, std::int64_t train_length) {
  char buf[48];
  if (length % train_length == 0) {
    std::snprintf(buf, sizeof buf, "%lld (%lldx)", static_cast<long long>(length),
                  static_cast<long long>(length / train_length));
  } else {
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(length));
  }
  return buf;
}

double MeanFinalLoss(const TasksReport& r, const std::string& task, const std::string& scheme) {
  double sum = 0;
  int count = 0;
  for (const TasksModel& m : r.models) {
    if (m.task != task || m.scheme != scheme) continue;
    sum += m.final_loss;
    ++count;
  }
  return count > 0 ? sum / count : 0.0;
}

std::string SchemeOf(const std::string& variant) { return variant.substr(0, variant.find('+')); }

// Per length past L: the most accurate variant, and every other whose
// interval reaches the best one's (within noise of it: the data cannot
// rank them).
std::string BestWithinNoise(const TasksReport& r, const std::string& task) {
  std::string out = "\nBest past L (and the variants within noise of it, their intervals overlapping):";
  bool any = false;
  for (std::size_t i = 0; i < r.lengths.size(); ++i) {
    if (r.lengths[i] <= r.run.train_length) continue;
    std::vector<std::pair<std::string, RateInterval>> rows;
    for (const std::string& variant : r.variants) {
      if (const std::optional<RateInterval> ci = Interval(Outcomes(r, task, variant, i)))
        rows.emplace_back(variant, *ci);
    }
    if (rows.empty()) continue;
    const auto best = std::max_element(rows.begin(), rows.end(),
                                       [](const auto& a, const auto& b) { return a.second.rate < b.second.rate; });
    std::string tied;
    for (const auto& [variant, ci] : rows) {
      if (variant != best->first && ci.high >= best->second.low) tied += (tied.empty() ? "" : ", ") + variant;
    }
    char line[160];
    std::snprintf(line, sizeof line, "\n- %lld: %s %.1f%%", static_cast<long long>(r.lengths[i]), best->first.c_str(),
                  100 * best->second.rate);
    out += line;
    out += tied.empty() ? std::string("; no other within noise") : "; within noise: " + tied;
    any = true;
  }
  return any ? out + "\n" : std::string();
}

}  // namespace

Json TasksModelJson(const TasksModel& m) {
  Json evaluations = Json::array();
  for (const TasksEvaluation& e : m.evaluations) {
    Json lengths = Json::array();
    for (const TasksLength& l : e.lengths) lengths.push_back(LengthJson(l));
    evaluations.push_back({{"variant", e.variant}, {"lengths", lengths}});
  }
  return {{"scheme", m.scheme},
          {"task", m.task},
          {"seed", m.seed},
          {"params", m.params},
          {"steps", m.steps},
          {"tokens", m.tokens},
          {"final_loss", m.final_loss},
          {"train_seconds", m.train_seconds},
          {"seconds", m.seconds},
          {"evaluations", evaluations}};
}

TasksModel TasksModelFromJson(const Json& j) {
  TasksModel m{.scheme = j.at("scheme").get<std::string>(),
               .task = j.at("task").get<std::string>(),
               .seed = j.at("seed").get<std::int64_t>(),
               .params = j.at("params").get<std::int64_t>(),
               .steps = j.at("steps").get<std::int64_t>(),
               .tokens = j.at("tokens").get<std::int64_t>(),
               .final_loss = j.at("final_loss").get<double>(),
               .train_seconds = j.at("train_seconds").get<double>(),
               .seconds = j.at("seconds").get<double>()};
  for (const Json& e : j.at("evaluations")) {
    TasksEvaluation evaluation{.variant = e.at("variant").get<std::string>()};
    for (const Json& l : e.at("lengths")) evaluation.lengths.push_back(LengthFromJson(l));
    m.evaluations.push_back(std::move(evaluation));
  }
  return m;
}

std::string TasksMarkdown(const TasksReport& r) {
  std::string md = "# posenc tasks: trained at L = " + std::to_string(r.run.train_length) + ", tested to " +
                   std::to_string(r.lengths.back()) + " bytes\n\n";
  char line[512];
  std::snprintf(line, sizeof line,
                "One model per (scheme, task, seed): d_model %lld, %lld layers, %lld heads, FFN %lld; %lld bytes of "
                "the task's sequences a model (batch %lld, lr %g), the loss on answer bytes only. Seeds: %zu. Each "
                "(task, length) is scored on %lld sequences (the needle: %lld at each of %zu depths), the same "
                "sequences for every model. Compute: %.0f s (%.1f min).\n\n",
                static_cast<long long>(r.run.d_model), static_cast<long long>(r.run.layers),
                static_cast<long long>(r.run.heads), static_cast<long long>(r.run.ffn_hidden),
                static_cast<long long>(r.run.tokens), static_cast<long long>(r.run.batch), r.run.lr, r.seeds.size(),
                static_cast<long long>(r.sequences), static_cast<long long>(r.sequences), r.depths.size(), r.seconds,
                r.seconds / 60);
  md += line;
  if (std::find(r.tasks.begin(), r.tasks.end(), TinyLmTaskName(TinyLmTask::kRecall)) != r.tasks.end()) {
    std::snprintf(line, sizeof line,
                  "A recall model trains on %lld bytes, %.0f%% of its rows from the previous-byte stream (random "
                  "letters, each prediction scored against the byte before its input: the first head of the "
                  "induction circuit recall needs).\n\n",
                  static_cast<long long>(r.recall_tokens), 100 * r.previous_share);
    md += line;
  }
  md += RandomizedPositionsSentence(r.run);
  md +=
      "Exact-match accuracy (%) of the answers, pooled over the seeds, with a 95% interval from a two-level "
      "bootstrap (seeds, then answers within a seed). \"-\": the model cannot run at that length (a learned "
      "table past its rows). A method on a RoPE model runs only at test time.\n";
  for (const std::string& task : r.tasks) {
    md += "\n## ";
    md += task;
    md += "\n\n| variant | train loss |";
    for (const std::int64_t length : r.lengths) {
      md += ' ';
      md += LengthLabel(length, r.run.train_length);
      md += " |";
    }
    md += "\n|---|---|";
    for (std::size_t i = 0; i < r.lengths.size(); ++i) md += "---|";
    md += "\n";
    for (const std::string& variant : r.variants) {
      std::snprintf(line, sizeof line, "| %s | %.3f |", variant.c_str(), MeanFinalLoss(r, task, SchemeOf(variant)));
      md += line;
      for (std::size_t i = 0; i < r.lengths.size(); ++i) {
        const std::optional<RateInterval> ci = Interval(Outcomes(r, task, variant, i));
        if (!ci) {
          md += " - |";
          continue;
        }
        std::snprintf(line, sizeof line, " %.1f [%.1f, %.1f] |", 100 * ci->rate, 100 * ci->low, 100 * ci->high);
        md += line;
      }
      md += "\n";
    }
    md += BestWithinNoise(r, task);
  }
  return md;
}

std::string TasksJson(const TasksReport& r) {
  Json tasks = Json::object();
  for (const std::string& task : r.tasks) {
    Json variants = Json::object();
    for (const std::string& variant : r.variants) {
      Json lengths = Json::array();
      for (std::size_t i = 0; i < r.lengths.size(); ++i) {
        const std::vector<SeedOutcomes> seeds = Outcomes(r, task, variant, i);
        Json entry{{"length", r.lengths[i]}};
        if (const std::optional<RateInterval> ci = Interval(seeds)) {
          entry["accuracy"] = ci->rate;
          entry["low"] = ci->low;
          entry["high"] = ci->high;
          Json per_seed = Json::array();
          for (const SeedOutcomes& s : seeds) per_seed.push_back({{"correct", s.successes}, {"answers", s.trials}});
          entry["seeds"] = per_seed;
          Json depth = Json::array();
          for (std::int64_t b = 0; b < kTaskDepthBins; ++b) {
            const std::optional<RateInterval> d = Interval(Outcomes(r, task, variant, i, b));
            depth.push_back(d ? Json{{"accuracy", d->rate}, {"low", d->low}, {"high", d->high}} : Json(nullptr));
          }
          entry["by_depth"] = depth;
        }
        lengths.push_back(entry);
      }
      variants[variant] = lengths;
    }
    tasks[task] = variants;
  }
  Json j{{"train_length", r.run.train_length},
         {"lengths", r.lengths},
         {"seeds", r.seeds},
         {"model", TinyLmModelJson(r.run)},
         {"train",
          {{"tokens", r.run.tokens},
           {"recall_tokens", r.recall_tokens},
           {"previous_share", r.previous_share},
           {"batch", r.run.batch},
           {"lr", r.run.lr}}},
         {"sequences", r.sequences},
         {"depths", r.depths},
         {"depth_bins", kTaskDepthBins},
         {"interval", "95%, two-level bootstrap: seeds, then answers within a seed"},
         {"seconds", r.seconds},
         {"tasks", tasks}};
  Json models = Json::array();
  for (const TasksModel& m : r.models) models.push_back(TasksModelJson(m));
  j["models"] = models;
  return j.dump(2) + "\n";
}

void DrawTasksPlots(const TasksReport& r, const std::string& png, OutputFiles& files) {
  std::vector<LinePlot> panels;
  for (const std::string& task : r.tasks) {
    LinePlot p{.title = task,
               .x_label = "length (bytes)",
               .y_label = "exact-match accuracy (%)",
               .log_x = true,
               .y_min = 0,
               .y_max = 100,
               .key_position = panels.empty() ? "outside right" : "off"};
    for (const std::string& variant : r.variants) {
      PlotSeries s{.title = variant,
                   .style = variant.find('+') == std::string::npos ? "linespoints lw 2" : "lines lw 1 dt 2"};
      for (std::size_t i = 0; i < r.lengths.size(); ++i) {
        if (const std::optional<RateInterval> ci = Interval(Outcomes(r, task, variant, i))) {
          s.x.push_back(static_cast<double>(r.lengths[i]));
          s.y.push_back(100 * ci->rate);
        }
      }
      if (!s.x.empty()) p.series.push_back(std::move(s));
    }
    panels.push_back(std::move(p));
  }
  DrawLinePlotGrid(panels,
                   "Trained at L = " + std::to_string(r.run.train_length) + ", tested long (" +
                       std::to_string(r.seeds.size()) + " seeds pooled)",
                   2, 760, 420, png, &files);

  // The needle by depth and length, one map a scheme as trained.
  if (std::find(r.tasks.begin(), r.tasks.end(), "needle") == r.tasks.end()) return;
  std::vector<Heatmap> maps;
  for (const std::string& variant : r.variants) {
    if (variant.find('+') != std::string::npos) continue;
    Heatmap map{.title = "needle: " + variant,
                .x_label = "length (bytes)",
                .y_label = "depth of the needle",
                .value_label = "accuracy (%)",
                .rows = kTaskDepthBins,
                .cols = static_cast<std::int64_t>(r.lengths.size()),
                .range_min = 0,
                .range_max = 100,
                .square_cells = false};
    for (std::int64_t b = 0; b < kTaskDepthBins; ++b) {
      char label[32];
      std::snprintf(label, sizeof label, "%.1f-%.1f", static_cast<double>(b) / kTaskDepthBins,
                    static_cast<double>(b + 1) / kTaskDepthBins);
      map.row_labels.emplace_back(label);
      for (std::size_t i = 0; i < r.lengths.size(); ++i) {
        const std::optional<RateInterval> ci = Interval(Outcomes(r, "needle", variant, i, b));
        map.values.push_back(ci ? 100 * ci->rate : 0.0);
      }
    }
    for (const std::int64_t length : r.lengths) map.col_labels.push_back(std::to_string(length));
    maps.push_back(std::move(map));
  }
  const std::string depth_png = (std::filesystem::path(png).parent_path() / "tasks-depth.png").string();
  DrawHeatmapGrid(maps, "Needle retrieval by depth and length (as trained)",
                  std::min<int>(3, static_cast<int>(maps.size())), depth_png, 420, 340, &files);
}

}  // namespace posenc::cli
