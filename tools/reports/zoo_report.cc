#include "reports/zoo_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>

#include "reports/plot.h"
#include "posenc/error.h"

namespace posenc::cli {
namespace {

using Json = nlohmann::json;
constexpr const char* kOp = "zoo";

// A variant at a length over the seeds.
struct Spread {
  std::vector<double> values;  // one per seed that ran (in seed order)
  std::string error;           // every seed failed: the first error
  std::string resolved;        // the method's form at this length (seeds agree)
  double Mean() const {
    double sum = 0;
    for (const double v : values) sum += v;
    return sum / static_cast<double>(values.size());
  }
  double HalfRange() const {
    const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
    return (*hi - *lo) / 2;
  }
};

const ZooEvaluation* FindEvaluation(const ZooModel& model, const std::string& variant) {
  for (const ZooEvaluation& e : model.evaluations) {
    if (e.variant == variant) return &e;
  }
  return nullptr;
}

const ZooLength* FindLength(const ZooEvaluation& evaluation, std::int64_t length) {
  for (const ZooLength& l : evaluation.lengths) {
    if (l.length == length) return &l;
  }
  return nullptr;
}

Spread SpreadOf(const ZooReport& r, const std::string& variant, std::int64_t length) {
  Spread s;
  for (const ZooModel& m : r.models) {
    const ZooEvaluation* e = FindEvaluation(m, variant);
    const ZooLength* l = e ? FindLength(*e, length) : nullptr;
    if (l == nullptr) continue;
    s.resolved = l->resolved;
    if (l->loss) {
      s.values.push_back(*l->loss);
    } else if (s.error.empty()) {
      s.error = l->error;
    }
  }
  return s;
}

// The mean position curve of a variant at a length over the seeds that ran.
std::vector<double> MeanCurve(const ZooReport& r, const std::string& variant, std::int64_t length) {
  std::vector<double> sum;
  int count = 0;
  for (const ZooModel& m : r.models) {
    const ZooEvaluation* e = FindEvaluation(m, variant);
    const ZooLength* l = e ? FindLength(*e, length) : nullptr;
    if (l == nullptr || !l->loss) continue;
    if (sum.empty()) sum.assign(l->position_loss.size(), 0.0);
    for (std::size_t i = 0; i < sum.size() && i < l->position_loss.size(); ++i) sum[i] += l->position_loss[i];
    ++count;
  }
  for (double& v : sum) v /= count;
  return sum;
}

bool IsRopeMethod(const std::string& variant) { return variant.starts_with("rope+"); }
bool InMethodTable(const std::string& variant) { return variant == "rope" || IsRopeMethod(variant); }

std::string Row(const std::string& variant) {
  if (variant == "learned") return "learned (no rows past L)";
  if (variant == "learned+hierarchical") return "learned + hierarchical (Su)";
  if (variant == "rope") return "rope (as trained)";
  if (IsRopeMethod(variant)) return "rope + " + variant.substr(5);
  return variant;
}

std::string Number(double v, const char* format = "%.3f") {
  char text[32];
  std::snprintf(text, sizeof text, format, v);
  return text;
}

std::string LengthHeader(const ZooReport& r, std::int64_t length) {
  const double factor = static_cast<double>(length) / static_cast<double>(r.train_length);
  return std::to_string(length) + " (" + Number(factor, "%g") + "×)";
}

std::string Table(const ZooReport& r, bool methods) {
  std::string md = methods ? "| method |" : "| encoding |";
  std::string rule = "|---|";
  for (const std::int64_t length : r.lengths) {
    md += " " + LengthHeader(r, length) + " |";
    rule += "---|";
  }
  if (methods) {
    md += " at " + std::to_string(r.lengths.back()) + " |";
    rule += "---|";
  }
  md += "\n" + rule + "\n";
  for (const std::string& variant : r.variants) {
    if (InMethodTable(variant) != methods && variant != "rope") continue;
    md += "| " + Row(variant) + " |";
    std::string longest;
    for (const std::int64_t length : r.lengths) {
      const Spread s = SpreadOf(r, variant, length);
      longest = s.resolved;
      if (s.values.empty()) {
        md += s.error.empty() ? " — |" : " no rows |";
      } else {
        md.append(" ").append(Number(s.Mean()));
        if (s.values.size() > 1) md.append(" ±").append(Number(s.HalfRange()));
        md.append(" |");
      }
    }
    if (methods) md += " " + (longest.empty() ? std::string("—") : "`" + longest + "`") + " |";
    md += "\n";
  }
  return md;
}

std::string Joined(const std::vector<std::int64_t>& values) {
  std::string text;
  for (const std::int64_t v : values) text += (text.empty() ? "" : ", ") + std::to_string(v);
  return text;
}

}  // namespace

Json ZooModelJson(const ZooModel& m) {
  Json evaluations = Json::array();
  for (const ZooEvaluation& e : m.evaluations) {
    Json lengths = Json::array();
    for (const ZooLength& l : e.lengths) {
      Json row{{"length", l.length},
               {"resolved", l.resolved},
               {"same_as_model", l.same_as_model},
               {"windows", l.windows},
               {"seconds", l.seconds}};
      row["loss"] = l.loss ? Json(*l.loss) : Json(nullptr);
      if (!l.error.empty()) row["error"] = l.error;
      row["position_loss"] = l.position_loss;
      lengths.push_back(std::move(row));
    }
    evaluations.push_back({{"variant", e.variant}, {"lengths", std::move(lengths)}});
  }
  return {{"scheme", m.scheme},
          {"seed", m.seed},
          {"params", m.params},
          {"steps", m.steps},
          {"tokens", m.tokens},
          {"final_loss", m.final_loss},
          {"train_seconds", m.train_seconds},
          {"tokens_per_s", m.tokens_per_s},
          {"seconds", m.seconds},
          {"evaluations", std::move(evaluations)}};
}

ZooModel ZooModelFromJson(const Json& j) {
  try {
    ZooModel m{.scheme = j.at("scheme").get<std::string>(),
               .seed = j.at("seed").get<std::int64_t>(),
               .params = j.at("params").get<std::int64_t>(),
               .steps = j.at("steps").get<std::int64_t>(),
               .tokens = j.at("tokens").get<std::int64_t>(),
               .final_loss = j.at("final_loss").get<double>(),
               .train_seconds = j.at("train_seconds").get<double>(),
               .tokens_per_s = j.at("tokens_per_s").get<double>(),
               .seconds = j.at("seconds").get<double>()};
    for (const Json& e : j.at("evaluations")) {
      ZooEvaluation evaluation{.variant = e.at("variant").get<std::string>()};
      for (const Json& l : e.at("lengths")) {
        ZooLength length{.length = l.at("length").get<std::int64_t>(),
                         .resolved = l.at("resolved").get<std::string>(),
                         .same_as_model = l.at("same_as_model").get<bool>(),
                         .windows = l.at("windows").get<std::int64_t>(),
                         .position_loss = l.at("position_loss").get<std::vector<double>>(),
                         .seconds = l.at("seconds").get<double>()};
        if (!l.at("loss").is_null()) length.loss = l.at("loss").get<double>();
        length.error = l.value("error", std::string());
        evaluation.lengths.push_back(std::move(length));
      }
      m.evaluations.push_back(std::move(evaluation));
    }
    return m;
  } catch (const Json::exception& e) {
    ThrowError(kOp, "cell", j.dump().substr(0, 80), std::string("is not a zoo model: ") + e.what());
  }
}

std::string ZooMarkdown(const ZooReport& r) {
  const std::int64_t params = r.models.empty() ? 0 : r.models.front().params;
  double train_seconds = 0;
  for (const ZooModel& m : r.models) train_seconds += m.train_seconds;
  std::string md = "## Train short, test long: every encoding trained at L = " + std::to_string(r.train_length) +
                   " bytes, tested to " + std::to_string(r.lengths.back()) + "\n\n";
  md += "Byte-level decoder (d " + std::to_string(r.d_model) + ", " + std::to_string(r.layers) + " layers, " +
        std::to_string(r.heads) + " heads, MLP " + std::to_string(r.ffn_hidden) + "; about " +
        Number(static_cast<double>(params) / 1e6, "%.2f") + " M parameters), trained on " + std::to_string(r.tokens) +
        " bytes of `" + std::filesystem::path(r.corpus).filename().string() + "` (batches of " +
        std::to_string(r.batch) + " × " + std::to_string(r.train_length) + ", AdamW, peak lr " + Number(r.lr, "%g") +
        ", warmup + cosine), seeds " + Joined(r.seeds) + ". Held out: `" +
        std::filesystem::path(r.text).filename().string() + "`, the same " + std::to_string(r.eval_bytes) +
        " bytes (its bytes 1 to " + std::to_string(r.eval_bytes) +
        ") predicted at every length, in windows of the length side by side. Byte-unigram baseline: " +
        Number(r.unigram_corpus) + " nats/byte (the training corpus's byte frequencies; " + Number(r.unigram_text) +
        " with the text's own).\n\n";
  md += "Held-out loss in nats per byte (lower is better), the mean over the seeds ± half their range:\n\n";
  md += Table(r, false);
  if (std::any_of(r.variants.begin(), r.variants.end(), IsRopeMethod)) {  // a zoo with a RoPE model
    md += "\n### RoPE past its training length, training-free\n\n";
    md +=
        "The RoPE models above, evaluated under each method of `posenc ppl` (defaults from L and the length; the "
        "last column is the method with its parameters at the longest length):\n\n";
    md += Table(r, true);
  }
  md += "\nCompute: " + std::to_string(r.models.size()) + " models, " + Number(r.seconds / 60, "%.1f") +
        " min in all (training " + Number(train_seconds / 60, "%.1f") + " min).\n";
  return md;
}

std::string ZooJson(const ZooReport& r) {
  Json variants = Json::array();
  for (const std::string& variant : r.variants) {
    Json lengths = Json::array();
    for (const std::int64_t length : r.lengths) {
      const Spread s = SpreadOf(r, variant, length);
      Json row{{"length", length}, {"resolved", s.resolved}, {"losses", s.values}};
      if (s.values.empty()) {
        row["mean"] = nullptr;
        row["error"] = s.error;
      } else {
        row["mean"] = s.Mean();
        row["half_range"] = s.HalfRange();
      }
      lengths.push_back(std::move(row));
    }
    variants.push_back({{"variant", variant},
                        {"lengths", std::move(lengths)},
                        {"position_loss_at_longest", MeanCurve(r, variant, r.lengths.back())}});
  }
  Json models = Json::array();
  for (const ZooModel& m : r.models) models.push_back(ZooModelJson(m));
  const Json json{{"train_length", r.train_length},
                  {"lengths", r.lengths},
                  {"seeds", r.seeds},
                  {"tokens", r.tokens},
                  {"batch", r.batch},
                  {"lr", r.lr},
                  {"model", {{"d_model", r.d_model}, {"layers", r.layers}, {"heads", r.heads}, {"ffn", r.ffn_hidden}}},
                  {"corpus", r.corpus},
                  {"text", r.text},
                  {"eval_bytes", r.eval_bytes},
                  {"bucket", r.bucket},
                  {"unigram", {{"corpus_frequencies", r.unigram_corpus}, {"text_frequencies", r.unigram_text}}},
                  {"seconds", r.seconds},
                  {"variants", std::move(variants)},
                  {"models", std::move(models)}};
  return json.dump(2) + "\n";
}

void DrawZooPlot(const ZooReport& r, const std::string& png_path, OutputFiles& outputs) {
  LinePlot by_length[2], by_position[2];
  const std::int64_t longest = r.lengths.back();
  double low[2] = {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()};
  double high[2] = {0, 0};
  for (const std::string& variant : r.variants) {
    const bool method = IsRopeMethod(variant);
    for (const int panel : {0, 1}) {
      if (panel == 0 && method) continue;
      if (panel == 1 && !InMethodTable(variant)) continue;
      PlotSeries line{Row(variant), {}, {}, false, "linespoints lw 2 pt 7 ps 0.6"};
      for (const std::int64_t length : r.lengths) {
        const Spread s = SpreadOf(r, variant, length);
        if (s.values.empty()) continue;
        line.x.push_back(static_cast<double>(length));
        line.y.push_back(s.Mean());
      }
      if (!line.x.empty()) by_length[panel].series.push_back(std::move(line));
      PlotSeries curve{Row(variant), {}, {}, false, "lines lw 2"};
      const std::vector<double> mean = MeanCurve(r, variant, longest);
      for (std::size_t i = 0; i < mean.size(); ++i) {
        curve.x.push_back((static_cast<double>(i) + 0.5) * static_cast<double>(r.bucket));
        curve.y.push_back(mean[i]);
        low[panel] = std::min(low[panel], mean[i]);
        high[panel] = std::max(high[panel], mean[i]);
      }
      if (!curve.x.empty()) by_position[panel].series.push_back(std::move(curve));
    }
  }
  const auto train = static_cast<double>(r.train_length);
  const char* names[2] = {"every encoding", "RoPE + training-free methods"};
  for (const int panel : {0, 1}) {
    LinePlot& a = by_length[panel];
    a.title = std::string(panel == 0 ? "(a) " : "(b) ") + names[panel] + ": held-out loss against length";
    a.x_label = "evaluated length (bytes; trained at " + std::to_string(r.train_length) + ")";
    a.y_label = "nats per byte";
    a.log_x = true;
    a.key_position = "outside right";
    a.reference_lines = {{r.unigram_corpus, "byte-unigram baseline"}};
    LinePlot& c = by_position[panel];
    c.title = std::string(panel == 0 ? "(c) " : "(d) ") + names[panel] + ": loss against position at " +
              std::to_string(longest) + " bytes";
    c.x_label = "byte position (mean per " + std::to_string(r.bucket) + ")";
    c.y_label = "nats per byte";
    c.log_x = true;
    c.key_position = "outside right";
    if (high[panel] > 0) {
      c.series.push_back(
          {"training length", {train, train}, {low[panel], high[panel]}, false, "lines dt 2 lw 1 lc rgb 'black'"});
    }
  }
  const std::string title = "Train short, test long: byte-level models trained at " + std::to_string(r.train_length) +
                            " bytes (mean of " + std::to_string(r.seeds.size()) + " seeds)";
  // Without a RoPE model (a zoo of other schemes) the methods' panels
  // would be empty, which gnuplot refuses: the two panels of every encoding.
  if (by_length[1].series.empty()) {
    DrawLinePlotGrid({by_length[0], by_position[0]}, title, 2, 820, 460, png_path, &outputs);
    return;
  }
  DrawLinePlotGrid({by_length[0], by_length[1], by_position[0], by_position[1]}, title, 2, 820, 460, png_path,
                   &outputs);
}

}  // namespace posenc::cli
