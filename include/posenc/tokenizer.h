// Byte-level BPE tokenization (GPT-2 style) built from a GGUF file's
// `tokenizer.ggml.*` metadata, giving the same token ids as Hugging Face
// `tokenizers` for the same vocabulary, merges and pre-tokenizer.
//
// Encode, in order:
//   1. special tokens (token_type 3 "control" and 4 "user defined") are cut
//      out of the text as whole strings, leftmost and then longest first,
//      exactly like Hugging Face's added-token matching; they are never split;
//   2. every other stretch of text is pre-tokenized by `tokenizer.ggml.pre`
//      (see PreTokenizer) into words;
//   3. each word's UTF-8 bytes become the byte-level alphabet (GPT-2's
//      byte-to-unicode table: every byte has a printable stand-in character,
//      so any byte string is representable) and are merged by BPE, lowest
//      merge rank first and leftmost among equal ranks.
// Decode maps the token strings back to bytes, so Decode(Encode(x)) == x for
// every valid UTF-8 `x` whose bytes all have a token (see FromGguf).
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

class BpeTokenizer {
 public:
  // Reads tokenizer.ggml.model (must be "gpt2"), .pre, .tokens, .merges and
  // the optional .token_type and bos/eos/unknown/padding ids. Throws
  // posenc::Error naming the key for a missing or wrong value, an unknown
  // pre-tokenizer, or a merge whose parts or result are not tokens.
  //
  // A byte whose alphabet character is not a token (SmolLM2 lacks six
  // control bytes, 0x04 among them) encodes as Hugging Face's BPE does for
  // a GGUF vocabulary (byte_fallback, fuse_unk): <0xXX> tokens if the
  // vocabulary has them, else one unknown token per run of such bytes, else
  // nothing. Decode(Encode(x)) == x holds for texts without such bytes.
  static BpeTokenizer FromGguf(const GgufMetadata& metadata);

  BpeTokenizer(BpeTokenizer&&) noexcept;
  BpeTokenizer& operator=(BpeTokenizer&&) noexcept;
  ~BpeTokenizer();

  // Token ids of `utf8`, without BOS/EOS (add them yourself). Throws
  // posenc::Error if `utf8` is not valid UTF-8. Thread-safe.
  std::vector<std::int32_t> Encode(std::string_view utf8) const;

  // The bytes the tokens stand for (special tokens as their text). A
  // sequence cut inside a multi-byte character gives its bytes as they are,
  // not U+FFFD. Throws posenc::Error for an id outside the vocabulary.
  std::string Decode(std::span<const std::int32_t> ids) const;

  std::int32_t vocab_size() const;
  PreTokenizer pre_tokenizer() const;
  // The vocabulary entry as stored (byte-level alphabet, e.g. "Ġthe").
  const std::string& token(std::int32_t id) const;
  // The id of a vocabulary entry, if it is one.
  std::optional<std::int32_t> TokenId(std::string_view token) const;
  bool IsSpecial(std::int32_t id) const;

  std::optional<std::int32_t> bos_id() const;
  std::optional<std::int32_t> eos_id() const;
  std::optional<std::int32_t> unknown_id() const;
  std::optional<std::int32_t> padding_id() const;

 private:
  struct Impl;
  explicit BpeTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace posenc
