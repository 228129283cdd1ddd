#include "reports/passkey_report.h"

#include <cstdio>
#include <filesystem>
#include <map>

#include "posenc/error.h"
#include "posenc/rate_interval.h"
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

// The share of keys found with its 95% Wilson interval (every trial is an
// independent key), as JSON.
nlohmann::ordered_json RateJson(const Tally& t) {
  const RateInterval rate = WilsonInterval(t.found, t.trials);
  return {{"accuracy", rate.rate}, {"low", rate.low}, {"high", rate.high}};
}

std::string Resolved(const PasskeyReport& report, const std::string& method, std::int64_t length) {
  for (const PasskeyCell& c : report.cells) {
    if (c.method == method && c.length == length) return c.resolved + (c.same_as_none && method != "none" ? "*" : "");
  }
  return method;
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

}  // namespace

nlohmann::ordered_json PasskeyCellJson(const PasskeyCell& c) {
  return {{"method", c.method},
          {"resolved", c.resolved},
          {"length", c.length},
          {"depth", c.depth},
          {"trial", c.trial},
          {"key", c.key},
          {"prompt_tokens", c.prompt_tokens},
          {"same_as_none", c.same_as_none},
          {"found", c.found},
          {"exact", c.exact},
          {"answer_nll", c.answer_nll},
          {"generated", c.generated},
          {"seconds", c.seconds}};
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
  c.same_as_none = Field<bool>(j, "same_as_none");
  c.found = Field<bool>(j, "found");
  c.exact = Field<bool>(j, "exact");
  c.answer_nll = Field<double>(j, "answer_nll");
  c.generated = Field<std::string>(j, "generated");
  c.seconds = Field<double>(j, "seconds");
  return c;
}

std::string PasskeyMarkdown(const PasskeyReport& r) {
  std::string md = "Passkey retrieval, " + r.model + " (trained on " + std::to_string(r.train_length) +
                   " tokens): keys found by greedy generation / trials (" + std::to_string(r.depths.size()) +
                   " depths x " + std::to_string(r.trials) +
                   " trials per length), the share found with its 95% Wilson interval; in parentheses, answers "
                   "exact under teacher forcing. * = the model's own RoPE at this length (none's trials). The rate "
                   "by depth is in passkey.json and passkey.png.\n\n| method |";
  for (const auto length : r.lengths) md += " " + std::to_string(length) + " |";
  md += "\n|---|";
  for (std::size_t i = 0; i < r.lengths.size(); ++i) md += "---|";
  md += "\n";
  for (const std::string& method : r.methods) {
    md += "| " + method + " |";
    for (const auto length : r.lengths) {
      const Tally t = TallyOf(r, method, length, nullptr);
      char cell[128];
      if (t.trials == 0) {
        std::snprintf(cell, sizeof cell, " - |");
      } else {
        const RateInterval rate = WilsonInterval(t.found, t.trials);
        std::snprintf(cell, sizeof cell, " %lld/%lld (%lld)%s %.0f%% [%.0f, %.0f] |", static_cast<long long>(t.found),
                      static_cast<long long>(t.trials), static_cast<long long>(t.exact),
                      Resolved(r, method, length).back() == '*' ? "*" : "", 100 * rate.rate, 100 * rate.low,
                      100 * rate.high);
      }
      md += cell;
    }
    md += "\n";
  }
  return md;
}

std::string PasskeyJson(const PasskeyReport& r) {
  nlohmann::ordered_json cells = nlohmann::ordered_json::array();
  for (const PasskeyCell& c : r.cells) cells.push_back(PasskeyCellJson(c));
  nlohmann::ordered_json summary = nlohmann::ordered_json::array();
  for (const std::string& method : r.methods) {
    for (const auto length : r.lengths) {
      const Tally t = TallyOf(r, method, length, nullptr);
      if (t.trials == 0) continue;  // a grid merged before every cell finished
      nlohmann::ordered_json entry{
          {"method", method}, {"length", length}, {"trials", t.trials}, {"found", t.found}, {"exact", t.exact}};
      entry.update(RateJson(t));
      entry["mean_answer_nll"] = t.nll;
      nlohmann::ordered_json by_depth = nlohmann::ordered_json::array();
      for (const double depth : r.depths) {
        const Tally d = TallyOf(r, method, length, &depth);
        if (d.trials == 0) continue;
        nlohmann::ordered_json at{{"depth", depth}, {"trials", d.trials}, {"found", d.found}};
        at.update(RateJson(d));
        by_depth.push_back(std::move(at));
      }
      entry["by_depth"] = std::move(by_depth);
      summary.push_back(std::move(entry));
    }
  }
  const nlohmann::ordered_json out{{"model", r.model},     {"train_length", r.train_length},
                                   {"seed", r.seed},       {"max_new_tokens", r.max_new_tokens},
                                   {"trials", r.trials},   {"lengths", r.lengths},
                                   {"depths", r.depths},   {"methods", r.methods},
                                   {"seconds", r.seconds}, {"summary", summary},
                                   {"cells", cells}};
  // Generated text need not be UTF-8 (a token can end inside a character): U+FFFD for those bytes.
  return out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

void DrawPasskeyHeatmaps(const PasskeyReport& r, const std::string& png_path, OutputFiles& outputs) {
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

}  // namespace posenc::cli
