// The JSON of a zoo report (zoo_report.h): every number of its tables and
// verdicts, and the cells' models.
#include "reports/zoo_report.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "posenc/mean_interval.h"
#include "reports/zoo_spread.h"

namespace posenc::cli {
namespace {

using zoo::FindNgram;
using zoo::HalfBudgetTokens;
using zoo::HasLearnedContext;
using zoo::LearnedContext;
using zoo::MarginAtTrainLength;
using zoo::MeanCurve;
using zoo::MinusReference;
using zoo::ReferenceVariant;
using zoo::Rows;
using zoo::Schemes;
using zoo::Scored;
using zoo::Spread;
using zoo::SpreadOf;

using Json = nlohmann::json;

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
      const MeanInterval m = s.Interval();
      row["mean"] = m.mean;
      row["sd"] = m.sd;    // 0 for one seed
      row["low"] = m.low;  // the 95% Student t interval of the mean over the seeds
      row["high"] = m.high;
    }
    lengths.push_back(std::move(row));
  }
  return lengths;
}

}  // namespace

nlohmann::json TinyLmModelJson(const TinyLmRunSettings& run) {
  return {{"d_model", run.d_model},
          {"layers", run.layers},
          {"heads", run.heads},
          {"ffn_hidden", run.ffn_hidden},
          {"position_range", run.position_range}};
}

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
      const std::optional<MeanInterval> margin = MarginAtTrainLength(r, variant);
      row["at_train_length_minus_reference"] =
          margin ? Json{{"mean", margin->mean}, {"low", margin->low}, {"high", margin->high}} : Json(nullptr);
      Json learned = nullptr;
      if (margin) {
        const LearnedContext verdict = HasLearnedContext(*margin);
        learned =
            verdict == LearnedContext::kWithinNoise ? Json("within noise") : Json(verdict == LearnedContext::kYes);
      }
      row["has_learned_context"] = learned;
    }
    variants.push_back(std::move(row));
  }
  Json models = Json::array();
  for (const ZooModel& m : r.models) models.push_back(ZooModelJson(m));
  Json half_budget = Json::array();
  for (const ZooModel& m : r.half_budget) half_budget.push_back(ZooModelJson(m));
  Json convergence = Json::array();
  for (const std::string& scheme : Schemes(r)) {
    const std::optional<ZooConvergence> c = ZooConverged(r, scheme);
    if (!c) continue;
    convergence.push_back({{"scheme", scheme},
                           {"half_budget_loss", c->half},
                           {"full_budget_loss", c->full},
                           {"difference", c->difference},
                           {"low", c->low},
                           {"high", c->high},
                           {"sd", c->sd},
                           {"converged", c->converged}});
  }
  Json ngrams = Json::array();
  for (const ZooEvaluation& e : r.ngrams) ngrams.push_back(ZooEvaluationJson(e));
  Json seen_ngrams = Json::array();
  for (const ZooSeenNgram& n : r.seen_ngrams) {
    Json evaluations = Json::array();
    for (const ZooEvaluation& e : n.evaluations) evaluations.push_back(ZooEvaluationJson(e));
    seen_ngrams.push_back({{"seed", n.seed}, {"bytes", n.bytes}, {"ngrams", std::move(evaluations)}});
  }
  Json seen_margins = Json::array(), early_training = Json::array();
  for (const std::string& scheme : Schemes(r)) {
    if (const std::optional<MeanInterval> m = ZooSeenMargin(r, scheme)) {
      seen_margins.push_back({{"scheme", scheme},
                              {"mean", m->mean},
                              {"low", m->low},
                              {"high", m->high},
                              {"seeds", m->count},
                              {"below", m->ExcludesZero() && m->high < 0}});
    }
    const std::vector<std::string> why = ZooEarlyTraining(r, scheme);
    if (!why.empty()) early_training.push_back({{"scheme", scheme}, {"reasons", why}});
  }
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
                  {"models", std::move(models)},
                  {"half_budget_tokens", HalfBudgetTokens(r)},
                  {"half_budget_models", std::move(half_budget)},
                  {"convergence", std::move(convergence)},
                  {"ngrams_on_models_bytes", std::move(seen_ngrams)},
                  {"margin_to_ngram_on_models_bytes", std::move(seen_margins)},
                  {"early_training", std::move(early_training)}};
  return json.dump(2) + "\n";
}

}  // namespace posenc::cli
