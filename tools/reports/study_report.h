// What `posenc study` measured, and the three views of it it writes: a
// Markdown table (perplexity within and beyond the training length, with
// intervals over the windows and paired differences), the JSON of every
// window's numbers, and the picture of loss against token position.
//
// The unit of independence is a window (of a distinct document or at a
// distinct offset): every interval is a Student t interval over the
// windows, every difference is paired on them (mean_interval.h,
// paired_comparison.h), and a method "beats" another only where the paired
// interval excludes 0 (docs/results/README.md, "Statistics").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "options/output_files.h"

namespace posenc::cli {

// One window of one method at one length: the unit of independence.
struct StudyWindowResult {
  std::int64_t document = 0;  // index into StudyReport::texts
  std::int64_t offset = 0;    // the window's first token in that text
  // Mean -ln p (nats a token) over the window's predicted tokens: all of
  // them, those before the training length, those at or past it (none
  // when the window is within the training length).
  double nll = 0, nll_within = 0;
  std::optional<double> nll_beyond;
  std::vector<double> bucket_nll;  // per bucket of positions [b * bucket, (b + 1) * bucket)
  double seconds = 0;
};

// One method at one context length, on every window of that length.
struct StudyCell {
  std::string method;    // the method's text form as asked ("yarn")
  std::string resolved;  // with its parameters at this length ("yarn:factor=1.5")
  std::int64_t length = 0;
  bool same_as_none = false;               // the model's own RoPE at this length: `none`'s numbers
  std::vector<StudyWindowResult> windows;  // in window order, the same windows for every method
};

struct StudyReport {
  std::string model;
  std::vector<std::string> texts;  // the documents windows are drawn from
  std::vector<std::int64_t> text_tokens;
  std::int64_t train_length = 0;
  std::int64_t windows = 1;           // per length
  std::int64_t bucket = 256;          // tokens per point of the loss curves
  double seconds = 0;                 // the cells' compute, added up
  std::vector<std::string> methods;   // rows, in the order asked
  std::vector<std::int64_t> lengths;  // ascending
  std::vector<StudyCell> cells;
  std::string pass = "prefill";           // or "decode": each window token by token through the cache
  std::string cached_keys = "relowered";  // or "as-written" (decode): keys kept as their step rotated them
};

// The length a study runs when --lengths is not given, and the one its note
// suggests when every length is within the training length: 1.5x the
// training length (12288 for SmolLM2's 8192), far enough past it for every
// method to show its behaviour, short enough for SmolLM2's default study to
// take ~8 minutes on 2 cores.
std::int64_t DefaultStudyLength(std::int64_t train_length);

std::string StudyMarkdown(const StudyReport& report);
std::string StudyJson(const StudyReport& report);
// Loss against position at the longest length: (a) each method's mean loss
// per bucket of tokens over the windows, with its 95% band, (b) its paired
// difference from `none` (or, without none, from the first method) per
// window, mean and band: what the texts do to the loss cancels.
// The PNG joins `outputs` (written when the caller commits them).
void DrawStudyPlot(const StudyReport& report, const std::string& png_path, OutputFiles& outputs);

}  // namespace posenc::cli
