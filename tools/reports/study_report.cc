#include "reports/study_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "reports/plot.h"
#include "posenc/error.h"

namespace posenc::cli {
namespace {

using Json = nlohmann::ordered_json;

std::string Fixed(double value, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, value);
  return buffer;
}

// Mean loss per bucket of `bucket` token positions: bucket b holds the
// predicted tokens at positions [b * bucket, (b + 1) * bucket).
struct Buckets {
  std::vector<std::int64_t> start;
  std::vector<double> mean_nll;
};
Buckets BucketMeans(const StudyCell& cell, std::int64_t bucket) {
  Buckets b;
  for (std::int64_t begin = 0; begin < cell.length; begin += bucket) {
    const std::int64_t end = std::min(begin + bucket, cell.length);
    b.start.push_back(begin);
    b.mean_nll.push_back(std::log(PerplexityOfTokens(cell, std::max<std::int64_t>(begin, 1), end)));
  }
  return b;
}

const StudyCell& CellAt(const StudyReport& report, const std::string& method, std::int64_t length) {
  for (const StudyCell& c : report.cells) {
    if (c.method == method && c.length == length) return c;
  }
  ThrowError("study", "cell", FormatValue(method + " at " + std::to_string(length)), "was not measured");
}

std::string TimesTraining(std::int64_t length, std::int64_t train_length) {
  const double ratio = static_cast<double>(length) / static_cast<double>(train_length);
  return Fixed(ratio, ratio == std::floor(ratio) ? 0 : 2) + "x";
}

// A signed difference of perplexities: "+1.23", "-0.05".
std::string Signed(double value) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%+.2f", value);
  return buffer;
}

}  // namespace

std::int64_t DefaultStudyLength(std::int64_t train_length) { return train_length + train_length / 2; }

double PerplexityOfTokens(const StudyCell& cell, std::int64_t begin, std::int64_t end) {
  // position_nll[i] predicts the token at position i + 1.
  double sum = 0;
  for (std::int64_t p = std::max<std::int64_t>(begin, 1); p < end; ++p) sum += cell.position_nll[p - 1];
  return std::exp(sum / static_cast<double>(end - std::max<std::int64_t>(begin, 1)));
}

std::string StudyMarkdown(const StudyReport& r) {
  std::ostringstream out;
  const std::string train = std::to_string(r.train_length);
  out << "Perplexity of " << std::filesystem::path(r.model).filename().string() << " (trained on " << train
      << " tokens) on " << std::filesystem::path(r.text).filename().string() << ", " << r.windows
      << (r.windows == 1 ? " window" : " windows") << " from the start of the text at each length; "
      << Fixed(r.seconds, 0) << " s of compute (the cells' times added up).\n";
  if (r.lengths.back() <= r.train_length) {
    out << "\nEvery length here is within the training length, where the methods are the model's own RoPE or "
           "close to it: nothing breaks and the rows barely differ. A length past "
        << train << " shows the effect, e.g. " << DefaultStudyLength(r.train_length) << " (1.5x).\n";
  }
  // "vs none": a method's perplexity minus none's over the tokens where the
  // methods part ways (those past the training length, or all of a length
  // within it); a column only when none was run.
  const bool has_none = std::find(r.methods.begin(), r.methods.end(), "none") != r.methods.end();
  bool any_same = false;
  for (const std::int64_t length : r.lengths) {
    const bool beyond = length > r.train_length;
    const std::int64_t compared_from = beyond ? r.train_length : 1;
    out << "\n### " << length << " tokens (" << TimesTraining(length, r.train_length) << " the training length)\n\n"
        << "| method | as run |";
    if (beyond) out << " ppl, tokens < " << train << " | ppl, tokens >= " << train << " |";
    out << " ppl, all |";
    if (has_none) out << (beyond ? " vs none, tokens >= " + train + " |" : std::string(" vs none |"));
    out << "\n|---|---|" << (beyond ? "---:|---:|" : "") << "---:|" << (has_none ? "---:|" : "") << "\n";
    for (const std::string& method : r.methods) {
      const StudyCell& c = CellAt(r, method, length);
      any_same = any_same || c.same_as_none;
      const std::string mark = c.same_as_none ? "*" : "";
      out << "| " << method << " | " << c.resolved << " |";
      if (beyond) {
        out << " " << Fixed(PerplexityOfTokens(c, 1, r.train_length), 2) << mark << " | "
            << Fixed(PerplexityOfTokens(c, r.train_length, length), 2) << mark << " |";
      }
      out << " " << Fixed(PerplexityOfTokens(c, 1, length), 2) << mark << " |";
      if (has_none) {
        const double none = PerplexityOfTokens(CellAt(r, "none", length), compared_from, length);
        out << " " << Signed(PerplexityOfTokens(c, compared_from, length) - none) << " |";
      }
      out << "\n";
    }
  }
  if (has_none) {
    out << "\nvs none: the method's perplexity minus `none`'s (the model's own RoPE) over the same tokens; "
           "negative is better.\n";
  }
  if (any_same) {
    out << "\n\\* the method is exactly the model's own RoPE at this length (its defaults at s = 1): `none`'s "
           "numbers, not run again.\n";
  }
  return out.str();
}

