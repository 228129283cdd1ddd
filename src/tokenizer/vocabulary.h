// What both tokenizer models share: the token strings of
// tokenizer.ggml.tokens, their GGUF types, and the string -> id lookup.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "posenc/gguf_metadata.h"

namespace posenc::tokenizer {

// GGUF token types: llama.cpp's numbering, which is SentencePiece's
// ModelProto piece type, so a SentencePiece vocabulary keeps its meaning.
enum class TokenType : std::uint8_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,      // <bos>, <start_of_turn>, <|im_start|>: matched whole in text
  kUserDefined = 4,  // matched whole in text too (Gemma: "\n", runs of spaces, <h1>)
  kUnused = 5,       // SentencePiece: may be merged into, then split back
  kByte = 6,         // <0xXX>: byte fallback
};

struct Vocabulary {
  // Reads tokenizer.ggml.tokens (1 to 2^31-1 tokens) and the optional
  // tokenizer.ggml.token_type (one type 1-6 per token; every token normal
  // when absent). Throws posenc::Error naming the key and the rule.
  static Vocabulary FromGguf(const GgufMetadata& metadata);

  Vocabulary() = default;
  // `ids` views the strings of `tokens`: a move keeps them where they are, a
  // copy would not.
  Vocabulary(Vocabulary&&) noexcept = default;
  Vocabulary& operator=(Vocabulary&&) noexcept = default;
  Vocabulary(const Vocabulary&) = delete;
  Vocabulary& operator=(const Vocabulary&) = delete;

  std::int32_t size() const { return static_cast<std::int32_t>(tokens.size()); }
  std::optional<std::int32_t> Find(std::string_view token) const {
    const auto it = ids.find(token);
    if (it == ids.end()) return std::nullopt;
    return it->second;
  }
  // Control and user-defined tokens: cut out of the text whole.
  bool IsSpecial(std::int32_t id) const {
    return types[id] == TokenType::kControl || types[id] == TokenType::kUserDefined;
  }

  std::vector<std::string> tokens;
  std::vector<TokenType> types;
  // A repeated string keeps its last id, as a Hugging Face vocab built from
  // the list would.
  std::unordered_map<std::string_view, std::int32_t> ids;
};

}  // namespace posenc::tokenizer
