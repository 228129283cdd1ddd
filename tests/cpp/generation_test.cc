// Greedy generation and passkey retrieval on the tiny random-weight model
// (tests/cpp/random_llama.h, a byte-level vocabulary: one token a character).
// Generation is held to full forward passes; the passkey prompt to its
// definition and to the token budget.
#include "posenc/generation.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "posenc/context_extension.h"
#include "posenc/passkey.h"
#include "test_util.h"
#include "random_llama.h"

namespace posenc {
namespace {

using testing::ExpectError;
using testing::RandomLlamaGguf;

struct Tiny {
  std::vector<unsigned char> bytes = RandomLlamaGguf({});
  GgufFile file = GgufFile::Parse(std::as_bytes(std::span(bytes)));
  DecoderModel model = DecoderModel::FromGguf(file);
  BpeTokenizer tokenizer = BpeTokenizer::FromGguf(file.metadata());
};

// Argmax of one full forward pass over the prompt and what was generated.
std::vector<std::int32_t> GreedyByFullForwards(const DecoderModel& model, std::vector<std::int32_t> tokens,
                                               const AttentionOptions& attention, std::int64_t count) {
  const std::int64_t vocab = model.hparams().vocab_size;
  std::vector<std::int32_t> generated;
  for (std::int64_t i = 0; i < count; ++i) {
    const std::vector<float> logits = model.Logits(tokens, attention);
    const std::int32_t next = Argmax(std::span(logits).last(vocab));
    generated.push_back(next);
    tokens.push_back(next);
  }
  return generated;
}

TEST(Generation, GreedyDecodingWithTheCacheEqualsFullForwards) {
  const Tiny tiny;
  const std::vector<std::int32_t> prompt = tiny.tokenizer.Encode("The pass key is 12345. What is it?");
  const DecoderHyperparams& hp = tiny.model.hparams();
  for (const char* method :
       {"none", "yarn", "self-extend:group=2,window=8", "self-extend-kv:group=2,window=8", "lambda:sinks=2,window=9"}) {
    SCOPED_TRACE(method);
    const std::int64_t count = 12;
    const AttentionOptions attention = PlanContextExtension(ParseContextExtension(method), hp.rope, hp.context_length,
                                                            static_cast<std::int64_t>(prompt.size()) + count)
                                           .attention;
    std::vector<std::int32_t> streamed;
    const GenerateResult r =
        Generate(tiny.model, prompt, attention, {.max_tokens = count}, [&](std::int32_t t) { streamed.push_back(t); });
    EXPECT_EQ(r.tokens, GreedyByFullForwards(tiny.model, prompt, attention, count));
    EXPECT_EQ(streamed, r.tokens);
    EXPECT_EQ(r.prompt_tokens, static_cast<std::int64_t>(prompt.size()));
    EXPECT_EQ(r.decode_passes, count - 1);
  }
}

TEST(Generation, StopsAtAStopTokenAndChecksItsArguments) {
  const Tiny tiny;
  const std::vector<std::int32_t> prompt = tiny.tokenizer.Encode("hello");
  const auto attention = tiny.model.DefaultAttention();
  const GenerateResult all = Generate(tiny.model, prompt, attention, {.max_tokens = 6});
  const GenerateResult stopped =
      Generate(tiny.model, prompt, attention, {.max_tokens = 6, .stop_tokens = {all.tokens[2]}});
  const auto first = std::find(all.tokens.begin(), all.tokens.end(), all.tokens[2]);
  EXPECT_EQ(stopped.tokens, std::vector<std::int32_t>(all.tokens.begin(), first + 1));
  ExpectError([&] { Generate(tiny.model, prompt, attention, {.max_tokens = 0}); }, {"[generate] max_tokens = 0"});
  ExpectError([&] { Generate(tiny.model, {}, attention, {.max_tokens = 1}); }, {"prompt.size() = 0"});
  const std::vector<float> ties{1, 3, 3, std::nanf("")};
  EXPECT_EQ(Argmax(ties), 1);
}

// A model whose logits are NaN once decoded token 0 until max_tokens (the
// argmax of nothing but NaN); logits a log-softmax cannot resolve, or given
// by the caller, are refused the same way. And a max_tokens whose cache no
// machine holds is refused before any work (10^12 ran until memory ran out).
TEST(Generation, CorruptLogitsAndImpossibleLengthsAreErrors) {
  const Tiny tiny;
  const std::vector<std::int32_t> prompt = tiny.tokenizer.Encode("hello");
  testing::RandomLlamaOptions broken;
  broken.nan_in_output_norm = true;
  const auto bytes = RandomLlamaGguf(broken);
  const DecoderModel nan_model = DecoderModel::FromGguf(GgufFile::Parse(std::as_bytes(std::span(bytes))));
  ExpectError([&] { Generate(nan_model, prompt, nan_model.DefaultAttention(), {.max_tokens = 4}); },
              {"[llama] logits[position 4, token 0] = nan: must be finite and of magnitude < 65536"});
  std::vector<float> logits(static_cast<std::size_t>(tiny.model.hparams().vocab_size), 0.5F);
  DecoderCache cache = tiny.model.NewCache();
  Prefill(tiny.model, cache, prompt, tiny.model.DefaultAttention());
  logits[7] = 1e30F;
  ExpectError([&] { DecodeGreedy(tiny.model, cache, logits, tiny.model.DefaultAttention(), {.max_tokens = 2}); },
              {"[generate] next_logits[7] = 1e+30: must be finite and of magnitude < 65536"});
  ExpectError([&] { Generate(tiny.model, prompt, tiny.model.DefaultAttention(), {.max_tokens = 1000000000000}); },
              {"[generate] max_tokens = 1000000000000: the key/value cache of 1000000000004 tokens needs ",
               "more than this machine's"});
  ExpectError(
      [&] {
        DecodeGreedy(tiny.model, cache, std::vector<float>(logits.size(), 0.0F), tiny.model.DefaultAttention(),
                     {.max_tokens = std::numeric_limits<std::int64_t>::max()});
      },
      {"[generate] max_tokens = 9223372036854775807: the key/value cache of "});
}

// Argmax against the contract read index by index (the lowest index among
// equal largest values; NaN never chosen over a number, -0 equal to +0),
// over lengths around its 16 lanes and with ties, NaNs, infinities and
// zeros of both signs in every part of the span.
TEST(Generation, ArgmaxIsTheFirstLargestNumber) {
  const auto expected = [](const std::vector<float>& v) {
    std::size_t best = 0;
    for (std::size_t i = 1; i < v.size(); ++i) {
      if (v[i] > v[best] || (std::isnan(v[best]) && !std::isnan(v[i]))) best = i;
    }
    return static_cast<std::int32_t>(best);
  };
  const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
  const std::array<float, 8> values{nan, -inf, inf, -0.0f, 0.0f, 1.5f, -2.0f, 1.5f};
  std::mt19937 rng(11);
  for (const std::size_t n : {1, 2, 15, 16, 17, 33, 64, 100, 49152}) {
    for (int trial = 0; trial < 40; ++trial) {
      std::vector<float> v(n);
      // Few distinct values, so that ties are common; some trials all NaN or all -inf.
      const std::size_t kinds = trial % 10 == 0 ? 1 : values.size();
      for (float& x : v) x = values[(rng() % kinds + (trial % 20 == 10 ? 1 : 0)) % values.size()];
      ASSERT_EQ(Argmax(v), expected(v)) << "n = " << n << ", trial " << trial;
    }
  }
}

TEST(Passkey, KeysAreFiveDigitsFixedBySeedAndTrial) {
  std::set<std::string> keys;
  for (std::int64_t trial = 0; trial < 50; ++trial) {
    const std::string key = PasskeyKey(7, trial);
    ASSERT_EQ(key.size(), 5u);
    EXPECT_EQ(key, PasskeyKey(7, trial));
    keys.insert(key);
  }
  EXPECT_GT(keys.size(), 45u);
  EXPECT_NE(PasskeyKey(7, 0), PasskeyKey(8, 0));
  ExpectError([] { PasskeyKey(0, -1); }, {"trial = -1"});
}

TEST(Passkey, PromptIsTheLandmarkPromptAtTheRequestedLengthAndDepth) {
  const Tiny tiny;
  const std::string task =
      "There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. I will quiz you "
      "about the important information there.\n";
  const std::string line = "The pass key is 31416. Remember it. 31416 is the pass key.\n";
  const std::string question = "\nWhat is the pass key? The pass key is";
  for (const double depth : {0.0, 0.5, 1.0}) {
    SCOPED_TRACE(depth);
    const PasskeyPrompt p = MakePasskeyPrompt(tiny.tokenizer, 1000, depth, "31416", 10);
    const std::string text = tiny.tokenizer.Decode(p.prompt);
    EXPECT_EQ(static_cast<std::int64_t>(p.prompt.size()), 1000 - 10);  // one token a character: exactly full
    EXPECT_EQ(text.substr(0, task.size()), task);
    EXPECT_EQ(text.substr(text.size() - question.size()), question);
    EXPECT_EQ(tiny.tokenizer.Decode(std::span(p.prompt).subspan(p.key_position, line.size())), line);
    EXPECT_EQ(tiny.tokenizer.Decode(p.answer), " 31416");
    const std::size_t filler = text.size() - task.size() - 1 - line.size() - question.size();
    const std::size_t before = static_cast<std::size_t>(p.key_position) - task.size() - 1;
    EXPECT_EQ(before, static_cast<std::size_t>(static_cast<double>(filler) * depth));
    EXPECT_EQ(text.substr(task.size(), 20), depth == 0 ? "\nThe pass key is 314" : "The grass is green. ");
  }
  ExpectError([&] { MakePasskeyPrompt(tiny.tokenizer, 1000, 1.5, "31416", 10); }, {"[passkey] depth = 1.5"});
  ExpectError([&] { MakePasskeyPrompt(tiny.tokenizer, 1000, 0.5, "3141", 10); }, {"key = \"3141\"", "five digits"});
  ExpectError([&] { MakePasskeyPrompt(tiny.tokenizer, 200, 0.5, "31416", 10); }, {"length = 200", "fixed parts"});
}

// A model trained with BOS first (Gemma) gets it at the start of the
// prompt, inside the length; the rest of the prompt is the same.
TEST(Passkey, PromptStartsWithBosWhenTheTokenizerAddsIt) {
  const Tiny tiny;
  GgufMetadata with_bos = tiny.file.metadata();
  with_bos["tokenizer.ggml.bos_token_id"] = std::int64_t{0};
  with_bos["tokenizer.ggml.add_bos_token"] = true;
  const BpeTokenizer tokenizer = BpeTokenizer::FromGguf(with_bos);
  ASSERT_TRUE(tokenizer.add_bos());
  const PasskeyPrompt plain = MakePasskeyPrompt(tiny.tokenizer, 1000, 0.5, "31416", 10);
  const PasskeyPrompt p = MakePasskeyPrompt(tokenizer, 1000, 0.5, "31416", 10);
  ASSERT_EQ(static_cast<std::int64_t>(p.prompt.size()), 1000 - 10);
  EXPECT_EQ(p.prompt[0], 0);
  // One character of filler fewer (one token a character), the key line one token later.
  EXPECT_EQ(tokenizer.Decode(std::span(p.prompt).subspan(p.key_position, 16)), "The pass key is ");
  EXPECT_EQ(p.answer, plain.answer);
  const std::string text = tiny.tokenizer.Decode(std::span(p.prompt).subspan(1));
  EXPECT_EQ(text.size(), plain.prompt.size() - 1);
}

// The scores are what full forward passes over prompt + answer say.
TEST(Passkey, ScoresAgreeWithFullForwardPasses) {
  const Tiny tiny;
  const PasskeyPrompt p = MakePasskeyPrompt(tiny.tokenizer, 300, 0.5, "27182", 8);
  const auto attention = tiny.model.DefaultAttention();
  const PasskeyScore score = ScorePasskey(tiny.model, tiny.tokenizer, p, attention, 8);

  std::vector<std::int32_t> all = p.prompt;
  all.insert(all.end(), p.answer.begin(), p.answer.end());
  const std::vector<double> nll = tiny.model.NextTokenNll(all, attention);
  const std::vector<float> logits = tiny.model.Logits(all, attention);
  const std::int64_t vocab = tiny.model.hparams().vocab_size;
  double mean = 0;
  bool exact = true;
  for (std::size_t i = 0; i < p.answer.size(); ++i) {
    const std::size_t row = p.prompt.size() - 1 + i;
    mean += nll[row] / static_cast<double>(p.answer.size());
    exact = exact && Argmax(std::span(logits).subspan(row * vocab, vocab)) == p.answer[i];
  }
  EXPECT_NEAR(score.answer_nll, mean, 1e-4 * std::abs(mean));
  EXPECT_EQ(score.answer_exact, exact);
  const auto greedy = GreedyByFullForwards(tiny.model, p.prompt, attention, 8);
  EXPECT_EQ(score.generated, tiny.tokenizer.Decode(greedy));
  EXPECT_EQ(score.generated_has_key, score.generated.find("27182") != std::string::npos);
}

}  // namespace
}  // namespace posenc
