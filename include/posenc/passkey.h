// Passkey retrieval: can the model still find a number hidden in a long
// text? The test of the context-extension papers (landmark attention,
// Mohtashami & Jaggi 2023, whose prompt the YaRN paper's eval/passkey.py
// reuses; LongRoPE, Self-Extend, LM-Infinite), which perplexity alone does
// not replace: a method that only keeps the local context can have a good
// perplexity and still lose a fact outside its window.
//
// The prompt, as in epfml/landmark-attention llama/run_test.py and
// jquesnelle/yarn eval/passkey.py (lines joined by "\n"):
//   There is an important info hidden inside a lot of irrelevant text. Find
//   it and memorize them. I will quiz you about the important information there.
//   <filler prefix>
//   The pass key is K. Remember it. K is the pass key.
//   <filler suffix>
//   What is the pass key? The pass key is
// The filler is "The grass is green. The sky is blue. The sun is yellow.
// Here we go. There and back again." repeated (joined by spaces) and cut to
// a number of characters, that many times `depth` before the key line and
// the rest after it. The answer is " K".
//
// Trials that share that one filler are not independent: the outcome is set
// by the depth and the text, not by the key. An independent trial
// (DrawPasskeyTrial) draws its own key, its own depth and its own filler:
// the same five sentences in an order drawn for the trial, so that the task
// stays the published one (the sentences, their share of the text and the
// key's place among them are the papers'; only the text differs between
// trials). run_test.py too draws the depth uniformly per trial
// (n_garbage_prefix = randint(0, n_garbage)).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "posenc/attention.h"
#include "posenc/decoder_model.h"
#include "posenc/tokenizer.h"

namespace posenc {

struct PasskeyPrompt {
  std::string key;  // five digits
  // The prompt's tokens, BOS first for a model whose tokenizer adds it
  // (BpeTokenizer::add_bos: Gemma), as in its training and its perplexity.
  std::vector<std::int32_t> prompt;
  std::vector<std::int32_t> answer;  // the tokens of " K" after the prompt
  std::int64_t key_position = 0;     // the token where the key line starts
  double depth = 0;                  // requested: the filler's share before the key line
};

// The key of trial `trial` from `seed`: five digits, 10000-99999, the same
// on every machine (a fixed integer hash, not the standard library's
// distributions).
std::string PasskeyKey(std::uint64_t seed, std::int64_t trial);

// One independent trial: its key, its depth (the filler's share before the
// key line, uniform in [0, 1)) and the seed of its filler's order, each a
// pure function of (seed, trial) by a fixed integer hash: the same trial for
// every method and on every machine. The key is PasskeyKey(seed, trial).
// Throws posenc::Error for a negative trial.
struct PasskeyTrial {
  std::int64_t trial = 0;
  std::string key;
  double depth = 0;
  std::uint64_t filler_seed = 0;
};
PasskeyTrial DrawPasskeyTrial(std::uint64_t seed, std::int64_t trial);

// The first `characters` characters of a trial's filler: the five sentences
// of the landmark filler in blocks of five, each block in an order drawn
// from `filler_seed` (Fisher-Yates), joined by spaces as the published
// filler is. Every sentence keeps its share of the text.
std::string ShuffledPasskeyFiller(std::uint64_t filler_seed, std::size_t characters);

// The longest prompt whose tokens plus `reserve` (room for the answer and
// the generated tokens) fit in `length` tokens, with the key at `depth` in
// [0, 1]. Throws posenc::Error naming the parameter for a depth outside
// [0, 1], a key that is not five digits, or a length shorter than the
// prompt's fixed parts plus `reserve`.
PasskeyPrompt MakePasskeyPrompt(const BpeTokenizer& tokenizer, std::int64_t length, double depth,
                                const std::string& key, std::int64_t reserve);
// The same for an independent trial: its key at its depth in its own filler
// (ShuffledPasskeyFiller; the text after the key line continues the text
// before it).
PasskeyPrompt MakePasskeyPrompt(const BpeTokenizer& tokenizer, std::int64_t length, const PasskeyTrial& trial,
                                std::int64_t reserve);

struct PasskeyScore {
  bool generated_has_key = false;  // the greedy continuation contains K (the YaRN paper's rule)
  bool answer_exact = false;       // every answer token is the argmax under teacher forcing
  double answer_nll = 0;           // mean -ln p of the answer tokens (teacher forcing)
  std::string generated;           // the greedy continuation, decoded
  double seconds = 0;
};

// One trial: the prompt prefilled once; the answer scored by teacher
// forcing from its logits (only the answer's rows computed); the cache
// rewound and `max_new_tokens` generated greedily.
PasskeyScore ScorePasskey(const DecoderModel& model, const BpeTokenizer& tokenizer, const PasskeyPrompt& prompt,
                          const AttentionOptions& attention, std::int64_t max_new_tokens);

}  // namespace posenc