std::string StudyJson(const StudyReport& r) {
  Json json{
      {"model", r.model},     {"text", r.text},     {"text_tokens", r.text_tokens}, {"train_length", r.train_length},
      {"windows", r.windows}, {"bucket", r.bucket}, {"seconds", r.seconds},         {"results", Json::array()}};
  for (const StudyCell& c : r.cells) {
    Json cell{{"method", c.method},
              {"resolved", c.resolved},
              {"length", c.length},
              {"same_as_none", c.same_as_none},
              {"ppl", PerplexityOfTokens(c, 1, c.length)}};
    if (c.length > r.train_length) {
      cell["ppl_within"] = PerplexityOfTokens(c, 1, r.train_length);
      cell["ppl_beyond"] = PerplexityOfTokens(c, r.train_length, c.length);
    }
    cell["seconds"] = c.seconds;
    cell["tokens_per_s"] = c.tokens_per_s;
    const Buckets b = BucketMeans(c, r.bucket);
    cell["loss_by_position"] = {{"start", b.start}, {"mean_nll", b.mean_nll}};
    json["results"].push_back(std::move(cell));
  }
  return json.dump(2) + "\n";
}

void DrawStudyPlot(const StudyReport& r, const std::string& png_path, OutputFiles& outputs) {
  const std::int64_t length = r.lengths.back();
  std::vector<Buckets> curves;
  for (const std::string& method : r.methods) curves.push_back(BucketMeans(CellAt(r, method, length), r.bucket));
  const std::size_t points = curves.front().start.size();
  std::vector<double> best(points, std::numeric_limits<double>::infinity());
  for (const Buckets& b : curves) {
    for (std::size_t i = 0; i < points; ++i) best[i] = std::min(best[i], b.mean_nll[i]);
  }

  LinePlot loss, excess;
  loss.title = "(a) loss against position, mean per " + std::to_string(r.bucket) + " tokens";
  loss.y_label = "-ln p (nats)";
  excess.title = "(b) excess over the best method at each position";
  excess.y_label = "loss - best loss (nats)";
  double top_loss = 0, bottom_loss = std::numeric_limits<double>::infinity(), top_excess = 0;
  for (std::size_t m = 0; m < curves.size(); ++m) {
    PlotSeries a{r.methods[m], {}, {}, false, "lines lw 2"};
    PlotSeries b = a;
    for (std::size_t i = 0; i < points; ++i) {
      const double x = static_cast<double>(curves[m].start[i]) + 0.5 * static_cast<double>(r.bucket);
      a.x.push_back(x), a.y.push_back(curves[m].mean_nll[i]);
      b.x.push_back(x), b.y.push_back(curves[m].mean_nll[i] - best[i]);
      top_loss = std::max(top_loss, a.y.back()), bottom_loss = std::min(bottom_loss, a.y.back());
      top_excess = std::max(top_excess, b.y.back());
    }
    loss.series.push_back(std::move(a));
    excess.series.push_back(std::move(b));
  }
  // The training length as a dashed vertical line across each panel.
  const auto train = static_cast<double>(r.train_length);
  const std::string train_style = "lines dt 2 lw 1 lc rgb 'black'";
  if (r.train_length < length) {
    loss.series.push_back({"training length", {train, train}, {bottom_loss, top_loss}, false, train_style});
    excess.series.push_back({"training length", {train, train}, {0.0, top_excess}, false, train_style});
  }
  for (LinePlot* p : {&loss, &excess}) {
    p->x_label = "token position in a " + std::to_string(length) + "-token window";
    p->key_position = "outside right";
  }
  const std::string title = "Context extension on " + std::filesystem::path(r.model).stem().string() + " (trained on " +
                            std::to_string(r.train_length) + " tokens), " +
                            std::filesystem::path(r.text).filename().string();
  DrawLinePlotGrid({loss, excess}, title, 1, 1200, 460, png_path, &outputs);
}

}  // namespace posenc::cli
