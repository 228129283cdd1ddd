// SentencePiece BPE: normalization, the score-ordered merge loop over a
// linked list of symbols with a heap of candidate pairs (O(n log n) in the
// text's characters), byte fallback.
#include "tokenizer/sentencepiece_bpe.h"

#include <cmath>
#include <cstdio>
#include <functional>
#include <queue>

#include "posenc/error.h"

namespace posenc::tokenizer {
namespace {

constexpr const char* kOp = "tokenizer";
constexpr std::string_view kSpace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK "▁"

// The length of the UTF-8 character at text[i], or 0 if it is not one
// (overlong forms, surrogates and code points past U+10FFFF included).
std::size_t Utf8CharLength(std::string_view text, std::size_t i) {
  const auto at = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b = at(i);
  if (b < 0x80) return 1;
  std::size_t n = 0;
  unsigned char low = 0x80, high = 0xBF;  // the allowed range of the second byte
  if (b >= 0xC2 && b <= 0xDF) {
    n = 2;
  } else if (b >= 0xE0 && b <= 0xEF) {
    n = 3;
    if (b == 0xE0) low = 0xA0;   // overlong
    if (b == 0xED) high = 0x9F;  // surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    n = 4;
    if (b == 0xF0) low = 0x90;   // overlong
    if (b == 0xF4) high = 0x8F;  // past U+10FFFF
  } else {
    return 0;
  }
  if (i + n > text.size() || at(i + 1) < low || at(i + 1) > high) return 0;
  for (std::size_t k = 2; k < n; ++k) {
    if ((at(i + k) & 0xC0) != 0x80) return 0;
  }
  return n;
}

std::string ByteTokenName(int b) {
  char name[8];
  std::snprintf(name, sizeof(name), "<0x%02X>", b);
  return name;
}

}  // namespace

SentencePieceBpe::SentencePieceBpe(const GgufMetadata& metadata, const Vocabulary& vocab,
                                   std::optional<std::int32_t> unknown)
    : vocab_(vocab), unknown_(unknown) {
  const auto& scores = RequireGgufValue<std::vector<double>>(metadata, "tokenizer.ggml.scores", kOp,
                                                             "a SentencePiece tokenizer merges by score");
  Require(scores.size() == vocab.tokens.size(), kOp, "tokenizer.ggml.scores",
          Verbatim{std::to_string(scores.size()) + " entries"},
          "must have one entry per token (" + std::to_string(vocab.tokens.size()) + ")");
  scores_.resize(scores.size());
  for (std::size_t i = 0; i < scores.size(); ++i) {
    // SentencePiece compares float scores; GGUF stores float32 too.
    Require(std::isfinite(scores[i]), kOp, "tokenizer.ggml.scores[" + std::to_string(i) + "]", scores[i],
            "must be finite (merges are ordered by score)");
    scores_[i] = static_cast<float>(scores[i]);
  }
  if (const bool* prefix = GgufFind<bool>(metadata, "tokenizer.ggml.add_space_prefix", kOp)) {
    add_space_prefix_ = *prefix;
  }

  for (std::int32_t id = 0; id < vocab.size(); ++id) {
    if (vocab.types[id] != TokenType::kByte) continue;
    const std::string& name = vocab.tokens[id];
    unsigned value = 0;
    char tail = 0;
    Require(name.size() == 6 && std::sscanf(name.c_str(), "<0x%2X%c", &value, &tail) == 2 && tail == '>' &&
                name == ByteTokenName(static_cast<int>(value)),
            kOp, "tokenizer.ggml.token_type[" + std::to_string(id) + "]", 6,
            "a byte token must be named <0xXX> (XX two upper-case hex digits), not " + QuoteForMessage(name));
  }
  std::size_t slots = 2;
  while (slots < 2 * static_cast<std::size_t>(vocab.size())) slots *= 2;
  pieces_.assign(slots, 0);
  mask_ = slots - 1;
  for (std::int32_t id = 0; id < vocab.size(); ++id) {
    const TokenType type = vocab.types[id];
    // SentencePiece merges into its "pieces": normal, user-defined and unused.
    if (type != TokenType::kNormal && type != TokenType::kUserDefined && type != TokenType::kUnused) continue;
    const std::uint64_t hash = std::hash<std::string_view>{}(vocab.tokens[id]);
    std::uint64_t slot = hash & mask_;
    // A repeated string keeps its last id, as Vocabulary does.
    while (pieces_[slot] != 0 && vocab.tokens[(pieces_[slot] & 0xFFFFFFFF) - 1] != vocab.tokens[id]) {
      slot = (slot + 1) & mask_;
    }
    pieces_[slot] = (hash >> 32 << 32) | static_cast<std::uint64_t>(id + 1);
  }

  byte_fallback_ = true;
  for (int b = 0; b < 256; ++b) {
    const std::optional<std::int32_t> id = vocab.Find(ByteTokenName(b));
    byte_fallback_ = byte_fallback_ && id.has_value();
    byte_tokens_[b] = id.value_or(-1);
  }
  Require(byte_fallback_ || unknown_.has_value(), kOp, "tokenizer.ggml.unknown_token_id", Verbatim{"missing"},
          "a SentencePiece vocabulary without all 256 byte tokens <0x00>..<0xFF> needs an unknown token for "
          "characters outside it");
}

std::optional<std::int32_t> SentencePieceBpe::FindPiece(std::string_view text) const {
  const std::uint64_t hash = std::hash<std::string_view>{}(text);
  for (std::uint64_t slot = hash & mask_;; slot = (slot + 1) & mask_) {
    const std::uint64_t entry = pieces_[slot];
    if (entry == 0) return std::nullopt;
    const auto id = static_cast<std::int32_t>((entry & 0xFFFFFFFF) - 1);
    if (entry >> 32 == hash >> 32 && vocab_.tokens[id] == text) return id;
  }
}

std::string SentencePieceBpe::NormalizeToken(std::string_view token) {
  std::string out;
  out.reserve(token.size());
  for (char c : token) {
    if (c == ' ') {
      out += kSpace;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string SentencePieceBpe::Normalize(std::string_view utf8) const {
  std::string out;
  out.reserve(utf8.size() + utf8.size() / 4 + kSpace.size());
  if (add_space_prefix_ && !utf8.empty()) out += kSpace;
  for (std::size_t i = 0; i < utf8.size();) {
    const std::size_t n = Utf8CharLength(utf8, i);
    Require(n > 0, kOp, "text", Verbatim{"byte " + std::to_string(i) + " of " + std::to_string(utf8.size())},
            "is not valid UTF-8");
    if (utf8[i] == ' ') {
      out += kSpace;
    } else {
      out.append(utf8, i, n);
    }
    i += n;
  }
  return out;
}

void SentencePieceBpe::Encode(std::string_view normalized, std::vector<std::int32_t>& out) const {
  // Symbols: spans of the text in a doubly linked list (-1 ends it); a
  // symbol merged into its left neighbour gets begin == end.
  struct Symbol {
    std::size_t begin, end;
    std::int32_t prev, next;
  };
  std::vector<Symbol> symbols;
  for (std::size_t i = 0; i < normalized.size();) {
    // Normalize checked the UTF-8; a stray byte would stay a symbol of its own.
    const std::size_t n = std::max<std::size_t>(Utf8CharLength(normalized, i), 1);
    const auto index = static_cast<std::int32_t>(symbols.size());
    symbols.push_back({i, i + n, index - 1, index + 1});
    i += n;
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;

  // A candidate merge of symbols `left` and `right` into token `id` whose
  // text is `size` bytes; stale once either symbol has changed.
  struct Candidate {
    float score;
    std::int32_t left, right, id;
    std::size_t size;
    bool operator<(const Candidate& o) const {  // std::priority_queue pops the largest
      return score != o.score ? score < o.score : left > o.left;
    }
  };
  std::priority_queue<Candidate> heap;
  // Unused tokens a candidate would make -> the length of its left part. Set
  // when the candidate is found, not when it merges (SentencePiece's rule).
  std::unordered_map<std::int32_t, std::size_t> left_bytes;
  const auto push = [&](std::int32_t left) {
    if (left < 0 || symbols[left].next < 0) return;
    const std::int32_t right = symbols[left].next;
    const std::size_t begin = symbols[left].begin, size = symbols[right].end - begin;
    const std::optional<std::int32_t> id = FindPiece(normalized.substr(begin, size));
    if (!id) return;
    heap.push({scores_[*id], left, right, *id, size});
    if (vocab_.types[*id] == TokenType::kUnused) left_bytes[*id] = symbols[left].end - begin;
  };
  for (std::int32_t i = 0; i + 1 < static_cast<std::int32_t>(symbols.size()); ++i) push(i);

  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol& left = symbols[c.left];
    const Symbol& right = symbols[c.right];
    if (left.begin == left.end || right.begin == right.end || left.next != c.right ||
        right.end - left.begin != c.size) {
      continue;
    }
    left.end = right.end;
    left.next = right.next;
    if (left.next >= 0) symbols[left.next].prev = c.left;
    symbols[c.right].end = symbols[c.right].begin;
    push(left.prev);
    push(c.left);
  }
  for (std::int32_t i = 0; i >= 0; i = symbols[i].next) {
    EmitSymbol(normalized, symbols[i].begin, symbols[i].end, left_bytes, out);
  }
}

void SentencePieceBpe::EmitSymbol(std::string_view normalized, std::size_t begin, std::size_t end,
                                  const std::unordered_map<std::int32_t, std::size_t>& left_bytes,
                                  std::vector<std::int32_t>& out) const {
  const std::optional<std::int32_t> id = vocab_.Find(normalized.substr(begin, end - begin));
  if (id && vocab_.types[*id] == TokenType::kUnused) {
    // An unused token stands for the two symbols merged into it.
    const auto split = left_bytes.find(*id);
    if (split != left_bytes.end()) {
      EmitSymbol(normalized, begin, begin + split->second, left_bytes, out);
      EmitSymbol(normalized, begin + split->second, end, left_bytes, out);
      return;
    }
  }
  if (id) {
    out.push_back(*id);
  } else if (byte_fallback_) {
    for (std::size_t k = begin; k < end; ++k) out.push_back(byte_tokens_[static_cast<unsigned char>(normalized[k])]);
  } else {
    out.push_back(*unknown_);
  }
}

std::string SentencePieceBpe::TokenBytes(std::int32_t id) const {
  if (vocab_.types[id] == TokenType::kByte) {  // named <0xXX>: checked when read
    unsigned value = 0;
    std::sscanf(vocab_.tokens[id].c_str(), "<0x%2X>", &value);
    return std::string(1, static_cast<char>(value));
  }
  std::string bytes;
  const std::string& token = vocab_.tokens[id];
  for (std::size_t i = 0; i < token.size();) {
    if (token.compare(i, kSpace.size(), kSpace) == 0) {
      bytes.push_back(' ');
      i += kSpace.size();
    } else {
      bytes.push_back(token[i++]);
    }
  }
  return bytes;
}

}  // namespace posenc::tokenizer
