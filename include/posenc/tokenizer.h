// BPE tokenization built from a GGUF file's `tokenizer.ggml.*` metadata. One
// type for both kinds of vocabulary GGUF files carry (tokenizer.ggml.model):
//   "gpt2"  byte-level BPE (SmolLM2, Llama 3, Qwen): the same token ids as
//           Hugging Face `tokenizers` for the same vocabulary, merges and
//           pre-tokenizer;
//   "llama" SentencePiece BPE (Gemma, Llama 1/2): the same token ids as
//           Google's SentencePiece library for the same pieces, scores and
//           types (see src/tokenizer/sentencepiece_bpe.h).
//
// Encode, in order:
//   1. special tokens (token_type 3 "control" and 4 "user defined") are cut
//      out of the text as whole strings, leftmost and then longest first,
//      exactly like Hugging Face's added-token matching; they are never split
//      (SentencePiece itself matches user-defined tokens so, but not control
//      tokens: posenc matches <start_of_turn> and <bos> as Hugging Face and
//      llama.cpp do, so a chat prompt can be written as text);
//   2. "gpt2": every other stretch of text is pre-tokenized by
//      `tokenizer.ggml.pre` (see PreTokenizer) into words; each word's UTF-8
//      bytes become the byte-level alphabet (GPT-2's byte-to-unicode table:
//      every byte has a printable stand-in character, so any byte string is
//      representable) and are merged by BPE, lowest merge rank first and
//      leftmost among equal ranks;
//      "llama": spaces become U+2581 "▁" (before step 1, so a special token
//      holding a space is matched as "▁"), with one "▁" in front if
//      tokenizer.ggml.add_space_prefix; each stretch is merged from single
//      characters, highest token score first, leftmost among equal scores;
//      characters left without a token become <0xXX> byte tokens.
// Decode maps the tokens back to bytes, so Decode(Encode(x)) == x for every
// valid UTF-8 `x` whose bytes all have a token (see FromGguf) and, for
// "llama", that does not start with a space when add_space_prefix is set and
// holds no "▁" of its own (SentencePiece loses both the same way).
//
// Unicode categories (\p{L}, \p{N}, \s) come from PCRE2 in UTF + UCP mode.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/gguf_metadata.h"

namespace posenc {

// How text is split into words before BPE (the value of tokenizer.ggml.pre).
enum class PreTokenizer {
  // "gpt2" (and "default"): the GPT-2 regex
  //   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kGpt2,
  // "smollm": every \p{N} character is a word of its own, then the GPT-2
  // regex runs on the text between them (Hugging Face's
  // Sequence[Digits(individual_digits=true), ByteLevel(use_regex=true)]).
  kSmolLm,
  // "llama-bpe": Llama-3's regex (case-insensitive contractions, letters
  // with one leading non-letter, numbers in groups of up to three digits,
  // newlines kept with the punctuation or whitespace before them).
  kLlama3,
};

// The name GGUF uses ("gpt2", "smollm", "llama-bpe").
std::string_view PreTokenizerName(PreTokenizer pre);

// The kind of vocabulary (the value of tokenizer.ggml.model).
enum class TokenizerModel {
  kByteLevelBpe,      // "gpt2"
  kSentencePieceBpe,  // "llama"
};

// The name GGUF uses ("gpt2", "llama").
std::string_view TokenizerModelName(TokenizerModel model);

class BpeTokenizer {
 public:
  // Reads tokenizer.ggml.model ("gpt2" or "llama"), .tokens, the optional
  // .token_type (1-6 per token), bos/eos/unknown/padding ids and
  // .add_bos_token; for "gpt2" .pre and .merges, for "llama" .scores and
  // .add_space_prefix. Throws posenc::Error naming the key and the rule for a
  // missing or wrong value: an empty vocabulary, a count of types or scores
  // other than the count of tokens, an unknown model or pre-tokenizer, a
  // merge whose parts or result are not tokens, a byte token (type 6) not
  // named <0xXX>, a "llama" vocabulary with neither all 256 byte tokens nor
  // an unknown token.
  //
  // "gpt2": a byte whose alphabet character is not a token (SmolLM2 lacks
  // six control bytes, 0x04 among them) encodes as Hugging Face's BPE does
  // for a GGUF vocabulary (byte_fallback, fuse_unk): <0xXX> tokens if the
  // vocabulary has them, else one unknown token per run of such bytes, else
  // nothing. Decode(Encode(x)) == x holds for texts without such bytes.
  // "llama": a character without a token becomes its <0xXX> byte tokens,
  // or the unknown token in a vocabulary without them.
  static BpeTokenizer FromGguf(const GgufMetadata& metadata);

  BpeTokenizer(BpeTokenizer&&) noexcept;
  BpeTokenizer& operator=(BpeTokenizer&&) noexcept;
  ~BpeTokenizer();

  // Token ids of `utf8`, without BOS/EOS (add them yourself: see add_bos).
  // Throws posenc::Error if `utf8` is not valid UTF-8. Thread-safe.
  std::vector<std::int32_t> Encode(std::string_view utf8) const;

  // The bytes the tokens stand for (special tokens as their text). A
  // sequence cut inside a multi-byte character gives its bytes as they are,
  // not U+FFFD. Throws posenc::Error for an id outside the vocabulary.
  std::string Decode(std::span<const std::int32_t> ids) const;

  std::int32_t vocab_size() const;
  TokenizerModel model() const;
  // The pre-tokenizer of a "gpt2" vocabulary; nullopt for "llama" (none).
  std::optional<PreTokenizer> pre_tokenizer() const;
  // The vocabulary entry as stored ("gpt2": the byte-level alphabet, e.g.
  // "Ġthe"; "llama": "▁the").
  const std::string& token(std::int32_t id) const;
  // The id of a vocabulary entry, if it is one.
  std::optional<std::int32_t> TokenId(std::string_view token) const;
  bool IsSpecial(std::int32_t id) const;

  std::optional<std::int32_t> bos_id() const;
  std::optional<std::int32_t> eos_id() const;
  std::optional<std::int32_t> unknown_id() const;
  std::optional<std::int32_t> padding_id() const;
  // Whether a text starts with BOS for this model (tokenizer.ggml.add_bos_token;
  // false when absent; Gemma sets it). Only with a bos_id.
  bool add_bos() const;

 private:
  struct Impl;
  explicit BpeTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace posenc
