// Independent passkey trials (DrawPasskeyTrial, ShuffledPasskeyFiller): each
// trial its own filler, key and depth, fixed by (seed, trial). The filler is
// held to the published one's sentences, transcribed here from the
// landmark-attention run_test.py string, and the prompt to its definition
// on the tiny model's byte-level tokenizer (one token a character).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "posenc/passkey.h"
#include "random_llama.h"
#include "test_util.h"

namespace posenc {
namespace {

using testing::ExpectError;
using testing::RandomLlamaGguf;

// epfml/landmark-attention llama/run_test.py: garbage = "...".
const std::string kPublished =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";

// The published filler's sentences, split at ". ".
std::vector<std::string> Sentences(const std::string& text) {
  std::vector<std::string> out;
  std::size_t start = 0, end = text.find(". ");
  while (end != std::string::npos) {
    out.push_back(text.substr(start, end + 1 - start));
    start = end + 2;
    end = text.find(". ", start);
  }
  out.push_back(text.substr(start));
  return out;
}

TEST(PasskeyTrials, DrawIsFixedBySeedAndTrialAndTheKeyIsPasskeyKey) {
  std::set<double> depths;
  std::set<std::uint64_t> fillers;
  for (std::int64_t trial = 0; trial < 200; ++trial) {
    const PasskeyTrial t = DrawPasskeyTrial(5, trial);
    const PasskeyTrial again = DrawPasskeyTrial(5, trial);
    EXPECT_EQ(t.trial, trial);
    EXPECT_EQ(t.key, PasskeyKey(5, trial));
    EXPECT_EQ(t.depth, again.depth);
    EXPECT_EQ(t.filler_seed, again.filler_seed);
    EXPECT_GE(t.depth, 0.0);
    EXPECT_LT(t.depth, 1.0);
    depths.insert(t.depth);
    fillers.insert(t.filler_seed);
  }
  EXPECT_EQ(depths.size(), 200u);
  EXPECT_EQ(fillers.size(), 200u);
  EXPECT_NE(DrawPasskeyTrial(5, 0).depth, DrawPasskeyTrial(6, 0).depth);
  EXPECT_NE(DrawPasskeyTrial(5, 0).filler_seed, DrawPasskeyTrial(6, 0).filler_seed);
  ExpectError([] { DrawPasskeyTrial(0, -1); }, {"trial = -1"});
}

// Uniform in [0, 1), as run_test.py's randint(0, n_garbage): each tenth of
// 10,000 draws holds 1,000 +- 4.5 standard deviations (sd = 30).
TEST(PasskeyTrials, DepthsAreUniform) {
  std::vector<int> tenths(10);
  for (std::int64_t trial = 0; trial < 10000; ++trial)
    ++tenths[static_cast<int>(DrawPasskeyTrial(0, trial).depth * 10)];
  for (int i = 0; i < 10; ++i) {
    EXPECT_GT(tenths[i], 865) << "tenth " << i;
    EXPECT_LT(tenths[i], 1135) << "tenth " << i;
  }
}

// Blocks of five: every block the published sentences in some order, joined
// by spaces; a shorter filler is the start of a longer one.
TEST(PasskeyTrials, FillerIsThePublishedSentencesInBlocksOfFive) {
  const std::vector<std::string> published = Sentences(kPublished);
  ASSERT_EQ(published.size(), 5u);
  std::vector<std::string> sorted_published = published;
  std::sort(sorted_published.begin(), sorted_published.end());
  const std::string filler = ShuffledPasskeyFiller(42, 100 * kPublished.size());
  ASSERT_EQ(filler.size(), 100 * kPublished.size());
  const std::vector<std::string> sentences = Sentences(filler);
  std::set<std::vector<std::string>> orders;
  for (std::size_t block = 0; block + 5 <= sentences.size() - 1; block += 5) {  // the last one may be cut
    std::vector<std::string> five(sentences.begin() + block, sentences.begin() + block + 5);
    orders.insert(five);
    std::sort(five.begin(), five.end());
    ASSERT_EQ(five, sorted_published) << "block " << block / 5;
  }
  EXPECT_GT(orders.size(), 40u);  // of 120 orders, about 66 distinct in 99 blocks
  EXPECT_EQ(ShuffledPasskeyFiller(42, 1000), filler.substr(0, 1000));
  EXPECT_EQ(ShuffledPasskeyFiller(42, 0), "");
  EXPECT_NE(ShuffledPasskeyFiller(43, 1000), ShuffledPasskeyFiller(42, 1000));
}

struct Tiny {
  std::vector<unsigned char> bytes = RandomLlamaGguf({});
  GgufFile file = GgufFile::Parse(std::as_bytes(std::span(bytes)));
  BpeTokenizer tokenizer = BpeTokenizer::FromGguf(file.metadata());
};

// The prompt of a trial: the landmark prompt with the trial's key at its
// depth, and the filler around the key line the trial's own text (the part
// after the key continues the part before it). No two trials share a filler.
TEST(PasskeyTrials, EachTrialHasItsOwnFillerKeyAndDepth) {
  const Tiny tiny;
  const std::string task =
      "There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. I will quiz you "
      "about the important information there.\n";
  const std::string question = "\nWhat is the pass key? The pass key is";
  std::set<std::string> fillers;
  for (std::int64_t trial = 0; trial < 20; ++trial) {
    SCOPED_TRACE(trial);
    const PasskeyTrial t = DrawPasskeyTrial(0, trial);
    const PasskeyPrompt p = MakePasskeyPrompt(tiny.tokenizer, 1000, t, 10);
    EXPECT_EQ(p.prompt, MakePasskeyPrompt(tiny.tokenizer, 1000, t, 10).prompt);
    EXPECT_EQ(static_cast<std::int64_t>(p.prompt.size()), 1000 - 10);  // the longest that fits
    EXPECT_EQ(p.key, t.key);
    EXPECT_EQ(p.depth, t.depth);
    EXPECT_EQ(tiny.tokenizer.Decode(p.answer), " " + t.key);
    const std::string text = tiny.tokenizer.Decode(p.prompt);
    const std::string line = "The pass key is " + t.key + ". Remember it. " + t.key + " is the pass key.\n";
    ASSERT_EQ(text.substr(0, task.size()), task);
    ASSERT_EQ(text.substr(text.size() - question.size()), question);
    ASSERT_EQ(tiny.tokenizer.Decode(std::span(p.prompt).subspan(p.key_position, line.size())), line);
    const std::size_t before = static_cast<std::size_t>(p.key_position) - task.size() - 1;  // "\n" ends it
    const std::string filler =
        text.substr(task.size(), before) + text.substr(static_cast<std::size_t>(p.key_position) + line.size(),
                                                       text.size() - question.size() - p.key_position - line.size());
    EXPECT_EQ(filler, ShuffledPasskeyFiller(t.filler_seed, filler.size()));
    EXPECT_EQ(before, static_cast<std::size_t>(static_cast<double>(filler.size()) * t.depth));
    fillers.insert(filler.substr(0, 600));  // the same 600 characters of each (the shortest key line's filler)
  }
  EXPECT_EQ(fillers.size(), 20u);
}

}  // namespace
}  // namespace posenc
