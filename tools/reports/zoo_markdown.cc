// The Markdown of a zoo report (zoo_report.h): the settings, the verdict
// rule, the tables of held-out loss (every encoding, the n-grams on the
// models' bytes, the loss past L and against the control, the ranking's
// steps, RoPE under each method, the convergence check).
#include "reports/zoo_report.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "posenc/mean_interval.h"
#include "reports/zoo_spread.h"

namespace posenc::cli {
namespace {

using zoo::Difference;
using zoo::FindLength;
using zoo::FindNgram;
using zoo::FullBudgetTokens;
using zoo::HalfBudgetTokens;
using zoo::HasLearnedContext;
using zoo::HasTrainLength;
using zoo::InMethodTable;
using zoo::IsRopeMethod;
using zoo::kControl;
using zoo::LearnedContext;
using zoo::MarginAtTrainLength;
using zoo::Number;
using zoo::PairedDifference;
using zoo::ReferenceVariant;
using zoo::Row;
using zoo::Rows;
using zoo::Schemes;
using zoo::Scored;
using zoo::Spread;
using zoo::SpreadOf;

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

std::string MarginCell(const MeanInterval& margin) {
  std::string cell = " " + Difference(margin);
  switch (HasLearnedContext(margin)) {
    case LearnedContext::kNo: return cell + " **has not learned context** |";
    case LearnedContext::kWithinNoise: return cell + " (of the n-gram) |";
    case LearnedContext::kYes: break;
  }
  return cell + " |";
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

}  // namespace posenc::cli
