// Byte-level BPE (GPT-2 style, tokenizer.ggml.model "gpt2"): text split into
// words by the pre-tokenizer, each word's UTF-8 bytes written in GPT-2's
// byte alphabet and merged by tokenizer.ggml.merges, lowest rank first.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "posenc/gguf_metadata.h"
#include "posenc/tokenizer.h"
#include "tokenizer/vocabulary.h"
#include "tokenizer/word_splitter.h"

namespace posenc::tokenizer {

class ByteLevelBpe {
 public:
  // Reads tokenizer.ggml.pre and .merges; throws posenc::Error naming the
  // key. `unknown` stands for bytes missing from the vocabulary (see
  // ReplaceMissing).
  ByteLevelBpe(const GgufMetadata& metadata, const Vocabulary& vocab, std::optional<std::int32_t> unknown);

  // Appends the ids of `text` (no special tokens inside). Throws
  // posenc::Error if it is not valid UTF-8. Thread-safe.
  void Encode(std::string_view text, std::vector<std::int32_t>& out) const;
  // The bytes a (non-special) token stands for.
  std::string TokenBytes(const Vocabulary& vocab, std::int32_t id) const;

  PreTokenizer pre_tokenizer() const { return pre_; }

 private:
  struct Merge {
    std::int32_t rank;
    std::int32_t result;
  };
  // One symbol of a word during BPE, in a doubly linked list (-1 ends it).
  struct Symbol {
    std::int32_t id, prev, next;
  };
  // Lets the word cache be searched with a string_view (no allocation).
  struct StringHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  void EncodeWord(std::string_view word, std::vector<std::int32_t>& out) const;
  void ReplaceMissing(std::string_view word, std::vector<Symbol>& symbols) const;

  PreTokenizer pre_;
  WordSplitter splitter_;
  std::unordered_map<std::uint64_t, Merge> merges_;
  std::array<std::int32_t, 256> byte_token_{};  // the token of each single byte, or kMissing
  std::array<int, 324> byte_of_{};              // stand-in code point (< 0x144) -> byte, or -1
  bool missing_bytes_ = false;
  // For a missing byte: its character's <0xXX> tokens, or empty.
  std::array<std::vector<std::int32_t>, 256> byte_fallback_;
  std::optional<std::int32_t> unknown_;

  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<std::int32_t>, StringHash, std::equal_to<>> cache_;
};

}  // namespace posenc::tokenizer
