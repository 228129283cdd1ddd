// Byte-level BPE: the GPT-2 byte alphabet, merges from GGUF metadata, and the
// merge loop with a word cache.
#include "tokenizer/byte_level_bpe.h"

#include <cstdio>
#include <queue>
#include <utility>

#include "posenc/error.h"

namespace posenc::tokenizer {
namespace {

constexpr const char* kOp = "tokenizer";

// Words longer than this are merged every time rather than cached (they are
// rare, and would crowd the cache).
constexpr std::size_t kMaxCachedWordBytes = 256;
constexpr std::size_t kMaxCacheEntries = 1 << 16;

// byte_token value of a byte whose stand-in character is not a token.
constexpr std::int32_t kMissing = -1;

void AppendUtf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Decodes one code point of (already valid, vocabulary) UTF-8 at `i`;
// returns its length. A stray byte counts as a code point of its own value.
std::size_t NextCodePoint(std::string_view s, std::size_t i, char32_t& cp) {
  const auto b = static_cast<unsigned char>(s[i]);
  std::size_t n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
  if (b >= 0x80 && b < 0xC0) n = 1;
  if (i + n > s.size()) n = 1;
  if (n == 1) {
    cp = b;
    return 1;
  }
  cp = b & (0xFF >> (n + 1));
  for (std::size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return n;
}

// GPT-2's byte-to-unicode table: printable Latin-1 bytes stand for
// themselves, the other 68 bytes (controls, space, 0x7F-0xA0, 0xAD) for
// U+0100 onwards in byte order, so every byte is one visible character.
std::array<char32_t, 256> ByteAlphabet() {
  std::array<char32_t, 256> table{};
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    table[b] = printable ? static_cast<char32_t>(b) : next++;
  }
  return table;
}

PreTokenizer ParsePreTokenizer(const std::string& name) {
  if (name == "gpt2" || name == "default") return PreTokenizer::kGpt2;
  if (name == "smollm") return PreTokenizer::kSmolLm;
  if (name == "llama-bpe" || name == "llama3") return PreTokenizer::kLlama3;
  ThrowError(kOp, "tokenizer.ggml.pre", FormatValue(name),
             "unknown pre-tokenizer (posenc knows gpt2, default, smollm, llama-bpe)");
}

PreTokenizer ReadPreTokenizer(const GgufMetadata& metadata) {
  const std::string* name = GgufFind<std::string>(metadata, "tokenizer.ggml.pre", kOp);
  // llama.cpp treats a missing pre-tokenizer as GPT-2's.
  return name ? ParsePreTokenizer(*name) : PreTokenizer::kGpt2;
}

std::uint64_t PairKey(std::int32_t left, std::int32_t right) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) | static_cast<std::uint32_t>(right);
}

}  // namespace

ByteLevelBpe::ByteLevelBpe(const GgufMetadata& metadata, const Vocabulary& vocab, std::optional<std::int32_t> unknown)
    : pre_(ReadPreTokenizer(metadata)), splitter_(pre_), unknown_(unknown) {
  // The byte alphabet: every byte's stand-in character should be a token, so
  // that any text can be encoded without an unknown token.
  const std::array<char32_t, 256> alphabet = ByteAlphabet();
  byte_of_.fill(-1);
  for (int b = 0; b < 256; ++b) {
    std::string ch;
    AppendUtf8(ch, alphabet[b]);
    byte_of_[alphabet[b]] = b;
    const std::optional<std::int32_t> id = vocab.Find(ch);
    byte_token_[b] = id.value_or(kMissing);
    if (id) continue;
    missing_bytes_ = true;
    std::vector<std::int32_t> fallback;
    for (unsigned char u : ch) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", u);
      const std::optional<std::int32_t> f = vocab.Find(name);
      if (!f) {
        fallback.clear();
        break;
      }
      fallback.push_back(*f);
    }
    byte_fallback_[b] = std::move(fallback);
  }

  const auto& merges =
      RequireGgufValue<std::vector<std::string>>(metadata, "tokenizer.ggml.merges", kOp, "a BPE tokenizer needs it");
  merges_.reserve(merges.size());
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string& merge = merges[rank];
    const std::string key = "tokenizer.ggml.merges[" + std::to_string(rank) + "]";
    // Byte-level tokens never hold a real space (it is "Ġ"), so the one
    // space separates the two parts.
    const std::size_t space = merge.find(' ', 1);
    Require(space != std::string::npos && space + 1 < merge.size(), kOp, key, merge,
            "must be two tokens separated by one space");
    const std::string_view left(merge.data(), space), right(merge.data() + space + 1, merge.size() - space - 1);
    const std::optional<std::int32_t> l = vocab.Find(left), r = vocab.Find(right);
    Require(l && r, kOp, key, merge, "both parts must be tokens");
    const std::optional<std::int32_t> result = vocab.Find(std::string(left) + std::string(right));
    Require(result.has_value(), kOp, key, merge, "the merged string must be a token");
    // A repeated merge keeps its last rank (Hugging Face builds a map).
    merges_.insert_or_assign(PairKey(*l, *r), Merge{static_cast<std::int32_t>(rank), *result});
  }
}

