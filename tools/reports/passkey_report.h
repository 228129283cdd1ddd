// What `posenc passkey` measured and its three views: a Markdown table
// (retrieval accuracy per method and length), the JSON of every trial, and
// heat maps of accuracy by depth and length (one panel per method).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "options/output_files.h"

namespace posenc::cli {

// One trial: a method at a length, the key at a depth.
struct PasskeyCell {
  std::string method;    // as asked ("yarn")
  std::string resolved;  // at this length ("yarn:factor=1.25")
  std::int64_t length = 0;
  double depth = 0;
  std::int64_t trial = 0;
  std::string key;
  std::int64_t prompt_tokens = 0;
  bool same_as_none = false;  // the model's own RoPE at this length: none's trial
  bool found = false;         // greedy generation contains the key
  bool exact = false;         // every answer token is the argmax (teacher forcing)
  double answer_nll = 0;
  std::string generated;
  double seconds = 0;
};

nlohmann::ordered_json PasskeyCellJson(const PasskeyCell& cell);
// Throws posenc::Error naming the missing or mistyped field.
PasskeyCell PasskeyCellFromJson(const nlohmann::json& json);

struct PasskeyReport {
  std::string model;
  std::int64_t train_length = 0;
  std::uint64_t seed = 0;
  std::int64_t max_new_tokens = 0;
  double seconds = 0;                 // the trials' compute, added up
  std::vector<std::string> methods;   // rows, in the order asked
  std::vector<std::int64_t> lengths;  // ascending
  std::vector<double> depths;         // ascending
  std::int64_t trials = 0;
  std::vector<PasskeyCell> cells;
};

std::string PasskeyMarkdown(const PasskeyReport& report);
std::string PasskeyJson(const PasskeyReport& report);
// Accuracy (found) by depth (rows) and length (columns), one panel per
// method; the PNG joins `outputs`.
void DrawPasskeyHeatmaps(const PasskeyReport& report, const std::string& png_path, OutputFiles& outputs);

}  // namespace posenc::cli
