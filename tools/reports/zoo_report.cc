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

// Which loss a table shows: over every scored byte, or over those
// predicted at positions >= L.
enum class Scored { kAll, kPastTrain };

std::optional<double> LossOf(const ZooLength& l, Scored scored) {
  return scored == Scored::kAll ? l.loss : l.loss_past_train;
}

const ZooEvaluation* FindNgram(const ZooReport& r, const std::string& variant) {
  for (const ZooEvaluation& e : r.ngrams) {
    if (e.variant == variant) return &e;
  }
  return nullptr;
}

// A model variant over the seeds, or an n-gram (one value: it has no seed).
Spread SpreadOf(const ZooReport& r, const std::string& variant, std::int64_t length, Scored scored = Scored::kAll) {
  Spread s;
  std::vector<const ZooEvaluation*> evaluations;
  if (const ZooEvaluation* ngram = FindNgram(r, variant)) evaluations.push_back(ngram);
  for (const ZooModel& m : r.models) evaluations.push_back(FindEvaluation(m, variant));
  for (const ZooEvaluation* e : evaluations) {
    const ZooLength* l = e ? FindLength(*e, length) : nullptr;
    if (l == nullptr) continue;
    s.resolved = l->resolved;
    if (const std::optional<double> loss = LossOf(*l, scored); loss && l->loss) {
      s.values.push_back(*loss);
    } else if (s.error.empty()) {
      s.error = l->error;
    }
  }
  return s;
}

