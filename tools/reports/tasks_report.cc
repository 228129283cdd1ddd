#include "reports/tasks_report.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>

#include "posenc/paired_comparison.h"
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

// Each seed's outcomes (in the order of r.seeds) of its model of `task`
// for `variant` at length index i; nullopt where that seed's model did not
// run there (a learned table past its rows, or no such cell).
using SeedRow = std::vector<std::optional<SeedOutcomes>>;

SeedRow BySeed(const TasksReport& r, const std::string& task, const std::string& variant, std::size_t i,
               std::optional<std::int64_t> depth_bin = std::nullopt) {
  SeedRow row(r.seeds.size());
  for (const TasksModel& m : r.models) {
    if (m.task != task) continue;
    const auto seed = std::find(r.seeds.begin(), r.seeds.end(), m.seed);
    if (seed == r.seeds.end()) continue;
    for (const TasksEvaluation& e : m.evaluations) {
      if (e.variant != variant || i >= e.lengths.size() || !e.lengths[i].loss) continue;
      const TasksLength& l = e.lengths[i];
      const SeedOutcomes o = depth_bin
                                 ? SeedOutcomes{.successes = l.depth_correct[static_cast<std::size_t>(*depth_bin)],
                                                .trials = l.depth_answers[static_cast<std::size_t>(*depth_bin)]}
                                 : SeedOutcomes{.successes = l.correct, .trials = l.answers};
      if (o.trials > 0) row[static_cast<std::size_t>(seed - r.seeds.begin())] = o;
    }
  }
  return row;
}

std::vector<SeedOutcomes> Present(const SeedRow& row) {
  std::vector<SeedOutcomes> seeds;
  for (const std::optional<SeedOutcomes>& o : row) {
    if (o) seeds.push_back(*o);
  }
  return seeds;
}

// The seeds are the units (rate_interval.h): each seed's accuracy, then
// the interval over the seeds.
std::optional<MeanInterval> Interval(const SeedRow& row) {
  const std::vector<SeedOutcomes> seeds = Present(row);
  if (seeds.empty()) return std::nullopt;
  return SeedRateInterval(seeds);
}

