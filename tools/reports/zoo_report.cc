#include "reports/zoo_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>

#include "reports/plot.h"
#include "posenc/mean_interval.h"

namespace posenc::cli {
namespace {

using Json = nlohmann::json;

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

// The paired difference a - b over the seeds both ran (the same seed's
// init and batches, the same scored bytes); none without a common seed.
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
  const MeanInterval m = s.Interval();
  std::string cell = " " + Number(m.mean);
  if (m.HasSpread()) cell += " ±" + Number(m.sd);
  return cell + " |";
}

// A difference with its 95% interval: "+0.155 [+0.101, +0.209]", and
// "within noise" unless the interval tells it from 0 (one seed: no
// interval; seeds that all differ by the same amount: a point, no verdict).
std::string Difference(const MeanInterval& d) {
  if (!d.HasSpread()) return Number(d.mean, "%+.3f") + " (one seed: no interval)";
  std::string text = Number(d.mean, "%+.3f") + " [" + Number(d.low, "%+.3f") + ", " + Number(d.high, "%+.3f") + "]";
  return d.ExcludesZero() ? text : text + " within noise";
}

std::string ReferenceVariant() { return ZooNgramVariant(std::end(kZooNgramOrders)[-1]); }

bool HasTrainLength(const ZooReport& r) {
  return std::find(r.lengths.begin(), r.lengths.end(), r.run.train_length) != r.lengths.end();
}

// The loss at L minus the reference n-gram's (on the same bytes), over the
// seeds; none without L among the lengths, a model that cannot run there,
// or no n-gram.
std::optional<MeanInterval> MarginAtTrainLength(const ZooReport& r, const std::string& variant) {
  if (!HasTrainLength(r)) return std::nullopt;
  const Spread model = SpreadOf(r, variant, r.run.train_length),
               ngram = SpreadOf(r, ReferenceVariant(), r.run.train_length);
  if (model.values.empty() || ngram.values.empty()) return std::nullopt;
  std::vector<double> margins = model.values;
  for (double& m : margins) m -= ngram.values.front();
  return StudentMeanInterval(margins);
}

// Whether a model has learned more context than the reference n-gram reads:
// its loss at L is below the n-gram's beyond noise (the interval of the
// margin below 0; with one seed, the margin itself).
enum class LearnedContext { kYes, kNo, kWithinNoise };
LearnedContext HasLearnedContext(const MeanInterval& margin) {
  if (margin.high < 0) return LearnedContext::kYes;
  if (margin.low > 0 || !margin.HasSpread()) return LearnedContext::kNo;
  return LearnedContext::kWithinNoise;
}

std::string MarginCell(const MeanInterval& margin) {
  std::string cell = " " + Difference(margin);
  switch (HasLearnedContext(margin)) {
    case LearnedContext::kNo: return cell + " **has not learned context** |";
    case LearnedContext::kWithinNoise: return cell + " (of the n-gram) |";
    case LearnedContext::kYes: break;
  }
  return cell + " |";
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
      const std::optional<MeanInterval> m = ngram ? std::nullopt : MarginAtTrainLength(r, variant);
      md += m ? MarginCell(*m) : std::string(" — |");
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

// Every model row's loss past L minus the control's, paired over the seeds,
// at every length past L: below 0 beyond noise, the row uses the farther
// context; above, the length hurts it.
std::string ControlTable(const ZooReport& r) {
  std::string md = "| encoding or method |";
  std::string rule = "|---|";
  std::vector<std::int64_t> past;
  for (const std::int64_t length : r.lengths) {
    if (length <= r.run.train_length) continue;
    past.push_back(length);
    md.append(" ").append(LengthHeader(r, length)).append(" |");
    rule += "---|";
  }
  md += "\n" + rule + "\n";
  for (const std::string& variant : r.variants) {
    if (variant == kControl) continue;
    md += "| " + Row(variant) + " |";
    for (const std::int64_t length : past) {
      const std::optional<MeanInterval> d = PairedDifference(SpreadOf(r, variant, length, Scored::kPastTrain),
                                                             SpreadOf(r, kControl, length, Scored::kPastTrain));
      md += d ? " " + Difference(*d) + " |" : std::string(" — |");
    }
    md += "\n";
  }
  return md;
}

// At `length`, the model rows of `ranked_schemes` (those the verdict rule
// lets through) ranked by their mean loss, each beside the next: which
// steps of the ranking the seeds can tell apart. A method that
// is the model as trained at this length is its row, not another.
std::string RankingComparisons(const ZooReport& r, std::int64_t length,
                               const std::vector<std::string>& ranked_schemes) {
  std::vector<std::pair<double, std::string>> ranked;
  for (const std::string& variant : r.variants) {
    const std::string scheme = variant.substr(0, variant.find('+'));
    if (std::find(ranked_schemes.begin(), ranked_schemes.end(), scheme) == ranked_schemes.end()) continue;
    const Spread s = SpreadOf(r, variant, length);
    if (!s.values.empty() && !s.same_as_model) ranked.emplace_back(s.Mean(), variant);
  }
  std::sort(ranked.begin(), ranked.end());
  std::string md;
  for (std::size_t i = 0; i + 1 < ranked.size(); ++i) {
    const std::string &a = ranked[i].second, &b = ranked[i + 1].second;
    const std::optional<MeanInterval> d = PairedDifference(SpreadOf(r, a, length), SpreadOf(r, b, length));
    md += "- " + Row(a) + " (" + Number(ranked[i].first) + ") − " + Row(b) + " (" + Number(ranked[i + 1].first) +
          "): " + (d ? Difference(*d) : std::string("no common seed")) + "\n";
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

namespace {

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

std::vector<std::string> Schemes(const ZooReport& r) {
  std::vector<std::string> schemes;
  for (const ZooModel& m : r.models) {
    if (std::find(schemes.begin(), schemes.end(), m.scheme) == schemes.end()) schemes.push_back(m.scheme);
  }
  return schemes;
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

// The n-grams on the models' bytes at L (mean over the seeds), then each
// scheme's loss at L minus the reference's on its own seed's bytes, paired.
std::string SeenNgramTable(const ZooReport& r) {
  std::string md = "| n-gram or encoding | at L | minus the " + ReferenceVariant() +
                   " on its bytes, paired over the seeds | verdict |\n|---|---|---|---|\n";
  for (const int order : kZooNgramOrders) {
    std::vector<double> losses;
    for (const ZooSeenNgram& seen : r.seen_ngrams) {
      for (const ZooEvaluation& e : seen.evaluations) {
        const ZooLength* l = e.variant == ZooNgramVariant(order) ? FindLength(e, r.run.train_length) : nullptr;
        if (l != nullptr && l->loss) losses.push_back(*l->loss);
      }
    }
    if (losses.empty()) continue;
    const MeanInterval m = StudentMeanInterval(losses);
    md += "| byte " + ZooNgramVariant(order) + " on the models' bytes | " + Number(m.mean) +
          (m.HasSpread() ? " ±" + Number(m.sd) : std::string()) + " | — | — |\n";
  }
  for (const std::string& scheme : Schemes(r)) {
    const std::optional<MeanInterval> m = ZooSeenMargin(r, scheme);
    if (!m) continue;
    md += "| " + Row(scheme) + " | " + Number(SpreadOf(r, scheme, r.run.train_length).Mean()) + " | " + Difference(*m) +
          " | " + (m->ExcludesZero() && m->high < 0 ? "below it" : "**not below it beyond noise**") + " |\n";
  }
  return md;
}

std::int64_t HalfBudgetTokens(const ZooReport& r) { return r.half_budget.empty() ? 0 : r.half_budget.front().tokens; }
std::int64_t FullBudgetTokens(const ZooReport& r) { return r.models.empty() ? 0 : r.models.front().tokens; }

std::string ConvergenceTable(const ZooReport& r) {
  std::string md = "| encoding | " + std::to_string(HalfBudgetTokens(r)) + " bytes | " +
                   std::to_string(FullBudgetTokens(r)) +
                   " bytes | full − half, 95% paired interval | seeds' sd (full) | verdict |\n"
                   "|---|---|---|---|---|---|\n";
  for (const std::string& scheme : Schemes(r)) {
    const std::optional<ZooConvergence> c = ZooConverged(r, scheme);
    md += "| " + Row(scheme) + " |";
    if (!c) {
      md += " — | — | — | — | needs two seeds of both budgets |\n";
      continue;
    }
    md += " " + Number(c->half) + " | " + Number(c->full) + " | " + Number(c->difference, "%+.3f") + " [" +
          Number(c->low, "%+.3f") + ", " + Number(c->high, "%+.3f") + "] | " + Number(c->sd) + " | " +
          (c->converged ? "converged" : "**still learning**") + " |\n";
  }
  return md;
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

std::string ZooMarkdown(const ZooReport& r) {
  const std::int64_t params = r.models.empty() ? 0 : r.models.front().params;
  double train_seconds = 0;
  for (const ZooModel& m : r.models) train_seconds += m.train_seconds;
  for (const ZooModel& m : r.half_budget) train_seconds += m.train_seconds;
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
  std::vector<std::string> ranked;  // the schemes whose verdicts stand
  std::string withheld;
  for (const std::string& scheme : Schemes(r)) {
    const std::vector<std::string> why = ZooEarlyTraining(r, scheme);
    if (why.empty()) ranked.push_back(scheme);
    std::string reasons;
    for (const std::string& reason : why) reasons += (reasons.empty() ? "" : "; ") + reason;
    if (!why.empty()) withheld += "- " + Row(scheme) + ": " + reasons + "\n";
  }
  md += "### Verdict rule\n\n";
  md +=
      "A scheme's rows past L are read (extrapolates or not, the best, a place in a ranking) only when it passed the "
      "convergence check and is below the " +
      ReferenceVariant() + " fitted on its own training bytes beyond noise.";
  md += withheld.empty() ? " Every scheme does.\n\n"
                         : " **Early training** — no extrapolation verdict for:\n\n" + withheld + "\n";
  md += "Held-out loss in nats per byte (lower is better), the mean over the seeds ± their standard deviation";
  if (HasTrainLength(r) && !r.ngrams.empty()) {
    md += "; the last column is the loss at L minus the " + ReferenceVariant() +
          "'s with its 95% interval over the seeds (Student t), and a model not below the n-gram beyond noise **has "
          "not learned context** beyond the " +
          std::to_string(std::end(kZooNgramOrders)[-1] - 1) + " bytes the n-gram reads";
  }
  md += ":\n\n" + Table(r, false);
  if (!r.seen_ngrams.empty() && HasTrainLength(r)) {
    md += "\n### The n-grams on the models' bytes\n\n";
    md += "The same n-grams fitted on the " + std::to_string(r.seen_ngrams.front().bytes) +
          " bytes a seed's models trained on (their batches' windows, concatenated; the corpus's n-grams above are "
          "fitted on all of it), scored on the same held-out bytes at L: the floor at the data the models had, "
          "mean over the seeds:\n\n";
    md += SeenNgramTable(r);
  }
  if (r.lengths.back() > r.run.train_length) {
    md += withheld.empty() ? "\n### Past the training length\n\n"
                           : "\n### Past the training length (early training for the schemes above)\n\n";
    md += "The loss on the bytes predicted at positions ≥ L = " + std::to_string(r.run.train_length) +
          " (with more context than training showed; the n-grams on the same bytes). RoPE + window never looks past "
          "L: a model below it uses the farther context, one above it is hurt by it:\n\n";
    md += PastTrainTable(r);
    if (std::find(r.variants.begin(), r.variants.end(), kControl) != r.variants.end()) {
      md +=
          "\nThe same minus RoPE + window's, paired over the seeds (the same seed's model, the same bytes), with the "
          "95% interval of the mean difference (Student t): below 0 beyond noise, a row uses the context past L; "
          "above, the length hurts it; **within noise** when the interval holds 0:\n\n";
      md += ControlTable(r);
    }
  }
  md += "\n### Which steps of the ranking are real\n\n";
  if (ranked.size() < 2) {
    md += "No ranking: it needs two schemes that pass the verdict rule (early training).\n";
  } else {
    md +=
        "The model rows of the schemes that pass the verdict rule ranked by their loss, each minus the next, paired "
        "over the seeds, with the 95% interval of the mean difference; **within noise** when it holds 0.\n";
    for (const std::int64_t length : {r.run.train_length, r.lengths.back()}) {
      if (std::find(r.lengths.begin(), r.lengths.end(), length) == r.lengths.end()) continue;
      md += "\nAt " + LengthHeader(r, length) + ":\n\n" + RankingComparisons(r, length, ranked);
      if (length == r.lengths.back()) break;  // L is the longest: once
    }
  }
  if (std::any_of(r.variants.begin(), r.variants.end(), IsRopeMethod)) {  // a zoo with a RoPE model
    md += "\n### RoPE past its training length, training-free\n\n";
    md +=
        "The RoPE models above, evaluated under each method of `posenc ppl` (defaults from L and the length; the "
        "last column is the method with its parameters at the longest length):\n\n";
    md += Table(r, true);
  }
  if (!r.half_budget.empty()) {
    md += "\n### Trained to convergence?\n\n";
    md +=
        "Each model trained again with half the budget (the same seed, corpus and schedule shape), scored at L. "
        "The rule: doubling the budget moves the loss at L by less than the seeds' standard deviation, else the "
        "model is **still learning** and its verdicts can move with more training:\n\n";
    md += ConvergenceTable(r);
  }
  md += "\nCompute: " + std::to_string(r.models.size() + r.half_budget.size()) + " models, " +
        Number(r.seconds / 60, "%.1f") + " min in all (training " + Number(train_seconds / 60, "%.1f") + " min).\n";
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

namespace {

// (e) Each scheme's learning curve: the training loss (each point the mean
// of its steps' batch losses) against training bytes, the mean over the
// seeds. No series when no model has a curve.
LinePlot LearningCurves(const ZooReport& r) {
  LinePlot plot{.title = "(e) learning curves: training loss against bytes seen (mean over seeds)",
                .x_label = "training bytes",
                .y_label = "nats per byte (training batches)",
                .key_position = "outside right"};
  for (const std::string& scheme : Schemes(r)) {
    PlotSeries line{Row(scheme), {}, {}, false, "lines lw 2"};
    int count = 0;
    for (const ZooModel& m : r.models) {
      if (m.scheme != scheme || m.curve.empty()) continue;
      if (line.x.empty()) {
        for (const ZooCurvePoint& p : m.curve) line.x.push_back(static_cast<double>(p.tokens));
        line.y.assign(m.curve.size(), 0.0);
      }
      if (m.curve.size() != line.y.size()) continue;  // another budget's run
      for (std::size_t i = 0; i < m.curve.size(); ++i) line.y[i] += m.curve[i].loss;
      ++count;
    }
    if (count == 0) continue;
    for (double& y : line.y) y /= count;
    plot.series.push_back(std::move(line));
  }
  return plot;
}

// (f) The convergence check: each scheme's held-out loss at L after half
// and the full budget (the mean over the seeds), the n-grams as reference
// lines. No series without half-budget models.
LinePlot ConvergencePanel(const ZooReport& r) {
  LinePlot plot{.title = "(f) convergence: held-out loss at L after half and the full budget",
                .x_label = "training bytes",
                .y_label = "nats per byte at L = " + std::to_string(r.run.train_length),
                .key_position = "outside right"};
  for (const std::string& scheme : Schemes(r)) {
    const std::optional<ZooConvergence> c = ZooConverged(r, scheme);
    if (!c) continue;
    plot.series.push_back({Row(scheme),
                           {static_cast<double>(HalfBudgetTokens(r)), static_cast<double>(FullBudgetTokens(r))},
                           {c->half, c->full},
                           false,
                           "linespoints lw 2 pt 7 ps 0.8"});
  }
  if (!plot.series.empty()) {
    for (const ZooEvaluation& ngram : r.ngrams) {
      const Spread s = SpreadOf(r, ngram.variant, r.run.train_length);
      if (!s.values.empty()) plot.reference_lines.emplace_back(s.Mean(), Row(ngram.variant));
    }
  }
  return plot;
}

}  // namespace

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
  std::vector<LinePlot> panels{by_length[0]};
  if (!by_length[1].series.empty()) panels.push_back(by_length[1]);
  panels.push_back(by_position[0]);
  if (!by_length[1].series.empty()) panels.push_back(by_position[1]);
  // The learning curves and the convergence check, when the cells have them.
  for (LinePlot panel : {LearningCurves(r), ConvergencePanel(r)}) {
    if (!panel.series.empty()) panels.push_back(std::move(panel));
  }
  DrawLinePlotGrid(panels, title, 2, 820, 460, png_path, &outputs);
}

}  // namespace posenc::cli