// The mean position curve of a variant (or an n-gram) at a length over the
// seeds that ran.
std::vector<double> MeanCurve(const ZooReport& r, const std::string& variant, std::int64_t length) {
  std::vector<double> sum;
  int count = 0;
  std::vector<const ZooEvaluation*> evaluations;
  if (const ZooEvaluation* ngram = FindNgram(r, variant)) evaluations.push_back(ngram);
  for (const ZooModel& m : r.models) evaluations.push_back(FindEvaluation(m, variant));
  for (const ZooEvaluation* e : evaluations) {
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
// RoPE + window never looks past L: the control for the loss past L.
constexpr const char* kControl = "rope+window";

std::string Row(const std::string& variant) {
  if (variant.ends_with("-gram")) return "byte " + variant + " (Witten-Bell)";
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
  const double factor = static_cast<double>(length) / static_cast<double>(r.run.train_length);
  return std::to_string(length) + " (" + Number(factor, "%g") + "×)";
}

std::string Cell(const Spread& s) {
  if (s.values.empty()) return s.error.empty() ? " — |" : " no rows |";
  std::string cell = " " + Number(s.Mean());
  if (s.values.size() > 1) cell += " ±" + Number(s.HalfRange());
  return cell + " |";
}

std::string ReferenceVariant() { return ZooNgramVariant(std::end(kZooNgramOrders)[-1]); }

bool HasTrainLength(const ZooReport& r) {
  return std::find(r.lengths.begin(), r.lengths.end(), r.run.train_length) != r.lengths.end();
}

// The mean loss at L minus the reference n-gram's; none without L among the
// lengths, a model that cannot run there, or no n-gram.
std::optional<double> MarginAtTrainLength(const ZooReport& r, const std::string& variant) {
  if (!HasTrainLength(r)) return std::nullopt;
  const Spread model = SpreadOf(r, variant, r.run.train_length),
               ngram = SpreadOf(r, ReferenceVariant(), r.run.train_length);
  if (model.values.empty() || ngram.values.empty()) return std::nullopt;
  return model.Mean() - ngram.Mean();
}

// The rows of every table: the n-grams, then the variants.
std::vector<std::string> Rows(const ZooReport& r) {
  std::vector<std::string> rows;
  for (const ZooEvaluation& e : r.ngrams) rows.push_back(e.variant);
  rows.insert(rows.end(), r.variants.begin(), r.variants.end());
  return rows;
}

std::string Table(const ZooReport& r, bool methods) {
  const bool margin = !methods && HasTrainLength(r) && !r.ngrams.empty();
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
  if (margin) {
    md += " at L, minus the " + ReferenceVariant() + " |";
    rule += "---|";
  }
  md += "\n" + rule + "\n";
  for (const std::string& variant : Rows(r)) {
    const bool ngram = FindNgram(r, variant) != nullptr;
    if (!ngram && InMethodTable(variant) != methods && variant != "rope") continue;
    md += "| " + Row(variant) + " |";
    std::string longest;
    for (const std::int64_t length : r.lengths) {
      const Spread s = SpreadOf(r, variant, length);
      longest = s.resolved;
      md += Cell(s);
    }
    if (methods) md += " " + (longest.empty() ? std::string("—") : "`" + longest + "`") + " |";
    if (margin) {
      const std::optional<double> m = ngram ? std::nullopt : MarginAtTrainLength(r, variant);
      md +=
          !m ? std::string(" — |") : " " + Number(*m, "%+.3f") + (*m >= 0 ? " **has not learned context**" : "") + " |";
    }
    md += "\n";
  }
  return md;
}

// The loss on the bytes predicted at positions >= L, at every length past
// L, every row of both tables, RoPE + window named as the control.
std::string PastTrainTable(const ZooReport& r) {
  std::vector<std::int64_t> past;
  for (const std::int64_t length : r.lengths) {
    if (length > r.run.train_length) past.push_back(length);
  }
  std::string md = "| encoding or method |";
  std::string rule = "|---|";
  for (const std::int64_t length : past) {
    md.append(" ").append(LengthHeader(r, length)).append(" |");
    rule += "---|";
  }
  md += "\n" + rule + "\n";
  for (const std::string& variant : Rows(r)) {
    md += "| " + Row(variant);
    if (variant == kControl) md += " (control: never looks past L)";
    md += " |";
    for (const std::int64_t length : past) md += Cell(SpreadOf(r, variant, length, Scored::kPastTrain));
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

std::string ZooNgramVariant(int order) { return std::to_string(order) + "-gram"; }

Json ZooEvaluationJson(const ZooEvaluation& evaluation) {
  Json lengths = Json::array();
  for (const ZooLength& l : evaluation.lengths) {
    Json row{{"length", l.length},
             {"resolved", l.resolved},
             {"same_as_model", l.same_as_model},
             {"windows", l.windows},
             {"seconds", l.seconds}};
    row["loss"] = l.loss ? Json(*l.loss) : Json(nullptr);
    row["loss_past_train"] = l.loss_past_train ? Json(*l.loss_past_train) : Json(nullptr);
    if (!l.error.empty()) row["error"] = l.error;
    row["position_loss"] = l.position_loss;
    lengths.push_back(std::move(row));
  }
  return {{"variant", evaluation.variant}, {"lengths", std::move(lengths)}};
}

ZooEvaluation ZooEvaluationFromJson(const Json& json) {
  try {
    ZooEvaluation evaluation{.variant = json.at("variant").get<std::string>()};
    for (const Json& l : json.at("lengths")) {
      ZooLength length{.length = l.at("length").get<std::int64_t>(),
                       .resolved = l.at("resolved").get<std::string>(),
                       .same_as_model = l.at("same_as_model").get<bool>(),
                       .windows = l.at("windows").get<std::int64_t>(),
                       .position_loss = l.at("position_loss").get<std::vector<double>>(),
                       .seconds = l.at("seconds").get<double>()};
      if (!l.at("loss").is_null()) length.loss = l.at("loss").get<double>();
      if (!l.at("loss_past_train").is_null()) length.loss_past_train = l.at("loss_past_train").get<double>();
      length.error = l.value("error", std::string());
      evaluation.lengths.push_back(std::move(length));
    }
    return evaluation;
  } catch (const Json::exception& e) {
    ThrowError(kOp, "cell", json.dump().substr(0, 80), std::string("is not a zoo evaluation: ") + e.what());
  }
}

Json ZooModelJson(const ZooModel& m) {
  Json evaluations = Json::array();
  for (const ZooEvaluation& e : m.evaluations) evaluations.push_back(ZooEvaluationJson(e));
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
    for (const Json& e : j.at("evaluations")) m.evaluations.push_back(ZooEvaluationFromJson(e));
    return m;
  } catch (const Json::exception& e) {
    ThrowError(kOp, "cell", j.dump().substr(0, 80), std::string("is not a zoo model: ") + e.what());
  }
}

nlohmann::json TinyLmModelJson(const TinyLmRunSettings& run) {
  return {{"d_model", run.d_model},
          {"layers", run.layers},
          {"heads", run.heads},
          {"ffn_hidden", run.ffn_hidden},
          {"position_range", run.position_range}};
}

std::string RandomizedPositionsSentence(const TinyLmRunSettings& run) {
  if (run.position_range == 0) return "";
  return "**Randomized positions** (Ruoss et al. 2023): every pass, in training and in evaluation, puts its tokens "
         "at an ordered random subset of [0, " +
         std::to_string(run.position_range) +
         ") (one subset a batch), so that a model trained at L has seen the positions and distances of every length "
         "up to " +
         std::to_string(run.position_range) + ".\n\n";
}

std::string ZooMarkdown(const ZooReport& r) {
  const std::int64_t params = r.models.empty() ? 0 : r.models.front().params;
  double train_seconds = 0;
  for (const ZooModel& m : r.models) train_seconds += m.train_seconds;
  std::string md = "## Train short, test long: every encoding trained at L = " + std::to_string(r.run.train_length) +
                   " bytes, tested to " + std::to_string(r.lengths.back()) + "\n\n";
  md += "Byte-level decoder (d " + std::to_string(r.run.d_model) + ", " + std::to_string(r.run.layers) + " layers, " +
        std::to_string(r.run.heads) + " heads, MLP " + std::to_string(r.run.ffn_hidden) + "; about " +
        Number(static_cast<double>(params) / 1e6, "%.2f") + " M parameters), trained on " +
        std::to_string(r.run.tokens) + " bytes of `" + std::filesystem::path(r.corpus).filename().string() +
        "` (batches of " + std::to_string(r.run.batch) + " × " + std::to_string(r.run.train_length) +
        ", AdamW, peak lr " + Number(r.run.lr, "%g") + ", warmup + cosine), seeds " + Joined(r.seeds) +
        ". Held out: `" + std::filesystem::path(r.text).filename().string() + "`, the same " +
        std::to_string(r.eval_bytes) + " bytes (its bytes 1 to " + std::to_string(r.eval_bytes) +
        ") scored at every length, in sliding windows of the length with a stride of length / " +
        std::to_string(r.stride_divisor) +
        ": every byte sees between length − stride + 1 and length bytes before it "
        "(the first bytes of the text: all it has), so only how far back a model may look changes with the "
        "length. Byte n-grams: Witten-Bell, counted on the whole corpus, scored on the same bytes (each with its " +
        "n − 1 bytes before it). Byte-unigram baseline: " + Number(r.unigram_corpus) +
        " nats/byte (the training corpus's byte frequencies; " + Number(r.unigram_text) + " with the text's own).\n\n";
  md += RandomizedPositionsSentence(r.run);
  md += "Held-out loss in nats per byte (lower is better), the mean over the seeds ± half their range";
  if (HasTrainLength(r) && !r.ngrams.empty()) {
    md += "; a model no better than the " + ReferenceVariant() + " at L **has not learned context** beyond the " +
          std::to_string(std::end(kZooNgramOrders)[-1] - 1) + " bytes the n-gram reads";
  }
  md += ":\n\n" + Table(r, false);
  if (r.lengths.back() > r.run.train_length) {
    md += "\n### Past the training length\n\n";
    md += "The loss on the bytes predicted at positions ≥ L = " + std::to_string(r.run.train_length) +
          " (with more context than training showed; the n-grams on the same bytes). RoPE + window never looks past "
          "L: a model below it uses the farther context, one above it is hurt by it:\n\n";
    md += PastTrainTable(r);
  }
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

namespace {

// A variant's spread at every length, of every scored byte or of those past L.
Json LengthRows(const ZooReport& r, const std::string& variant, Scored scored) {
  Json lengths = Json::array();
  for (const std::int64_t length : r.lengths) {
    const Spread s = SpreadOf(r, variant, length, scored);
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
  return lengths;
}

// A curve minus the reference's, point by point (empty when either is).
std::vector<double> MinusReference(const ZooReport& r, const std::vector<double>& curve) {
  const std::vector<double> reference = MeanCurve(r, ReferenceVariant(), r.lengths.back());
  if (curve.empty() || reference.size() != curve.size()) return {};
  std::vector<double> difference(curve.size());
  for (std::size_t i = 0; i < curve.size(); ++i) difference[i] = curve[i] - reference[i];
  return difference;
}

}  // namespace

std::string ZooJson(const ZooReport& r) {
  Json variants = Json::array();
  for (const std::string& variant : Rows(r)) {
    const std::vector<double> curve = MeanCurve(r, variant, r.lengths.back());
    Json row{{"variant", variant},
             {"lengths", LengthRows(r, variant, Scored::kAll)},
             {"lengths_past_train", LengthRows(r, variant, Scored::kPastTrain)},
             {"position_loss_at_longest", curve},
             {"position_loss_minus_reference_at_longest", MinusReference(r, curve)}};
    if (FindNgram(r, variant) == nullptr) {
      const std::optional<double> margin = MarginAtTrainLength(r, variant);
      row["at_train_length_minus_reference"] = margin ? Json(*margin) : Json(nullptr);
      row["has_learned_context"] = margin ? Json(*margin < 0) : Json(nullptr);
    }
    variants.push_back(std::move(row));
  }
  Json models = Json::array();
  for (const ZooModel& m : r.models) models.push_back(ZooModelJson(m));
  Json ngrams = Json::array();
  for (const ZooEvaluation& e : r.ngrams) ngrams.push_back(ZooEvaluationJson(e));
  const Json json{{"train_length", r.run.train_length},
                  {"lengths", r.lengths},
                  {"seeds", r.seeds},
                  {"tokens", r.run.tokens},
                  {"batch", r.run.batch},
                  {"lr", r.run.lr},
                  {"model", TinyLmModelJson(r.run)},
                  {"corpus", r.corpus},
                  {"text", r.text},
                  {"eval_bytes", r.eval_bytes},
                  {"stride_divisor", r.stride_divisor},
                  {"bucket", r.bucket},
                  {"unigram", {{"corpus_frequencies", r.unigram_corpus}, {"text_frequencies", r.unigram_text}}},
                  {"reference", ReferenceVariant()},
                  {"seconds", r.seconds},
                  {"variants", std::move(variants)},
                  {"ngrams", std::move(ngrams)},
                  {"models", std::move(models)}};
  return json.dump(2) + "\n";
}

void DrawZooPlot(const ZooReport& r, const std::string& png_path, OutputFiles& outputs) {
  LinePlot by_length[2], by_position[2];
  const std::int64_t longest = r.lengths.back();
  double low[2] = {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()};
  double high[2] = {-std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()};
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
      // Minus the reference n-gram's loss on the same bytes at the same
      // positions: the text's own difficulty cancels.
      PlotSeries curve{Row(variant), {}, {}, false, "lines lw 2"};
      const std::vector<double> difference = MinusReference(r, MeanCurve(r, variant, longest));
      for (std::size_t i = 0; i < difference.size(); ++i) {
        curve.x.push_back((static_cast<double>(i) + 0.5) * static_cast<double>(r.bucket));
        curve.y.push_back(difference[i]);
        low[panel] = std::min(low[panel], difference[i]);
        high[panel] = std::max(high[panel], difference[i]);
      }
      if (!curve.x.empty()) by_position[panel].series.push_back(std::move(curve));
    }
  }
  const auto train = static_cast<double>(r.run.train_length);
  const char* names[2] = {"every encoding", "RoPE + training-free methods"};
  for (const int panel : {0, 1}) {
    LinePlot& a = by_length[panel];
    a.title = std::string(panel == 0 ? "(a) " : "(b) ") + names[panel] + ": held-out loss against length";
    a.x_label = "evaluated length (bytes; trained at " + std::to_string(r.run.train_length) + ")";
    a.y_label = "nats per byte";
    a.log_x = true;
    a.key_position = "outside right";
    a.reference_lines = {{r.unigram_corpus, "byte-unigram baseline"}};
    for (const ZooEvaluation& ngram : r.ngrams) {
      const Spread s = SpreadOf(r, ngram.variant, longest);
      if (!s.values.empty()) a.reference_lines.emplace_back(s.Mean(), Row(ngram.variant));
    }
    LinePlot& c = by_position[panel];
    c.title = std::string(panel == 0 ? "(c) " : "(d) ") + names[panel] + ": position loss at " +
              std::to_string(longest) + " - " + ReferenceVariant() + "'s";
    c.x_label = "byte position (mean per " + std::to_string(r.bucket) + ")";
    c.y_label = "nats per byte - " + ReferenceVariant() + "'s (same bytes)";
    c.log_x = true;
    c.key_position = "outside right";
    if (low[panel] <= high[panel]) {
      c.reference_lines = {{0.0, Row(ReferenceVariant()) + " (reference)"}};
      c.series.push_back(
          {"training length", {train, train}, {low[panel], high[panel]}, false, "lines dt 2 lw 1 lc rgb 'black'"});
    }
  }
  const std::string title = "Train short, test long: byte-level models trained at " +
                            std::to_string(r.run.train_length) + " bytes (mean of " + std::to_string(r.seeds.size()) +
                            " seeds)";
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
