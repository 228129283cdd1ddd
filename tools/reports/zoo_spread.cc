#include "reports/zoo_spread.h"

#include <algorithm>
#include <cstdio>
#include <iterator>

namespace posenc::cli {

std::string ZooNgramVariant(int order) { return std::to_string(order) + "-gram"; }

namespace zoo {
namespace {

std::optional<double> LossOf(const ZooLength& l, Scored scored) {
  return scored == Scored::kAll ? l.loss : l.loss_past_train;
}

}  // namespace

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

const ZooEvaluation* FindNgram(const ZooReport& r, const std::string& variant) {
  for (const ZooEvaluation& e : r.ngrams) {
    if (e.variant == variant) return &e;
  }
  return nullptr;
}

Spread SpreadOf(const ZooReport& r, const std::string& variant, std::int64_t length, Scored scored) {
  Spread s;
  std::vector<const ZooEvaluation*> evaluations;
  std::vector<std::int64_t> seeds;  // -1: the n-gram, which has none
  if (const ZooEvaluation* ngram = FindNgram(r, variant)) {
    evaluations.push_back(ngram);
    seeds.push_back(-1);
  }
  for (const ZooModel& m : r.models) {
    evaluations.push_back(FindEvaluation(m, variant));
    seeds.push_back(m.seed);
  }
  for (std::size_t i = 0; i < evaluations.size(); ++i) {
    const ZooLength* l = evaluations[i] ? FindLength(*evaluations[i], length) : nullptr;
    if (l == nullptr) continue;
    s.resolved = l->resolved;
    s.same_as_model = l->same_as_model;
    if (const std::optional<double> loss = LossOf(*l, scored); loss && l->loss) {
      s.values.push_back(*loss);
      s.seeds.push_back(seeds[i]);
    } else if (s.error.empty()) {
      s.error = l->error;
    }
  }
  return s;
}

std::optional<MeanInterval> PairedDifference(const Spread& a, const Spread& b) {
  std::vector<double> x, y;
  for (std::size_t i = 0; i < a.values.size(); ++i) {
    const auto j = std::find(b.seeds.begin(), b.seeds.end(), a.seeds[i]);
    if (j == b.seeds.end()) continue;
    x.push_back(a.values[i]);
    y.push_back(b.values[static_cast<std::size_t>(j - b.seeds.begin())]);
  }
  if (x.empty()) return std::nullopt;
  return PairedDifferenceInterval(x, y);
}

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

std::vector<double> MinusReference(const ZooReport& r, const std::vector<double>& curve) {
  const std::vector<double> reference = MeanCurve(r, ReferenceVariant(), r.lengths.back());
  if (curve.empty() || reference.size() != curve.size()) return {};
  std::vector<double> difference(curve.size());
  for (std::size_t i = 0; i < curve.size(); ++i) difference[i] = curve[i] - reference[i];
  return difference;
}

bool IsRopeMethod(const std::string& variant) { return variant.starts_with("rope+"); }
bool InMethodTable(const std::string& variant) { return variant == "rope" || IsRopeMethod(variant); }

std::string Row(const std::string& variant) {
  if (variant.ends_with("-gram")) return "byte " + variant + " (Witten-Bell)";
  if (variant == "learned") return "learned (no rows past L)";
  if (variant == "learned+hierarchical") return "learned + hierarchical (Su)";
  if (variant == "rope") return "rope (as trained)";
  if (IsRopeMethod(variant)) return "rope + " + variant.substr(5);
  return variant;
}

std::string Number(double v, const char* format) {
  char text[32];
  std::snprintf(text, sizeof text, format, v);
  return text;
}

std::string Difference(const MeanInterval& d) {
  if (!d.HasSpread()) return Number(d.mean, "%+.3f") + " (one seed: no interval)";
  std::string text = Number(d.mean, "%+.3f") + " [" + Number(d.low, "%+.3f") + ", " + Number(d.high, "%+.3f") + "]";
  return d.ExcludesZero() ? text : text + " within noise";
}

std::string ReferenceVariant() { return ZooNgramVariant(std::end(kZooNgramOrders)[-1]); }

bool HasTrainLength(const ZooReport& r) {
  return std::find(r.lengths.begin(), r.lengths.end(), r.run.train_length) != r.lengths.end();
}

std::optional<MeanInterval> MarginAtTrainLength(const ZooReport& r, const std::string& variant) {
  if (!HasTrainLength(r)) return std::nullopt;
  const Spread model = SpreadOf(r, variant, r.run.train_length),
               ngram = SpreadOf(r, ReferenceVariant(), r.run.train_length);
  if (model.values.empty() || ngram.values.empty()) return std::nullopt;
  std::vector<double> margins = model.values;
  for (double& m : margins) m -= ngram.values.front();
  return StudentMeanInterval(margins);
}

LearnedContext HasLearnedContext(const MeanInterval& margin) {
  if (margin.high < 0) return LearnedContext::kYes;
  if (margin.low > 0 || !margin.HasSpread()) return LearnedContext::kNo;
  return LearnedContext::kWithinNoise;
}

std::vector<std::string> Rows(const ZooReport& r) {
  std::vector<std::string> rows;
  for (const ZooEvaluation& e : r.ngrams) rows.push_back(e.variant);
  rows.insert(rows.end(), r.variants.begin(), r.variants.end());
  return rows;
}

std::vector<std::string> Schemes(const ZooReport& r) {
  std::vector<std::string> schemes;
  for (const ZooModel& m : r.models) {
    if (std::find(schemes.begin(), schemes.end(), m.scheme) == schemes.end()) schemes.push_back(m.scheme);
  }
  return schemes;
}

std::int64_t HalfBudgetTokens(const ZooReport& r) { return r.half_budget.empty() ? 0 : r.half_budget.front().tokens; }
std::int64_t FullBudgetTokens(const ZooReport& r) { return r.models.empty() ? 0 : r.models.front().tokens; }

}  // namespace zoo
}  // namespace posenc::cli