std::string ByteLevelBpe::TokenBytes(const Vocabulary& vocab, std::int32_t id) const {
  // Characters outside the alphabet (none in a well-formed vocabulary) are
  // kept as their UTF-8.
  const std::string& t = vocab.tokens[id];
  std::string bytes;
  for (std::size_t k = 0; k < t.size();) {
    char32_t cp = 0;
    const std::size_t len = NextCodePoint(t, k, cp);
    if (cp < byte_of_.size() && byte_of_[cp] >= 0) {
      bytes.push_back(static_cast<char>(byte_of_[cp]));
    } else {
      bytes.append(t, k, len);
    }
    k += len;
  }
  return bytes;
}

// Bytes whose character is not in the vocabulary (SmolLM2 lacks six control
// bytes, e.g. 0x04) are handled as Hugging Face's BPE model does with
// byte_fallback (which transformers sets for GGUF vocabularies): the
// character's UTF-8 bytes as <0xXX> tokens if the vocabulary has them all,
// else the unknown token, one for a run of such bytes (fuse_unk); without an
// unknown token they are dropped. The list is relinked from scratch.
void ByteLevelBpe::ReplaceMissing(std::string_view word, std::vector<Symbol>& symbols) const {
  std::vector<Symbol> kept;
  kept.reserve(symbols.size());
  bool previous_unknown = false;
  for (std::size_t i = 0; i < symbols.size(); ++i) {
    const Symbol& s = symbols[i];
    if (s.id != kMissing) {
      kept.push_back(s);
      previous_unknown = false;
      continue;
    }
    const std::vector<std::int32_t>& fallback = byte_fallback_[static_cast<unsigned char>(word[i])];
    if (!fallback.empty()) {
      for (std::int32_t id : fallback) kept.push_back({id, 0, 0});
      previous_unknown = false;
    } else if (unknown_ && !previous_unknown) {
      kept.push_back({*unknown_, 0, 0});
      previous_unknown = true;
    }
  }
  const auto n = static_cast<std::int32_t>(kept.size());
  for (std::int32_t i = 0; i < n; ++i) {
    kept[i].prev = i - 1;
    kept[i].next = i + 1 < n ? i + 1 : -1;
  }
  symbols = std::move(kept);
}

// BPE on one word: start from one symbol per byte, then repeatedly merge the
// adjacent pair with the lowest merge rank, the leftmost one among equal
// ranks (Hugging Face's order). A heap of candidate pairs keeps long words
// O(n log n); stale candidates are skipped when popped.
void ByteLevelBpe::EncodeWord(std::string_view word, std::vector<std::int32_t>& out) const {
  if (word.size() == 1 && byte_token_[static_cast<unsigned char>(word[0])] != kMissing) {
    out.push_back(byte_token_[static_cast<unsigned char>(word[0])]);
    return;
  }
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    std::lock_guard lock(cache_mutex_);
    const auto it = cache_.find(word);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  struct Candidate {
    std::int32_t rank, left, left_id, right_id, result;
    bool operator<(const Candidate& o) const {  // std::priority_queue pops the largest
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  const auto n = static_cast<std::int32_t>(word.size());
  std::vector<Symbol> symbols(n);
  for (std::int32_t i = 0; i < n; ++i) {
    symbols[i] = {byte_token_[static_cast<unsigned char>(word[i])], i - 1, i + 1 < n ? i + 1 : -1};
  }
  if (missing_bytes_) ReplaceMissing(word, symbols);
  std::priority_queue<Candidate> heap;
  const auto push = [&](std::int32_t left) {
    if (left < 0 || symbols[left].next < 0) return;
    const std::int32_t l = symbols[left].id, r = symbols[symbols[left].next].id;
    const auto it = merges_.find(PairKey(l, r));
    if (it != merges_.end()) heap.push({it->second.rank, left, l, r, it->second.result});
  };
  for (std::int32_t i = 0; i + 1 < static_cast<std::int32_t>(symbols.size()); ++i) push(i);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol& left = symbols[c.left];
    // Stale if either symbol has changed (merged away or into something else).
    if (left.id != c.left_id || left.next < 0 || symbols[left.next].id != c.right_id) continue;
    const std::int32_t right = left.next;
    left.id = c.result;
    left.next = symbols[right].next;
    if (left.next >= 0) symbols[left.next].prev = c.left;
    symbols[right].id = -1;
    push(left.prev);
    push(c.left);
  }
  const std::size_t first = out.size();
  for (std::int32_t i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next) {
    out.push_back(symbols[i].id);
  }
  if (cacheable) {
    std::lock_guard lock(cache_mutex_);
    if (cache_.size() >= kMaxCacheEntries) cache_.clear();
    cache_.emplace(std::string(word), std::vector<std::int32_t>(out.begin() + first, out.end()));
  }
}

void ByteLevelBpe::Encode(std::string_view text, std::vector<std::int32_t>& out) const {
  std::vector<std::string_view> words;
  splitter_.Split(text, words);
  for (std::string_view word : words) EncodeWord(word, out);
}

}  // namespace posenc::tokenizer
