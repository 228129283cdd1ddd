// SentencePiece BPE (tokenizer.ggml.model "llama": Llama 1/2, Gemma), with
// the semantics of Google's SentencePiece library (bpe_model.cc; Kudo &
// Richardson 2018, "SentencePiece: A simple and language independent subword
// tokenizer"), which llama.cpp's SPM tokenizer follows too:
//   - no pre-tokenizer: the text is one sequence of Unicode characters, with
//     every space written as U+2581 "▁" and, if add_space_prefix, one "▁"
//     put in front (a "dummy prefix"; Gemma has none);
//   - merges have no list: of all adjacent symbol pairs whose concatenation
//     is a token (normal, user-defined or unused), the one whose token has
//     the highest tokenizer.ggml.scores value merges first, the leftmost
//     among equal scores;
//   - a symbol left that is no token becomes its UTF-8 bytes as <0xXX>
//     tokens (byte fallback) or, in a vocabulary without them, the unknown
//     token; an unused token that a merge made is split back into the two
//     symbols it came from.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "posenc/gguf_metadata.h"
#include "tokenizer/vocabulary.h"

namespace posenc::tokenizer {

class SentencePieceBpe {
 public:
  // Reads tokenizer.ggml.scores (one finite number per token) and
  // tokenizer.ggml.add_space_prefix (true when absent, as llama.cpp has it).
  // Byte fallback needs all 256 <0xXX> tokens; without them `unknown` must
  // be set. Throws posenc::Error naming the key and the rule. Keeps a
  // reference to `vocab`.
  SentencePieceBpe(const GgufMetadata& metadata, const Vocabulary& vocab, std::optional<std::int32_t> unknown);

  // The text the tokens are matched in: spaces as "▁", the dummy prefix.
  // Throws posenc::Error if `utf8` is not valid UTF-8.
  std::string Normalize(std::string_view utf8) const;
  // The string a special token is matched as in normalized text.
  static std::string NormalizeToken(std::string_view token);
  // Appends the ids of normalized text holding no special token. Thread-safe.
  void Encode(std::string_view normalized, std::vector<std::int32_t>& out) const;
  // The bytes a (non-special) token stands for: "▁" as a space, <0xXX> as
  // its byte.
  std::string TokenBytes(std::int32_t id) const;

 private:
  // Appends the ids of the symbol normalized[begin, end); `left_bytes`
  // holds, per unused token that a candidate pair of this text would make,
  // the length of its left part.
  void EmitSymbol(std::string_view normalized, std::size_t begin, std::size_t end,
                  const std::unordered_map<std::int32_t, std::size_t>& left_bytes,
                  std::vector<std::int32_t>& out) const;

  // The id of the mergeable piece (normal, user-defined or unused token)
  // spelled `text`, if there is one.
  std::optional<std::int32_t> FindPiece(std::string_view text) const;

  const Vocabulary& vocab_;
  // Mergeable pieces for the merge loop, whose lookups are most of the time:
  // open addressing in a power-of-two table at most half full, a slot the
  // hash's high 32 bits and id + 1 (0: empty), so a pair that is no piece
  // mostly costs one slot read, where std::unordered_map chases nodes.
  std::vector<std::uint64_t> pieces_;
  std::uint64_t mask_ = 0;
  std::vector<float> scores_;
  bool add_space_prefix_ = true;
  bool byte_fallback_ = false;
  std::array<std::int32_t, 256> byte_tokens_{};  // <0xXX> ids, when byte_fallback_
  std::optional<std::int32_t> unknown_;
};

}  // namespace posenc::tokenizer
