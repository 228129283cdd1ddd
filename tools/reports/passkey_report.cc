#include "reports/passkey_report.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>

#include "posenc/error.h"
#include "posenc/rate_interval.h"
#include "reports/passkey_comparison.h"
#include "reports/plot.h"

namespace posenc::cli {
namespace {

struct Tally {
  std::int64_t trials = 0, found = 0, exact = 0;
  double nll = 0;
};

// Per (method, length) and per (method, length, depth).
Tally TallyOf(const PasskeyReport& report, const std::string& method, std::int64_t length, const double* depth) {
  Tally t;
  for (const PasskeyCell& c : report.cells) {
    if (c.method != method || c.length != length || (depth && c.depth != *depth)) continue;
    ++t.trials;
    t.found += c.found;
    t.exact += c.exact;
    t.nll += c.answer_nll;
  }
  if (t.trials > 0) t.nll /= static_cast<double>(t.trials);
  return t;
}

// The share of keys found with its 95% Wilson interval (every trial an
// independent draw of filler, key and depth), as JSON.
nlohmann::ordered_json RateJson(const Tally& t) {
  const RateInterval rate = WilsonInterval(t.found, t.trials);
  return {{"accuracy", rate.rate}, {"low", rate.low}, {"high", rate.high}};
}

// Whether `method` is the model's own RoPE at `length` (none's trials).
bool SameAsNone(const PasskeyReport& report, const std::string& method, std::int64_t length) {
  for (const PasskeyCell& c : report.cells) {
    if (c.method == method && c.length == length) return c.same_as_none && method != "none";
  }
  return false;
}

template <typename T>
T Field(const nlohmann::json& json, const char* name) {
  const auto it = json.find(name);
  Require(it != json.end(), "passkey", std::string("cell.") + name, Verbatim{"missing"}, "every cell has it");
  try {
    return it->get<T>();
  } catch (const nlohmann::json::exception&) {
    ThrowError("passkey", std::string("cell.") + name, it->dump(), "has the wrong type");
  }
}

std::string TableHead(const PasskeyReport& r) {
  std::string md = "| method |";
  for (const auto length : r.lengths) md += " " + std::to_string(length) + " |";
  md += "\n|---|";
  for (std::size_t i = 0; i < r.lengths.size(); ++i) md += "---|";
  return md + "\n";
}

std::string Count(const Tally& t) { return std::to_string(t.found) + "/" + std::to_string(t.trials); }

// A p-value in two significant digits (0.00049, 0.031, 0.5, 1).
std::string P(double p) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2g", p);
  return text;
}

// "yarn 10/12 (2/0, p = 0.5)": a method against the one the line is about,
// with the trials only that one / only this method found.
std::string Against(const PasskeyPair& pair, const std::string& about) {
  const bool a = pair.a == about;
  const std::int64_t found = a ? pair.found_b : pair.found_a, mine = a ? pair.test.only_a : pair.test.only_b,
                     theirs = a ? pair.test.only_b : pair.test.only_a;
  return (a ? pair.b : pair.a) + " " + std::to_string(found) + "/" + std::to_string(pair.trials) + " (" +
         std::to_string(mine) + "/" + std::to_string(theirs) + ", p = " + P(pair.test.p_value) + ")";
}

std::string Join(const std::vector<std::string>& parts) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? "; " : "") + parts[i];
  return out;
}

// The verdicts at one length: the method with the most found, those within
// noise of it, those it beats, then every other pair beyond noise.
std::string ComparisonMarkdown(const PasskeyReport& r, const PasskeyLengthComparison& at) {
  std::string md = "**" + std::to_string(at.length) + " tokens.** ";
  if (at.methods.size() < 2) {
    md += "One method computed here: nothing to compare.";
  } else {
    std::vector<std::string> within, beaten, others;
    for (const PasskeyPair& pair : at.pairs) {
      if (pair.a == at.most_found || pair.b == at.most_found) {
        (pair.BeyondNoise() ? beaten : within).push_back(Against(pair, at.most_found));
      } else if (pair.BeyondNoise()) {
        const std::string winner = pair.Winner();
        others.push_back(winner + " beats " + Against(pair, winner));
      }
    }
    const Tally best = TallyOf(r, at.most_found, at.length, nullptr);
    md += "Most found: " + at.most_found + " " + Count(best) + ". ";
    md += within.empty() ? "No method within noise of it. " : "Within noise of it: " + Join(within) + ". ";
    md += beaten.empty() ? "It beats no method. " : "It beats " + Join(beaten) + ". ";
    md += others.empty() ? "Every other pair is within noise." : "Other pairs beyond noise: " + Join(others) + ".";
  }
  if (!at.same_trials.empty()) {
    std::vector<std::string> same;
    for (const auto& [method, of] : at.same_trials) same.push_back(method + " = " + of);
    md += " Same trials (one computation): " + Join(same) + ".";
  }
  return md + "\n";
}

