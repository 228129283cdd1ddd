// What `posenc study` measured, and the three views of it it writes: a
// Markdown table (perplexity within and beyond the training length), the
// JSON of every number, and the picture of loss against token position.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "options/output_files.h"

namespace posenc::cli {

// One method at one context length.
struct StudyCell {
  std::string method;    // the method's text form as asked ("yarn")
  std::string resolved;  // with its parameters at this length ("yarn:factor=1.5")
  std::int64_t length = 0;
  bool same_as_none = false;  // the model's own RoPE at this length: `none`'s numbers
  double seconds = 0;
  double tokens_per_s = 0;
  // [length - 1]: mean over the windows of -ln p(token i + 1 | tokens 0..i).
  std::vector<double> position_nll;
};

struct StudyReport {
  std::string model, text;
  std::int64_t text_tokens = 0;
  std::int64_t train_length = 0;
  std::int64_t windows = 1;
  std::int64_t bucket = 256;          // tokens per point of the loss curves
  double seconds = 0;                 // the cells' compute, added up
  std::vector<std::string> methods;   // rows, in the order asked
  std::vector<std::int64_t> lengths;  // ascending
  std::vector<StudyCell> cells;
};

// The length a study runs when --lengths is not given, and the one its note
// suggests when every length is within the training length: 1.5x the
// training length (12288 for SmolLM2's 8192), far enough past it for every
// method to show its behaviour, short enough for SmolLM2's default study to
// take ~8 minutes on 2 cores.
std::int64_t DefaultStudyLength(std::int64_t train_length);

// exp(mean -ln p) over the predicted tokens at positions [begin, end) of the
// window (position 0 is never predicted).
double PerplexityOfTokens(const StudyCell& cell, std::int64_t begin, std::int64_t end);

std::string StudyMarkdown(const StudyReport& report);
std::string StudyJson(const StudyReport& report);
// Loss against position at the longest length: (a) each method's mean loss
// per bucket of tokens, (b) its excess over the best method at that
// position, which takes out what the text itself does to the loss.
// The PNG joins `outputs` (written when the caller commits them).
void DrawStudyPlot(const StudyReport& report, const std::string& png_path, OutputFiles& outputs);

}  // namespace posenc::cli
