// What `posenc passkey` measured and its three views, for each design
// (passkey_grid.h):
//   independent  a table of keys found / trials per method and length with
//                Wilson's interval, the methods compared paired on the same
//                trials (passkey_comparison.h), every trial in the JSON, and
//                a picture: the rates by length, and each trial's outcome at
//                its length and depth, one panel per method;
//   fixed depth  the keys found at each depth per method and length (no
//                interval: the keys at one depth share one filler and are
//                not independent trials), every trial in the JSON, and heat
//                maps by depth and length.
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
  std::string prompt_sha256;  // of the prompt's tokens; "" in fixed-depth cells, which predate it
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
  bool independent = false;           // the design: independent trials, or fixed depths
  double seconds = 0;                 // the trials' compute, added up
  std::vector<std::string> methods;   // rows, in the order asked
  std::vector<std::int64_t> lengths;  // ascending
  std::vector<double> depths;         // ascending; empty in the independent design (drawn per trial)
  std::int64_t trials = 0;            // per length (independent) or per depth
  std::vector<PasskeyCell> cells;
};

std::string PasskeyMarkdown(const PasskeyReport& report);
std::string PasskeyJson(const PasskeyReport& report);
// The picture of either design (above); the PNG joins `outputs`.
void DrawPasskeyPicture(const PasskeyReport& report, const std::string& png_path, OutputFiles& outputs);

}  // namespace posenc::cli