std::string IndependentMarkdown(const PasskeyReport& r) {
  std::string md = "Passkey retrieval, " + r.model + " (trained on " + std::to_string(r.train_length) +
                   " tokens): " + std::to_string(r.trials) +
                   " independent trials per length, each its own filler (the landmark-attention sentences in an "
                   "order of its own), key and depth (uniform in [0, 1]), drawn from seed " +
                   std::to_string(r.seed) +
                   "; every method sees the same trials. Keys found by greedy generation / trials, the share found "
                   "with its 95% Wilson interval; in parentheses, answers exact under teacher forcing. * = the "
                   "model's own RoPE at this length (none's trials).\n\n";
  md += TableHead(r);
  for (const std::string& method : r.methods) {
    md += "| " + method + " |";
    for (const auto length : r.lengths) {
      const Tally t = TallyOf(r, method, length, nullptr);
      char cell[128];
      if (t.trials == 0) {
        std::snprintf(cell, sizeof cell, " - |");
      } else {
        const RateInterval rate = WilsonInterval(t.found, t.trials);
        std::snprintf(cell, sizeof cell, " %s (%lld)%s %.0f%% [%.0f, %.0f] |", Count(t).c_str(),
                      static_cast<long long>(t.exact), SameAsNone(r, method, length) ? "*" : "", 100 * rate.rate,
                      100 * rate.low, 100 * rate.high);
      }
      md += cell;
    }
    md += "\n";
  }
  md +=
      "\nBetween methods, paired on the same trials: McNemar's exact test (two-sided) on the trials only one of "
      "the two found. \"A beats B k/n (x/y, p)\": B found k of the n trials, x trials only A found and y only B. "
      "\"Beats\" where p < 0.05, otherwise within noise, and no order is drawn between methods within noise of "
      "each other (each p is of its pair, not corrected for the number of pairs).\n\n";
  for (const PasskeyLengthComparison& at : ComparePasskeyMethods(r)) md += ComparisonMarkdown(r, at) + "\n";
  md.pop_back();  // one newline at the end
  return md;
}

std::string FixedDepthMarkdown(const PasskeyReport& r) {
  std::string depths;
  for (const double depth : r.depths) {
    char text[32];
    std::snprintf(text, sizeof text, "%s%g", depths.empty() ? "" : " / ", depth);
    depths += text;
  }
  std::string md = "Passkey retrieval, " + r.model + " (trained on " + std::to_string(r.train_length) +
                   " tokens), the fixed-depth design: keys found by greedy generation at each depth (" + depths +
                   "), of " + std::to_string(r.trials) + (r.trials == 1 ? " key" : " keys") +
                   " a depth, all in the one published filler. The keys at one depth share one filler and are "
                   "not independent trials: no interval is given and no rate compared (independent trials: posenc "
                   "passkey without --depths). * = the model's own RoPE at this length (none's trials).\n\n";
  md += TableHead(r);
  for (const std::string& method : r.methods) {
    md += "| " + method + " |";
    for (const auto length : r.lengths) {
      std::string cell;
      for (const double depth : r.depths) {
        const Tally t = TallyOf(r, method, length, &depth);
        cell += (cell.empty() ? " " : " / ") + (t.trials ? std::to_string(t.found) : std::string("-"));
      }
      md += cell + (SameAsNone(r, method, length) ? " *" : "") + " |";
    }
    md += "\n";
  }
  return md;
}

nlohmann::ordered_json ComparisonsJson(const PasskeyReport& r) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const PasskeyLengthComparison& at : ComparePasskeyMethods(r)) {
    nlohmann::ordered_json same = nlohmann::ordered_json::object();
    for (const auto& [method, of] : at.same_trials) same[method] = of;
    nlohmann::ordered_json pairs = nlohmann::ordered_json::array();
    for (const PasskeyPair& p : at.pairs) {
      const std::string winner = p.Winner();
      pairs.push_back({{"a", p.a},
                       {"b", p.b},
                       {"trials", p.trials},
                       {"found_a", p.found_a},
                       {"found_b", p.found_b},
                       {"only_a", p.test.only_a},
                       {"only_b", p.test.only_b},
                       {"p_value", p.test.p_value},
                       {"verdict", winner.empty() ? std::string("within noise") : winner + " beats"}});
    }
    out.push_back({{"length", at.length},
                   {"methods", at.methods},
                   {"same_trials", same},
                   {"most_found", at.most_found},
                   {"pairs", pairs}});
  }
  return out;
}

