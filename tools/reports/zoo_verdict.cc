// The verdict rule of a zoo report (zoo_report.h): the convergence check
// (half against the full budget) and the margin to the reference n-gram on
// each seed's own training bytes, and why a scheme's verdicts are withheld.
#include "reports/zoo_report.h"

#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "posenc/mean_interval.h"
#include "reports/zoo_spread.h"

namespace posenc::cli {
namespace {

using zoo::FindEvaluation;
using zoo::FindLength;
using zoo::HasTrainLength;
using zoo::ReferenceVariant;

// A scheme's loss at L (as trained) by seed, over `models`.
std::map<std::int64_t, double> LossAtTrainLengthBySeed(const std::vector<ZooModel>& models, const std::string& scheme,
                                                       std::int64_t train_length) {
  std::map<std::int64_t, double> by_seed;
  for (const ZooModel& m : models) {
    if (m.scheme != scheme) continue;
    const ZooEvaluation* e = FindEvaluation(m, scheme);
    const ZooLength* l = e ? FindLength(*e, train_length) : nullptr;
    if (l != nullptr && l->loss) by_seed[m.seed] = *l->loss;
  }
  return by_seed;
}

// The reference n-gram's loss at L on one seed's training bytes; none
// without L among its lengths.
const double* SeenNgramAtTrainLength(const ZooReport& r, const ZooSeenNgram& seen) {
  for (const ZooEvaluation& e : seen.evaluations) {
    if (e.variant != ReferenceVariant()) continue;
    const ZooLength* l = FindLength(e, r.run.train_length);
    return l != nullptr && l->loss ? &*l->loss : nullptr;
  }
  return nullptr;
}

}  // namespace

std::optional<ZooConvergence> ZooConverged(const ZooReport& r, const std::string& scheme) {
  if (!HasTrainLength(r)) return std::nullopt;
  const std::map<std::int64_t, double> full = LossAtTrainLengthBySeed(r.models, scheme, r.run.train_length),
                                       half = LossAtTrainLengthBySeed(r.half_budget, scheme, r.run.train_length);
  std::vector<double> paired_full, paired_half, all_full;
  for (const auto& [seed, loss] : full) {
    all_full.push_back(loss);
    if (const auto h = half.find(seed); h != half.end()) {
      paired_full.push_back(loss);
      paired_half.push_back(h->second);
    }
  }
  if (paired_full.size() < 2) return std::nullopt;
  const MeanInterval d = PairedDifferenceInterval(paired_full, paired_half);
  const MeanInterval spread = StudentMeanInterval(all_full);
  return ZooConvergence{.half = StudentMeanInterval(paired_half).mean,
                        .full = spread.mean,
                        .difference = d.mean,
                        .low = d.low,
                        .high = d.high,
                        .sd = spread.sd,
                        .converged = std::abs(d.mean) < spread.sd};
}

std::optional<MeanInterval> ZooSeenMargin(const ZooReport& r, const std::string& scheme) {
  if (!HasTrainLength(r)) return std::nullopt;
  const std::map<std::int64_t, double> model = LossAtTrainLengthBySeed(r.models, scheme, r.run.train_length);
  std::vector<double> margins;
  for (const ZooSeenNgram& seen : r.seen_ngrams) {
    const auto m = model.find(seen.seed);
    const double* ngram = SeenNgramAtTrainLength(r, seen);
    if (m != model.end() && ngram != nullptr) margins.push_back(m->second - *ngram);
  }
  if (margins.empty()) return std::nullopt;
  return StudentMeanInterval(margins);
}

std::vector<std::string> ZooEarlyTraining(const ZooReport& r, const std::string& scheme) {
  std::vector<std::string> why;
  if (const std::optional<ZooConvergence> c = ZooConverged(r, scheme); !c) {
    why.emplace_back("no convergence check (needs half-budget models of two seeds)");
  } else if (!c->converged) {
    why.emplace_back("still learning (the half-budget check)");
  }
  if (const std::optional<MeanInterval> m = ZooSeenMargin(r, scheme); !m) {
    why.emplace_back("no " + ReferenceVariant() + " on its training bytes in the data");
  } else if (!(m->ExcludesZero() && m->high < 0)) {
    why.emplace_back("not below the " + ReferenceVariant() + " on its training bytes beyond noise");
  }
  return why;
}

}  // namespace posenc::cli
