// The rules of posenc study's values, checked where its flags are parsed
// and where a study grid's file is read (study_grid.cc): one rule, one
// place. Each throws posenc::Error "[study] --flag = value: rule".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace posenc::cli {

void CheckStudyLength(std::int64_t length);    // --lengths, each
void CheckStudyWindows(std::int64_t windows);  // --windows
void CheckStudyBucket(std::int64_t bucket);    // --bucket

// Where one window of a study lies: which of the --text documents, and the
// token it starts at.
struct StudyWindow {
  std::int64_t document = 0;  // index into --text
  std::int64_t offset = 0;    // first token of the window in that document
};

// The windows of one length, the unit of independence of a study: window w
// of W goes to document w mod D (round-robin over the D texts), and the
// k-th of the n_d windows a document gets (k = w div D) starts at token
// k * floor(T_d / n_d) of its T_d tokens, so a document's windows are
// spread evenly over it and never overlap. Throws posenc::Error when there
// are fewer windows than texts (a text no window reads) and when a text
// holds fewer than n_d * length tokens, naming the text, its tokens and the
// rule.
std::vector<StudyWindow> PlanStudyWindows(const std::vector<std::string>& texts,
                                          const std::vector<std::int64_t>& text_tokens, std::int64_t windows,
                                          std::int64_t length);

// The input name under which grid.json keeps document d: "text" for the
// first (as a one-text grid has it), "text2", "text3", ... after it.
std::string StudyTextInput(std::size_t document);

}  // namespace posenc::cli