nlohmann::ordered_json SummaryJson(const PasskeyReport& r) {
  nlohmann::ordered_json summary = nlohmann::ordered_json::array();
  for (const std::string& method : r.methods) {
    for (const auto length : r.lengths) {
      const Tally t = TallyOf(r, method, length, nullptr);
      if (t.trials == 0) continue;  // a grid merged before every cell finished
      nlohmann::ordered_json entry{
          {"method", method}, {"length", length}, {"trials", t.trials}, {"found", t.found}, {"exact", t.exact}};
      if (r.independent) {
        entry.update(RateJson(t));
      } else {
        entry["accuracy"] = static_cast<double>(t.found) / static_cast<double>(t.trials);
      }
      entry["mean_answer_nll"] = t.nll;
      if (!r.independent) {
        nlohmann::ordered_json by_depth = nlohmann::ordered_json::array();
        for (const double depth : r.depths) {
          const Tally d = TallyOf(r, method, length, &depth);
          if (d.trials == 0) continue;
          by_depth.push_back({{"depth", depth}, {"trials", d.trials}, {"found", d.found}});
        }
        entry["by_depth"] = std::move(by_depth);
      }
      summary.push_back(std::move(entry));
    }
  }
  return summary;
}

// The rates by length (one line per method), then each method's trials at
// their length and depth, found or missed, when the panels fit on a page.
void DrawIndependent(const PasskeyReport& r, const std::string& png_path, OutputFiles& outputs) {
  const std::string x_label = "length (tokens; trained on " + std::to_string(r.train_length) + ")";
  // Room around the first and last length, whose points would sit on the frame.
  const auto [shortest, longest] = std::minmax_element(r.lengths.begin(), r.lengths.end());
  const double pad = std::max(0.08 * static_cast<double>(*longest - *shortest), 0.05 * static_cast<double>(*shortest));
  const double x_min = static_cast<double>(*shortest) - pad, x_max = static_cast<double>(*longest) + pad;
  LinePlot rates{.title = "share of keys found (%)",
                 .x_label = x_label,
                 .y_label = "found (%)",
                 .y_min = -2,
                 .y_max = 102,
                 .x_min = x_min,
                 .x_max = x_max,
                 .key_position = "below"};
  std::vector<LinePlot> panels;
  for (const std::string& method : r.methods) {
    PlotSeries line{.title = method, .style = "linespoints lw 2 pt 7"};
    PlotSeries found{.title = "found", .style = "points pt 7 ps 1.3 lc rgb '#2166ac'"};
    PlotSeries missed{.title = "missed", .style = "points pt 6 ps 1.3 lc rgb '#b2182b'"};
    for (const auto length : r.lengths) {
      const Tally t = TallyOf(r, method, length, nullptr);
      if (t.trials == 0) continue;
      line.x.push_back(static_cast<double>(length));
      line.y.push_back(100.0 * static_cast<double>(t.found) / static_cast<double>(t.trials));
    }
    for (const PasskeyCell& c : r.cells) {
      if (c.method != method) continue;
      PlotSeries& to = c.found ? found : missed;
      to.x.push_back(static_cast<double>(c.length));
      to.y.push_back(c.depth);
    }
    rates.series.push_back(std::move(line));
    LinePlot panel{.title = method + ": each trial",
                   .x_label = x_label,
                   .y_label = "depth of the key",
                   .y_min = -0.02,
                   .y_max = 1.02,
                   .x_min = x_min,
                   .x_max = x_max,
                   .key_position = "below"};
    for (PlotSeries* s : {&found, &missed}) {
      if (!s->x.empty()) panel.series.push_back(std::move(*s));
    }
    if (!panel.series.empty()) panels.push_back(std::move(panel));
  }
  // One page holds 16 panels: with more methods, the rates alone (every trial is in passkey.json).
  if (panels.size() + 1 > 16) panels.clear();
  panels.insert(panels.begin(), std::move(rates));
  const int columns = static_cast<int>(std::min<std::size_t>(3, panels.size()));
  const std::string model = std::filesystem::path(r.model).filename().string();
  DrawLinePlotGrid(panels, "Passkey retrieval, independent trials: " + model, columns, 520, 340, png_path, &outputs);
}

