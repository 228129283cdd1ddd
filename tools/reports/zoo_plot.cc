// The picture of a zoo report (zoo_report.h): loss against length and
// position, the learning curves and the convergence check.
#include "reports/zoo_report.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "reports/plot.h"
#include "reports/zoo_spread.h"

namespace posenc::cli {
namespace {

using zoo::FullBudgetTokens;
using zoo::HalfBudgetTokens;
using zoo::InMethodTable;
using zoo::IsRopeMethod;
using zoo::MeanCurve;
using zoo::MinusReference;
using zoo::ReferenceVariant;
using zoo::Row;
using zoo::Schemes;
using zoo::Spread;
using zoo::SpreadOf;

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
