// Passkey retrieval prompts and scoring (include/posenc/passkey.h).
#include "posenc/passkey.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <functional>
#include <string_view>
#include <utility>

#include "model/model_ops.h"
#include "posenc/chat_template.h"
#include "posenc/error.h"
#include "posenc/generation.h"
#include "util/split_mix64.h"

namespace posenc {
namespace {

constexpr const char* kOp = "passkey";
constexpr std::string_view kTask =
    "There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. I will quiz you "
    "about the important information there.";
constexpr std::string_view kFiller =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";
constexpr std::string_view kQuestion = "What is the pass key? The pass key is";

// The five sentences of kFiller, in its order.
constexpr std::array<std::string_view, 5> kSentences{"The grass is green.", "The sky is blue.", "The sun is yellow.",
                                                     "Here we go.", "There and back again."};

// The first n characters of the filler repeated forever, joined by spaces.
std::string Filler(std::size_t n) {
  std::string out;
  out.reserve(n + kFiller.size() + 1);
  while (out.size() < n) {
    if (!out.empty()) out += ' ';
    out += kFiller;
  }
  out.resize(n);
  return out;
}

// The filler before and after the key line, of `characters` characters in all.
struct FillerParts {
  std::string before, after;
};

struct PromptText {
  std::string before_key;  // the task line and the filler prefix, each ended by "\n"
  std::string text;        // the whole prompt
};

PromptText TextWithFiller(const FillerParts& filler, const std::string& key) {
  PromptText p;
  p.before_key = std::string(kTask) + "\n" + filler.before + "\n";
  p.text = p.before_key + "The pass key is " + key + ". Remember it. " + key + " is the pass key.\n" + filler.after +
           "\n" + std::string(kQuestion);
  return p;
}

// The filler's characters before the key: `depth` of them, rounded down.
std::size_t Prefix(std::size_t characters, double depth) {
  return static_cast<std::size_t>(static_cast<double>(characters) * depth);
}

// The longest prompt whose tokens plus `reserve` fit in `length`, with the
// filler that split(characters) gives.
PasskeyPrompt MakePrompt(const BpeTokenizer& tokenizer, std::int64_t length, double depth, const std::string& key,
                         std::int64_t reserve, const std::function<FillerParts(std::size_t)>& split) {
  Require(std::isfinite(depth) && depth >= 0 && depth <= 1, kOp, "depth", depth,
          "must be in [0, 1] (the share of the filler before the key)");
  Require(key.size() == 5 && std::all_of(key.begin(), key.end(), [](char c) { return c >= '0' && c <= '9'; }), kOp,
          "key", key, "must be five digits");
  Require(reserve >= 0, kOp, "reserve", reserve, "must be >= 0");
  // BOS first for a model trained so (EncodePrompt): it counts in the length.
  const std::int64_t bos = tokenizer.add_bos() ? 1 : 0;
  const auto tokens_with = [&](std::size_t filler) {
    return static_cast<std::int64_t>(EncodePrompt(tokenizer, TextWithFiller(split(filler), key).text).size());
  };
  const std::int64_t fixed = tokens_with(0);
  Require(length >= fixed + reserve, kOp, "length", length,
          "must be at least the prompt's fixed parts (" + std::to_string(fixed) + " tokens) + " +
              std::to_string(reserve) + " for the answer");
  // The most filler characters that fit: tokens grow with characters
  // (about four a token), so bisect between 0 and a bound that is too long.
  std::size_t lo = 0, hi = 64;
  while (tokens_with(hi) + reserve <= length) hi *= 2;
  while (hi - lo > 1) {
    const std::size_t mid = lo + (hi - lo) / 2;
    (tokens_with(mid) + reserve <= length ? lo : hi) = mid;
  }
  const PromptText text = TextWithFiller(split(lo), key);
  PasskeyPrompt p;
  p.key = key;
  p.depth = depth;
  p.prompt = EncodePrompt(tokenizer, text.text);
  // The token holding the key line's first byte, counted in the prompt's
  // own tokens after BOS (the text before it, encoded alone, can merge
  // differently at its end: SmolLM2 joins a final "\n\n").
  p.key_position = bos;
  for (std::size_t bytes = 0; p.key_position < static_cast<std::int64_t>(p.prompt.size()); ++p.key_position) {
    bytes += tokenizer.Decode(std::span(p.prompt).subspan(p.key_position, 1)).size();
    if (bytes > text.before_key.size()) break;
  }
  // The answer's tokens as they follow the prompt; where the tokenizer would
  // merge across the boundary, the answer encoded on its own.
  const std::vector<std::int32_t> full = EncodePrompt(tokenizer, text.text + " " + key);
  if (full.size() > p.prompt.size() && std::equal(p.prompt.begin(), p.prompt.end(), full.begin())) {
    p.answer.assign(full.begin() + static_cast<std::ptrdiff_t>(p.prompt.size()), full.end());
  } else {
    p.answer = tokenizer.Encode(" " + key);
  }
  return p;
}

// Salts that give a trial's depth and filler words other than its key's.
constexpr std::uint64_t kDepthSalt = 0x6465707468ULL;     // "depth"
constexpr std::uint64_t kFillerSalt = 0x66696c6c6572ULL;  // "filler"

}  // namespace

std::string PasskeyKey(std::uint64_t seed, std::int64_t trial) {
  Require(trial >= 0, kOp, "trial", trial, "must be >= 0");
  const std::uint64_t x = SplitMix64(seed ^ SplitMix64(static_cast<std::uint64_t>(trial)));
  return std::to_string(10000 + x % 90000);
}

PasskeyTrial DrawPasskeyTrial(std::uint64_t seed, std::int64_t trial) {
  PasskeyTrial t{.trial = trial, .key = PasskeyKey(seed, trial)};  // checks trial >= 0
  const std::uint64_t x = SplitMix64(seed ^ SplitMix64(static_cast<std::uint64_t>(trial)));
  // The top 53 bits: a double uniform in [0, 1), every value exact.
  t.depth = static_cast<double>(SplitMix64(x ^ kDepthSalt) >> 11) * 0x1.0p-53;
  t.filler_seed = SplitMix64(x ^ kFillerSalt);
  return t;
}

std::string ShuffledPasskeyFiller(std::uint64_t filler_seed, std::size_t characters) {
  std::string out;
  out.reserve(characters + kFiller.size() + 1);
  std::array<std::size_t, kSentences.size()> order{};
  for (std::uint64_t block = 0; out.size() < characters; ++block) {
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    // Fisher-Yates from the block's own words: block b's order does not depend on how much was cut.
    std::uint64_t word = SplitMix64(filler_seed ^ SplitMix64(block));
    for (std::size_t i = order.size() - 1; i > 0; --i) {
      std::swap(order[i], order[word % (i + 1)]);
      word = SplitMix64(word);
    }
    for (const std::size_t s : order) {
      if (!out.empty()) out += ' ';
      out += kSentences[s];
    }
  }
  out.resize(characters);
  return out;
}

PasskeyPrompt MakePasskeyPrompt(const BpeTokenizer& tokenizer, std::int64_t length, double depth,
                                const std::string& key, std::int64_t reserve) {
  // The published filler: prefix and suffix both from its start (run_test.py's garbage_inf[:n]).
  return MakePrompt(tokenizer, length, depth, key, reserve, [&](std::size_t characters) {
    const std::size_t prefix = Prefix(characters, depth);
    return FillerParts{Filler(prefix), Filler(characters - prefix)};
  });
}

PasskeyPrompt MakePasskeyPrompt(const BpeTokenizer& tokenizer, std::int64_t length, const PasskeyTrial& trial,
                                std::int64_t reserve) {
  return MakePrompt(tokenizer, length, trial.depth, trial.key, reserve, [&](std::size_t characters) {
    const std::string filler = ShuffledPasskeyFiller(trial.filler_seed, characters);
    const std::size_t prefix = Prefix(characters, trial.depth);
    return FillerParts{filler.substr(0, prefix), filler.substr(prefix)};
  });
}

PasskeyScore ScorePasskey(const DecoderModel& model, const BpeTokenizer& tokenizer, const PasskeyPrompt& prompt,
                          const AttentionOptions& attention, std::int64_t max_new_tokens) {
  Require(max_new_tokens >= 1, kOp, "max_new_tokens", max_new_tokens, "must be >= 1");
  Require(!prompt.answer.empty(), kOp, "answer.size()", 0, "must be >= 1");
  const auto start = std::chrono::steady_clock::now();
  const std::int64_t vocab = model.hparams().vocab_size;
  const auto answer = static_cast<std::int64_t>(prompt.answer.size());
  DecoderCache cache = model.NewCache();
  const std::vector<float> first = Prefill(model, cache, prompt.prompt, attention);

  // Teacher forcing: the prompt's last logits predict answer[0]; answer[i]
  // run through the model predicts answer[i + 1].
  std::vector<float> logits(static_cast<std::size_t>(answer * vocab));
  std::copy(first.begin(), first.end(), logits.begin());
  if (answer > 1) {
    std::vector<std::int64_t> rows(static_cast<std::size_t>(answer - 1));
    for (std::int64_t r = 0; r < answer - 1; ++r) rows[r] = r;
    model.Extend(cache, std::span(prompt.answer).first(answer - 1), attention, rows,
                 [&](std::span<const std::int64_t> block, std::span<const float> values) {
                   std::copy(values.begin(), values.end(), logits.begin() + (block.front() + 1) * vocab);
                 });
  }
  std::vector<double> nll(static_cast<std::size_t>(answer));
  model::NegativeLogLikelihood(logits, vocab, prompt.answer, nll);
  PasskeyScore score;
  score.answer_exact = true;
  for (std::int64_t i = 0; i < answer; ++i) {
    score.answer_nll += nll[i] / static_cast<double>(answer);
    score.answer_exact = score.answer_exact && Argmax(std::span(logits).subspan(i * vocab, vocab)) == prompt.answer[i];
  }

  // Greedy generation from the prompt alone.
  cache.Truncate(static_cast<std::int64_t>(prompt.prompt.size()));
  GenerateOptions options{.max_tokens = max_new_tokens};
  if (tokenizer.eos_id()) options.stop_tokens.push_back(*tokenizer.eos_id());
  const GenerateResult generated = DecodeGreedy(model, cache, first, attention, options);
  score.generated = tokenizer.Decode(generated.tokens);
  score.generated_has_key = score.generated.find(prompt.key) != std::string::npos;
  score.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return score;
}

}  // namespace posenc