void DrawFixedDepth(const PasskeyReport& r, const std::string& png_path, OutputFiles& outputs) {
  std::vector<Heatmap> maps;
  for (const std::string& method : r.methods) {
    Heatmap map;
    map.title = method + ": share of keys found";
    map.x_label = "length (tokens; trained on " + std::to_string(r.train_length) + ")";
    map.y_label = "depth of the key";
    map.value_label = "";
    map.rows = static_cast<std::int64_t>(r.depths.size());
    map.cols = static_cast<std::int64_t>(r.lengths.size());
    map.range_min = 0;
    map.range_max = 1;
    map.square_cells = false;
    map.palette = "defined (0 '#b2182b', 0.5 '#fddbc7', 1 '#2166ac')";
    for (const auto length : r.lengths) map.col_labels.push_back(std::to_string(length));
    for (const double depth : r.depths) {
      char label[32];
      std::snprintf(label, sizeof label, "%g", depth);
      map.row_labels.emplace_back(label);
    }
    for (const double depth : r.depths) {
      for (const auto length : r.lengths) {
        const Tally t = TallyOf(r, method, length, &depth);
        map.values.push_back(t.trials ? static_cast<double>(t.found) / static_cast<double>(t.trials) : 0.0);
      }
    }
    maps.push_back(std::move(map));
  }
  const int columns = static_cast<int>(std::min<std::size_t>(4, r.methods.size()));
  // The model's file name, not its path: the title must fit one 420-pixel panel.
  const std::string model = std::filesystem::path(r.model).filename().string();
  DrawHeatmapGrid(maps, "Passkey retrieval: " + model, columns, png_path, 420, 340, &outputs);
}

}  // namespace

nlohmann::ordered_json PasskeyCellJson(const PasskeyCell& c) {
  nlohmann::ordered_json j{{"method", c.method},
                           {"resolved", c.resolved},
                           {"length", c.length},
                           {"depth", c.depth},
                           {"trial", c.trial},
                           {"key", c.key},
                           {"prompt_tokens", c.prompt_tokens}};
  if (!c.prompt_sha256.empty()) j["prompt_sha256"] = c.prompt_sha256;
  j["same_as_none"] = c.same_as_none;
  j["found"] = c.found;
  j["exact"] = c.exact;
  j["answer_nll"] = c.answer_nll;
  j["generated"] = c.generated;
  j["seconds"] = c.seconds;
  return j;
}

PasskeyCell PasskeyCellFromJson(const nlohmann::json& j) {
  PasskeyCell c;
  c.method = Field<std::string>(j, "method");
  c.resolved = Field<std::string>(j, "resolved");
  c.length = Field<std::int64_t>(j, "length");
  c.depth = Field<double>(j, "depth");
  c.trial = Field<std::int64_t>(j, "trial");
  c.key = Field<std::string>(j, "key");
  c.prompt_tokens = Field<std::int64_t>(j, "prompt_tokens");
  if (j.contains("prompt_sha256")) c.prompt_sha256 = Field<std::string>(j, "prompt_sha256");
  c.same_as_none = Field<bool>(j, "same_as_none");
  c.found = Field<bool>(j, "found");
  c.exact = Field<bool>(j, "exact");
  c.answer_nll = Field<double>(j, "answer_nll");
  c.generated = Field<std::string>(j, "generated");
  c.seconds = Field<double>(j, "seconds");
  return c;
}

std::string PasskeyMarkdown(const PasskeyReport& r) {
  return r.independent ? IndependentMarkdown(r) : FixedDepthMarkdown(r);
}

std::string PasskeyJson(const PasskeyReport& r) {
  nlohmann::ordered_json cells = nlohmann::ordered_json::array();
  for (const PasskeyCell& c : r.cells) cells.push_back(PasskeyCellJson(c));
  nlohmann::ordered_json out{{"model", r.model},
                             {"train_length", r.train_length},
                             {"design", r.independent ? "independent" : "fixed depths"},
                             {"seed", r.seed},
                             {"max_new_tokens", r.max_new_tokens},
                             {"trials", r.trials},
                             {"lengths", r.lengths}};
  if (!r.independent) out["depths"] = r.depths;
  out["methods"] = r.methods;
  out["seconds"] = r.seconds;
  out["summary"] = SummaryJson(r);
  if (r.independent) out["comparisons"] = ComparisonsJson(r);
  out["cells"] = std::move(cells);
  // Generated text need not be UTF-8 (a token can end inside a character): U+FFFD for those bytes.
  return out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

void DrawPasskeyPicture(const PasskeyReport& r, const std::string& png_path, OutputFiles& outputs) {
  if (r.independent) {
    DrawIndependent(r, png_path, outputs);
  } else {
    DrawFixedDepth(r, png_path, outputs);
  }
}

}  // namespace posenc::cli
