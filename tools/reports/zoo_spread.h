// What every view of a zoo report (zoo_report.h: its Markdown, its JSON, its
// picture, its verdict rule) reads the same way: a variant's losses at a
// length over the seeds (Spread), the cells' lookups behind it, the paired
// differences and margins drawn from it, and the names and numbers the
// views print it with.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "posenc/mean_interval.h"
#include "reports/zoo_report.h"

namespace posenc::cli::zoo {

// A variant at a length over the seeds.
struct Spread {
  std::vector<double> values;       // one per seed that ran (in seed order)
  std::vector<std::int64_t> seeds;  // values[i]'s seed (none for an n-gram)
  std::string error;                // every seed failed: the first error
  std::string resolved;             // the method's form at this length (seeds agree)
  bool same_as_model = false;       // the method is the model as trained here (its numbers reused)
  double Mean() const {
    double sum = 0;
    for (const double v : values) sum += v;
    return sum / static_cast<double>(values.size());
  }
  // The 95% Student t interval of the mean over the seeds, and their sd.
  MeanInterval Interval() const { return StudentMeanInterval(values); }
};

// Which loss a table shows: over every scored byte, or over those
// predicted at positions >= L.
enum class Scored { kAll, kPastTrain };

// None when the model has no such evaluation, or the evaluation no such
// length.
const ZooEvaluation* FindEvaluation(const ZooModel& model, const std::string& variant);
const ZooLength* FindLength(const ZooEvaluation& evaluation, std::int64_t length);
// The corpus's n-gram of this name; none for a model variant.
const ZooEvaluation* FindNgram(const ZooReport& r, const std::string& variant);

// A model variant over the seeds, or an n-gram (one value: it has no seed).
Spread SpreadOf(const ZooReport& r, const std::string& variant, std::int64_t length, Scored scored = Scored::kAll);

// The paired difference a - b over the seeds both ran (the same seed's
// init and batches, the same scored bytes); none without a common seed.
std::optional<MeanInterval> PairedDifference(const Spread& a, const Spread& b);

// The mean position curve of a variant (or an n-gram) at a length over the
// seeds that ran.
std::vector<double> MeanCurve(const ZooReport& r, const std::string& variant, std::int64_t length);

// A curve minus the reference's, point by point (empty when either is).
std::vector<double> MinusReference(const ZooReport& r, const std::vector<double>& curve);

bool IsRopeMethod(const std::string& variant);
bool InMethodTable(const std::string& variant);
// RoPE + window never looks past L: the control for the loss past L.
inline constexpr const char* kControl = "rope+window";

// A variant as a table row names it: "rope + yarn", "byte 5-gram (Witten-Bell)".
std::string Row(const std::string& variant);

std::string Number(double v, const char* format = "%.3f");

// A difference with its 95% interval: "+0.155 [+0.101, +0.209]", and
// "within noise" unless the interval tells it from 0 (one seed: no
// interval; seeds that all differ by the same amount: a point, no verdict).
std::string Difference(const MeanInterval& d);

// The last of kZooNgramOrders: the n-gram a model must beat within L.
std::string ReferenceVariant();

bool HasTrainLength(const ZooReport& r);

// The loss at L minus the reference n-gram's (on the same bytes), over the
// seeds; none without L among the lengths, a model that cannot run there,
// or no n-gram.
std::optional<MeanInterval> MarginAtTrainLength(const ZooReport& r, const std::string& variant);

// Whether a model has learned more context than the reference n-gram reads:
// its loss at L is below the n-gram's beyond noise (the interval of the
// margin below 0; with one seed, the margin itself).
enum class LearnedContext { kYes, kNo, kWithinNoise };
LearnedContext HasLearnedContext(const MeanInterval& margin);

// The rows of every table: the n-grams, then the variants.
std::vector<std::string> Rows(const ZooReport& r);

// The schemes of the models, in the order of their first model.
std::vector<std::string> Schemes(const ZooReport& r);

// The training bytes of the half-budget and of the full-budget models
// (0 without them).
std::int64_t HalfBudgetTokens(const ZooReport& r);
std::int64_t FullBudgetTokens(const ZooReport& r);

}  // namespace posenc::cli::zoo