UnitValues Accuracies(const SeedRow& row) {
  UnitValues values(row.size());
  for (std::size_t s = 0; s < row.size(); ++s) {
    if (row[s]) values[s] = static_cast<double>(row[s]->successes) / static_cast<double>(row[s]->trials);
  }
  return values;
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

// Per length past L: the most accurate variant, and every other that the
// paired comparison over the seeds does not put below it (within noise of
// it: the data cannot rank them, nor order them among themselves).
std::string BestWithinNoiseLines(const TasksReport& r, const std::string& task) {
  std::string out =
      "\nBest past L, and the variants within noise of it (their paired difference over the seeds, a 95% t "
      "interval, holds 0; no order is drawn among them):";
  bool any = false;
  for (std::size_t i = 0; i < r.lengths.size(); ++i) {
    if (r.lengths[i] <= r.run.train_length) continue;
    std::vector<UnitValues> variants;
    for (const std::string& variant : r.variants) variants.push_back(Accuracies(BySeed(r, task, variant, i)));
    const bool ran = std::any_of(variants.begin(), variants.end(), [](const UnitValues& v) {
      return std::any_of(v.begin(), v.end(), [](const std::optional<double>& x) { return x.has_value(); });
    });
    if (!ran) continue;
    const BestWithinNoise best = FindBestWithinNoise(variants, {.range = ValueRange{0.0, 1.0}});
    std::string tied;
    for (const std::size_t v : best.WithinNoise()) tied += (tied.empty() ? "" : ", ") + r.variants[v];
    char line[160];
    std::snprintf(line, sizeof line, "\n- %lld: %s %.1f%%", static_cast<long long>(r.lengths[i]),
                  r.variants[best.best].c_str(), 100 * best.best_mean);
    out += line;
    out += tied.empty() ? std::string("; above every other beyond noise") : "; within noise: " + tied;
    any = true;
  }
  return any ? out + "\n" : std::string();
}

// A cell: the mean over the seeds and its interval, marked † where the
// seeds all agree (the interval is then the bound of equal units).
std::string Cell(const MeanInterval& ci) {
  char cell[64];
  std::snprintf(cell, sizeof cell, "%.1f [%.1f, %.1f]%s", 100 * ci.mean, 100 * ci.low, 100 * ci.high,
                ci.degenerate ? "†" : "");
  return cell;
}

// Each seed's accuracy (%), in the order of the seeds.
std::string SeedsCell(const SeedRow& row) {
  std::string cell;
  for (const std::optional<SeedOutcomes>& o : row) {
    if (!cell.empty()) cell += " / ";
    char value[16];
    if (o) {
      std::snprintf(value, sizeof value, "%.1f",
                    100 * static_cast<double>(o->successes) / static_cast<double>(o->trials));
    }
    cell += o ? value : "-";
  }
  return cell;
}

std::string TableHead(const TasksReport& r, const std::string& second) {
  std::string md = "\n| variant | " + second + " |";
  for (const std::int64_t length : r.lengths) md += " " + LengthLabel(length, r.run.train_length) + " |";
  md += "\n|---|---|";
  for (std::size_t i = 0; i < r.lengths.size(); ++i) md += "---|";
  return md + "\n";
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
      "Exact-match accuracy (%): each seed's model scored on its answers, then the mean over the seeds with its "
      "95% interval over the seeds (the seed is the unit: the answers of one model are not independent trials; "
      "Student's t with seeds - 1 degrees of freedom, within [0, 100]). †: the seeds all agree, and the interval "
      "is the exact bound that so few equal seeds allow (all n at x: the mean is at least x 0.025^(1/n), at most "
      "100 - (100 - x) 0.025^(1/n)), not certainty. Each seed's own accuracy follows each task's table. \"-\": "
      "the model cannot run at that length (a learned table past its rows). A method on a RoPE model runs only at "
      "test time.\n";
  for (const std::string& task : r.tasks) {
    md += "\n## " + task + "\n" + TableHead(r, "train loss");
    for (const std::string& variant : r.variants) {
      std::snprintf(line, sizeof line, "| %s | %.3f |", variant.c_str(), MeanFinalLoss(r, task, SchemeOf(variant)));
      md += line;
      for (std::size_t i = 0; i < r.lengths.size(); ++i) {
        const std::optional<MeanInterval> ci = Interval(BySeed(r, task, variant, i));
        md += " " + (ci ? Cell(*ci) : std::string("-")) + " |";
      }
      md += "\n";
    }
    std::string seeds;
    for (const std::int64_t seed : r.seeds) seeds += (seeds.empty() ? "" : " / ") + std::to_string(seed);
    md += "\nEach seed's accuracy (%), seeds " + seeds + ":\n" + TableHead(r, "seeds");
    for (const std::string& variant : r.variants) {
      md += "| " + variant + " | " + seeds + " |";
      for (std::size_t i = 0; i < r.lengths.size(); ++i) md += " " + SeedsCell(BySeed(r, task, variant, i)) + " |";
      md += "\n";
    }
    md += BestWithinNoiseLines(r, task);
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
        const SeedRow row = BySeed(r, task, variant, i);
        Json entry{{"length", r.lengths[i]}};
        if (const std::optional<MeanInterval> ci = Interval(row)) {
          entry["accuracy"] = ci->mean;  // the mean of the seeds' accuracies
          entry["low"] = ci->low;
          entry["high"] = ci->high;
          entry["degenerate"] = ci->degenerate;
          Json per_seed = Json::array();
          for (std::size_t s = 0; s < row.size(); ++s) {
            if (!row[s]) continue;
            per_seed.push_back(
                {{"seed", r.seeds[s]},
                 {"correct", row[s]->successes},
                 {"answers", row[s]->trials},
                 {"accuracy", static_cast<double>(row[s]->successes) / static_cast<double>(row[s]->trials)}});
          }
          entry["seeds"] = per_seed;
          Json depth = Json::array();
          for (std::int64_t b = 0; b < kTaskDepthBins; ++b) {
            const std::optional<MeanInterval> d = Interval(BySeed(r, task, variant, i, b));
            depth.push_back(d ? Json{{"accuracy", d->mean}, {"low", d->low}, {"high", d->high}} : Json(nullptr));
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
         {"interval",
          "95%, over the seeds: each seed's accuracy, Student's t with seeds - 1 degrees of freedom within [0, 1]; "
          "where the seeds all agree (degenerate), the exact bound of n equal seeds"},
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
        if (const std::optional<MeanInterval> ci = Interval(BySeed(r, task, variant, i))) {
          s.x.push_back(static_cast<double>(r.lengths[i]));
          s.y.push_back(100 * ci->mean);
        }
      }
      if (!s.x.empty()) p.series.push_back(std::move(s));
    }
    panels.push_back(std::move(p));
  }
  DrawLinePlotGrid(panels,
                   "Trained at L = " + std::to_string(r.run.train_length) + ", tested long (" +
                       std::to_string(r.seeds.size()) + " seeds' mean)",
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
        const std::optional<MeanInterval> ci = Interval(BySeed(r, "needle", variant, i, b));
        map.values.push_back(ci ? 100 * ci->mean : 0.0);
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
