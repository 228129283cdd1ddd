#include "reports/study_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "posenc/error.h"
#include "posenc/mean_interval.h"
#include "posenc/paired_comparison.h"
#include "reports/plot.h"

namespace posenc::cli {
namespace {

using Json = nlohmann::ordered_json;

std::string Fixed(double value, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, value);
  return buffer;
}

// A signed value: "+0.123", "-0.050".
std::string Signed(double value, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%+.*f", digits, value);
  return buffer;
}

// "1 window", "6 windows".
std::string Count(std::int64_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

// The tokens of a window a comparison reads: before the training length,
// at or past it, or all of it.
enum class Region { kWithin, kBeyond, kAll };

std::string RegionName(Region region, std::int64_t train_length) {
  switch (region) {
    case Region::kWithin: return "tokens < " + std::to_string(train_length);
    case Region::kBeyond: return "tokens >= " + std::to_string(train_length);
    case Region::kAll: break;
  }
  return "all tokens";
}

const char* RegionKey(Region region) {
  switch (region) {
    case Region::kWithin: return "within";
    case Region::kBeyond: return "beyond";
    case Region::kAll: break;
  }
  return "all";
}

// The regions a length's table reads: within and beyond the training
// length when the windows reach past it, else all of the window.
std::vector<Region> RegionsOf(std::int64_t length, std::int64_t train_length) {
  if (length > train_length) return {Region::kWithin, Region::kBeyond};
  return {Region::kAll};
}

// Each window's mean loss over a region, in window order: the units.
std::vector<double> WindowLosses(const StudyCell& cell, Region region) {
  std::vector<double> out;
  out.reserve(cell.windows.size());
  for (const StudyWindowResult& w : cell.windows) {
    switch (region) {
      case Region::kWithin: out.push_back(w.nll_within); break;
      case Region::kBeyond: out.push_back(w.nll_beyond.value_or(std::numeric_limits<double>::quiet_NaN())); break;
      case Region::kAll: out.push_back(w.nll); break;
    }
  }
  return out;
}

const StudyCell& CellAt(const StudyReport& report, const std::string& method, std::int64_t length) {
  for (const StudyCell& c : report.cells) {
    if (c.method == method && c.length == length) return c;
  }
  ThrowError("study", "cell", FormatValue(method + " at " + std::to_string(length)), "was not measured");
}

bool HasNone(const StudyReport& r) { return std::find(r.methods.begin(), r.methods.end(), "none") != r.methods.end(); }

// The paired comparisons of one region at one length: the best method
// (lowest mean loss) and each other's difference from it, and each
// method's difference from none.
struct RegionComparison {
  BestWithinNoise best;
  std::vector<std::optional<MeanInterval>> vs_none;  // per method; nullopt without none
};

RegionComparison Compare(const StudyReport& r, std::int64_t length, Region region) {
  std::vector<UnitValues> variants;
  for (const std::string& method : r.methods) {
    UnitValues values;
    for (const double x : WindowLosses(CellAt(r, method, length), region)) values.emplace_back(x);
    variants.push_back(std::move(values));
  }
  RegionComparison out{.best = FindBestWithinNoise(variants, {.higher_is_better = false}), .vs_none = {}};
  for (const std::string& method : r.methods) {
    if (!HasNone(r)) {
      out.vs_none.emplace_back();
      continue;
    }
    const std::vector<double> a = WindowLosses(CellAt(r, method, length), region);
    const std::vector<double> none = WindowLosses(CellAt(r, "none", length), region);
    out.vs_none.emplace_back(PairedDifferenceInterval(a, none));
  }
  return out;
}

// method - best's paired interval (positive: the best is ahead), or
// nullopt for the best itself.
std::optional<MeanInterval> VsBest(const RegionComparison& c, std::size_t method) {
  for (const VariantComparison& v : c.best.others) {
    if (v.variant == method) return v.difference;
  }
  return std::nullopt;
}

// "+0.123 [+0.045, +0.201]", the interval's verdict marked: a paired
// difference whose interval excludes 0.
// With one window there is no spread: the value alone, never a zero-width
// interval that would read as certainty.
std::string FormatDifference(const MeanInterval& d) {
  if (!d.HasSpread()) return Signed(d.mean, 3);
  return Signed(d.mean, 3) + " [" + Signed(d.low, 3) + ", " + Signed(d.high, 3) + "]";
}

// "21.93 [19.10, 25.18]": exp of the mean loss over the windows and of its
// t interval's ends.
std::string FormatPerplexity(const std::vector<double>& losses) {
  const MeanInterval m = StudentMeanInterval(losses);
  if (!m.HasSpread()) return Fixed(std::exp(m.mean), 2);
  return Fixed(std::exp(m.mean), 2) + " [" + Fixed(std::exp(m.low), 2) + ", " + Fixed(std::exp(m.high), 2) + "]";
}

std::string JoinMethods(const std::vector<std::string>& names) {
  if (names.empty()) return "none of the others";
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + std::string("`") + names[i] + "`";
  return out;
}

// The verdict lines of one region: which method has the lowest mean loss,
// which are within noise of it (no order among them), which it beats; and
// against none, which beat it, which it beats, which are within noise.
void WriteVerdicts(std::ostringstream& out, const StudyReport& r, const RegionComparison& c, Region region) {
  std::vector<std::string> tied, beaten;
  for (const VariantComparison& v : c.best.others) {
    (v.within_noise ? tied : beaten).push_back(r.methods[v.variant]);
  }
  out << "- " << RegionName(region, r.train_length) << ": lowest mean loss `" << r.methods[c.best.best]
      << "`; within noise of it (no order among these): " << JoinMethods(tied)
      << "; beaten by it: " << JoinMethods(beaten) << ".";
  if (HasNone(r)) {
    std::vector<std::string> better, worse, same;
    for (std::size_t m = 0; m < r.methods.size(); ++m) {
      if (r.methods[m] == "none") continue;
      const MeanInterval& d = *c.vs_none[m];
      (!d.ExcludesZero() ? same : d.mean < 0 ? better : worse).push_back(r.methods[m]);
    }
    out << " Against `none`: beat it " << JoinMethods(better) << "; beaten by it " << JoinMethods(worse)
        << "; within noise of it " << JoinMethods(same) << ".";
  }
  out << "\n";
}

std::string DocumentName(const StudyReport& r, std::int64_t document) {
  return std::filesystem::path(r.texts[static_cast<std::size_t>(document)]).filename().string();
}

// How many distinct documents the windows of a length come from.
std::size_t DocumentCount(const StudyCell& cell) {
  std::vector<std::int64_t> documents;
  for (const StudyWindowResult& w : cell.windows) documents.push_back(w.document);
  std::sort(documents.begin(), documents.end());
  return static_cast<std::size_t>(std::unique(documents.begin(), documents.end()) - documents.begin());
}

// Per bucket of positions: each window's loss (a cell's bucket_nll), as
// [bucket][window].
std::vector<std::vector<double>> BucketsByWindow(const StudyCell& cell) {
  std::vector<std::vector<double>> out(cell.windows.front().bucket_nll.size());
  for (const StudyWindowResult& w : cell.windows) {
    for (std::size_t b = 0; b < out.size(); ++b) out[b].push_back(w.bucket_nll[b]);
  }
  return out;
}

}  // namespace

std::int64_t DefaultStudyLength(std::int64_t train_length) { return train_length + train_length / 2; }

std::string StudyMarkdown(const StudyReport& r) {
  std::ostringstream out;
  const std::string train = std::to_string(r.train_length);
  out << "Loss of " << std::filesystem::path(r.model).filename().string() << " (trained on " << train << " tokens) on "
      << r.windows << (r.windows == 1 ? " window" : " windows") << " a length from " << r.texts.size()
      << (r.texts.size() == 1 ? " document" : " documents") << " (";
  for (std::size_t d = 0; d < r.texts.size(); ++d) {
    out << (d ? ", " : "") << DocumentName(r, static_cast<std::int64_t>(d)) << " " << r.text_tokens[d] << " tokens";
  }
  out << "): window w goes to document w mod " << r.texts.size()
      << ", and a document's n windows start at k * floor(tokens / n), k = 0..n-1 (spread over it, never "
         "overlapping). The unit of independence is a window: every interval is a 95% Student t interval over the "
      << r.windows << " windows, every difference is paired on them. " << Fixed(r.seconds, 0)
      << " s of compute (the cells' times added up).\n";
  if (r.pass == "decode") {
    out << "\nEach window runs token by token through the cache (the decode pass: the decode kernels are what is "
           "scored), "
        << (r.cached_keys == "as-written"
                ? "each method planned again at every step for the tokens so far and the cache keeping each key as "
                  "its step rotated it (keys as written: Hugging Face's generation under a dynamic method such as "
                  "dynamic NTK, stale keys included).\n"
                : "each method planned once for the window's length, as one forward pass plans it.\n");
  }
  if (r.windows < 2) {
    out << "\nWith one window there is no interval (no estimate of the spread) and nothing is told from noise.\n";
  }
  if (r.lengths.back() <= r.train_length) {
    out << "\nEvery length here is within the training length, where the methods are the model's own RoPE or "
           "close to it: nothing breaks and the rows barely differ. A length past "
        << train << " shows the effect, e.g. " << DefaultStudyLength(r.train_length) << " (1.5x).\n";
  }
  bool any_same = false;
  for (const std::int64_t length : r.lengths) {
    const std::vector<Region> regions = RegionsOf(length, r.train_length);
    std::vector<RegionComparison> comparisons;
    comparisons.reserve(regions.size());
    for (const Region region : regions) comparisons.push_back(Compare(r, length, region));
    out << "\n### " << length << " tokens ("
        << Fixed(static_cast<double>(length) / static_cast<double>(r.train_length), 2) << "x the training length), "
        << Count(r.windows, "window") << " from "
        << Count(static_cast<std::int64_t>(DocumentCount(CellAt(r, r.methods[0], length))), "document")
        << "\n\n| method | as run |";
    for (const Region region : regions) out << " ppl, " << RegionName(region, r.train_length) << " |";
    for (const Region region : regions) {
      if (HasNone(r)) out << " vs none, " << RegionName(region, r.train_length) << " |";
    }
    out << " vs best, " << RegionName(regions.back(), r.train_length) << " |\n|---|---|";
    for (std::size_t i = 0; i < regions.size() * (HasNone(r) ? 2 : 1) + 1; ++i) out << "---:|";
    out << "\n";
    for (std::size_t m = 0; m < r.methods.size(); ++m) {
      const StudyCell& c = CellAt(r, r.methods[m], length);
      any_same = any_same || c.same_as_none;
      const std::string mark = c.same_as_none ? "*" : "";
      out << "| " << c.method << " | " << c.resolved << " |";
      for (const Region region : regions) out << " " << FormatPerplexity(WindowLosses(c, region)) << mark << " |";
      for (std::size_t g = 0; HasNone(r) && g < regions.size(); ++g) {
        out << " " << (c.method == "none" ? std::string("0") : FormatDifference(*comparisons[g].vs_none[m])) << " |";
      }
      const std::optional<MeanInterval> best = VsBest(comparisons.back(), m);
      out << " " << (best ? FormatDifference(*best) : std::string("best")) << " |\n";
    }
    out << "\n";
    // One window: no verdict lines (the note above the tables says why).
    for (std::size_t g = 0; r.windows >= 2 && g < regions.size(); ++g) {
      WriteVerdicts(out, r, comparisons[g], regions[g]);
    }
  }
  out << "\nppl: exp of the mean over the windows of each window's mean loss (nats a token), [exp of the ends of its "
         "95% t interval]. vs none, vs best: the method's mean loss minus `none`'s, or minus the best method's, "
         "paired window by window (nats a token; negative is lower loss) [95% t interval of the paired "
         "differences]. A method beats another only where that interval excludes 0; otherwise they are within "
         "noise, and no order is drawn between them.\n";
  if (any_same) {
    out << "\n\\* the method is exactly the model's own RoPE at this length (its defaults at s = 1): `none`'s "
           "numbers, not run again.\n";
  }
  return out.str();
}

std::string StudyJson(const StudyReport& r) {
  Json texts = Json::array();
  for (std::size_t d = 0; d < r.texts.size(); ++d)
    texts.push_back({{"path", r.texts[d]}, {"tokens", r.text_tokens[d]}});
  Json json{{"model", r.model},
            {"texts", texts},
            {"train_length", r.train_length},
            {"windows", r.windows},
            {"window_rule",
             "window w of `windows` is read from text w mod (number of texts); the k-th of a text's n windows starts "
             "at token k * floor(tokens / n)"},
            {"unit", "a window; intervals are 95% Student t over the windows, differences paired on them"},
            {"bucket", r.bucket},
            {"seconds", r.seconds},
            {"lengths", Json::array()}};
  if (r.pass == "decode") json.update({{"pass", r.pass}, {"cached_keys", r.cached_keys}});
  for (const std::int64_t length : r.lengths) {
    Json at{{"length", length}, {"methods", Json::array()}, {"comparisons", Json::object()}};
    const std::vector<Region> regions = RegionsOf(length, r.train_length);
    std::vector<RegionComparison> comparisons;
    comparisons.reserve(regions.size());
    for (const Region region : regions) comparisons.push_back(Compare(r, length, region));
    for (std::size_t m = 0; m < r.methods.size(); ++m) {
      const StudyCell& c = CellAt(r, r.methods[m], length);
      Json cell{{"method", c.method}, {"resolved", c.resolved}, {"same_as_none", c.same_as_none}};
      for (std::size_t g = 0; g < regions.size(); ++g) {
        const MeanInterval loss = StudentMeanInterval(WindowLosses(c, regions[g]));
        Json region{{"mean_nll", loss.mean}, {"low", loss.low},       {"high", loss.high},
                    {"sd", loss.sd},         {"windows", loss.count}, {"ppl", std::exp(loss.mean)}};
        if (comparisons[g].vs_none[m]) {
          const MeanInterval& d = *comparisons[g].vs_none[m];
          region["vs_none"] = {{"mean", d.mean}, {"low", d.low}, {"high", d.high}, {"excludes_zero", d.ExcludesZero()}};
        }
        if (const std::optional<MeanInterval> best = VsBest(comparisons[g], m)) {
          region["vs_best"] = {
              {"mean", best->mean}, {"low", best->low}, {"high", best->high}, {"excludes_zero", best->ExcludesZero()}};
        }
        cell[RegionKey(regions[g])] = std::move(region);
      }
      Json windows = Json::array();
      for (const StudyWindowResult& w : c.windows) {
        windows.push_back({{"document", w.document},
                           {"text", DocumentName(r, w.document)},
                           {"offset", w.offset},
                           {"nll", w.nll},
                           {"nll_within", w.nll_within},
                           {"nll_beyond", w.nll_beyond ? Json(*w.nll_beyond) : Json(nullptr)},
                           {"bucket_nll", w.bucket_nll},
                           {"seconds", w.seconds}});
      }
      cell["windows"] = std::move(windows);
      at["methods"].push_back(std::move(cell));
    }
    for (std::size_t g = 0; g < regions.size(); ++g) {
      Json within = Json::array(), beaten = Json::array();
      for (const VariantComparison& v : comparisons[g].best.others) {
        (v.within_noise ? within : beaten).push_back(r.methods[v.variant]);
      }
      at["comparisons"][RegionKey(regions[g])] = {
          {"best", r.methods[comparisons[g].best.best]}, {"within_noise_of_best", within}, {"beaten_by_best", beaten}};
    }
    json["lengths"].push_back(std::move(at));
  }
  return json.dump(2) + "\n";
}

void DrawStudyPlot(const StudyReport& r, const std::string& png_path, OutputFiles& outputs) {
  const std::int64_t length = r.lengths.back();
  // Panel (b) pairs each window with the reference method's same window.
  const std::string reference = HasNone(r) ? std::string("none") : r.methods.front();
  const std::vector<std::vector<double>> reference_buckets = BucketsByWindow(CellAt(r, reference, length));
  LinePlot loss, excess;
  loss.title = "(a) loss against position, mean per " + std::to_string(r.bucket) + " tokens over " +
               std::to_string(r.windows) + " windows, 95% band dashed";
  loss.y_label = "-ln p (nats)";
  excess.title = "(b) loss minus " + reference + "'s, paired per window: mean, 95% band dashed";
  excess.y_label = "loss - " + reference + " (nats)";
  double top = -std::numeric_limits<double>::infinity(), bottom = std::numeric_limits<double>::infinity();
  double top_excess = 0, bottom_excess = 0;
  for (std::size_t m = 0; m < r.methods.size(); ++m) {
    const std::vector<std::vector<double>> buckets = BucketsByWindow(CellAt(r, r.methods[m], length));
    const std::string colour = " lc " + std::to_string(m + 1);
    PlotSeries a{r.methods[m], {}, {}, false, "lines lw 2" + colour};
    PlotSeries a_low{"", {}, {}, false, "lines dt 2 lw 1" + colour}, a_high = a_low;
    PlotSeries b = a, b_low = a_low, b_high = a_low;
    for (std::size_t i = 0; i < buckets.size(); ++i) {
      const double x = (static_cast<double>(i) + 0.5) * static_cast<double>(r.bucket);
      const MeanInterval mean = StudentMeanInterval(buckets[i]);
      const MeanInterval diff = PairedDifferenceInterval(buckets[i], reference_buckets[i]);
      a.x.push_back(x), a.y.push_back(mean.mean), a_low.x.push_back(x), a_low.y.push_back(mean.low);
      a_high.x.push_back(x), a_high.y.push_back(mean.high);
      b.x.push_back(x), b.y.push_back(diff.mean), b_low.x.push_back(x), b_low.y.push_back(diff.low);
      b_high.x.push_back(x), b_high.y.push_back(diff.high);
      top = std::max(top, mean.high), bottom = std::min(bottom, mean.low);
      top_excess = std::max(top_excess, diff.high), bottom_excess = std::min(bottom_excess, diff.low);
    }
    loss.series.push_back(std::move(a));
    excess.series.push_back(std::move(b));
    if (r.windows > 1) {
      for (PlotSeries* s : {&a_low, &a_high}) loss.series.push_back(std::move(*s));
      for (PlotSeries* s : {&b_low, &b_high}) excess.series.push_back(std::move(*s));
    }
  }
  // The training length as a dashed vertical line across each panel.
  const auto train = static_cast<double>(r.train_length);
  const std::string train_style = "lines dt 2 lw 1 lc rgb 'black'";
  if (r.train_length < length) {
    loss.series.push_back({"training length", {train, train}, {bottom, top}, false, train_style});
    excess.series.push_back({"training length", {train, train}, {bottom_excess, top_excess}, false, train_style});
  }
  for (LinePlot* p : {&loss, &excess}) {
    p->x_label = "token position in a " + std::to_string(length) + "-token window";
    p->key_position = "outside right";
  }
  const std::string title = "Context extension on " + std::filesystem::path(r.model).stem().string() + " (trained on " +
                            std::to_string(r.train_length) + " tokens), " + std::to_string(r.windows) +
                            " windows from " + std::to_string(r.texts.size()) + " documents";
  DrawLinePlotGrid({loss, excess}, title, 1, 1200, 460, png_path, &outputs);
}

}  // namespace posenc::cli
