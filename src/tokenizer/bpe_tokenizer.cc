// Byte-level BPE: vocabulary and merges from GGUF metadata, special-token
// matching, the GPT-2 byte alphabet, and the merge loop.
#include <algorithm>
#include <array>
#include <cstdio>
#include <mutex>
#include <queue>
#include <string>
#include <unordered_map>
#include <utility>
#include <variant>

#include "posenc/error.h"
#include "posenc/tokenizer.h"
#include "tokenizer/word_splitter.h"

namespace posenc {
namespace {

constexpr const char* kOp = "tokenizer";

// GGUF token types (llama.cpp's numbering).
constexpr std::int64_t kTypeControl = 3;
constexpr std::int64_t kTypeUserDefined = 4;

// Words longer than this are merged every time rather than cached (they are
// rare, and would crowd the cache).
constexpr std::size_t kMaxCachedWordBytes = 256;
constexpr std::size_t kMaxCacheEntries = 1 << 16;

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

// Lets the word cache be searched with a string_view (no allocation).
struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// One symbol of a word during BPE, in a doubly linked list (-1 ends it).
struct Symbol {
  std::int32_t id, prev, next;
};

// byte_token value of a byte whose stand-in character is not a token.
constexpr std::int32_t kMissing = -1;

struct Merge {
  std::int32_t rank;
  std::int32_t result;
};

std::uint64_t PairKey(std::int32_t left, std::int32_t right) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) | static_cast<std::uint32_t>(right);
}

}  // namespace

std::string_view PreTokenizerName(PreTokenizer pre) {
  switch (pre) {
    case PreTokenizer::kGpt2: return "gpt2";
    case PreTokenizer::kSmolLm: return "smollm";
    case PreTokenizer::kLlama3: return "llama-bpe";
  }
  return "?";
}

struct BpeTokenizer::Impl {
  explicit Impl(PreTokenizer pre) : pre_tokenizer(pre), splitter(pre) {}

  PreTokenizer pre_tokenizer;
  tokenizer::WordSplitter splitter;
  std::vector<std::string> tokens;
  std::vector<std::string> token_bytes;  // what Decode writes per token
  std::vector<bool> special;
  std::unordered_map<std::string_view, std::int32_t> ids;  // views into `tokens`
  std::unordered_map<std::uint64_t, Merge> merges;
  std::array<std::int32_t, 256> byte_token{};  // the token of each single byte, or kMissing
  bool missing_bytes = false;
  // For a missing byte: its character's <0xXX> tokens, or empty.
  std::array<std::vector<std::int32_t>, 256> byte_fallback;
  // Special tokens by first byte, longest first (leftmost-longest matching).
  std::array<std::vector<std::int32_t>, 256> specials_by_first_byte;
  bool has_specials = false;
  std::optional<std::int32_t> bos, eos, unknown, padding;

  mutable std::mutex cache_mutex;
  mutable std::unordered_map<std::string, std::vector<std::int32_t>, StringHash, std::equal_to<>> cache;

  void EncodeWord(std::string_view word, std::vector<std::int32_t>& out) const;
  void ReplaceMissing(std::string_view word, std::vector<Symbol>& symbols) const;
  void EncodeText(std::string_view text, std::vector<std::int32_t>& out) const;
};

// Bytes whose character is not in the vocabulary (SmolLM2 lacks six control
// bytes, e.g. 0x04) are handled as Hugging Face's BPE model does with
// byte_fallback (which transformers sets for GGUF vocabularies): the
// character's UTF-8 bytes as <0xXX> tokens if the vocabulary has them all,
// else the unknown token, one for a run of such bytes (fuse_unk); without an
// unknown token they are dropped. The list is relinked from scratch.
void BpeTokenizer::Impl::ReplaceMissing(std::string_view word, std::vector<Symbol>& symbols) const {
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
    const std::vector<std::int32_t>& fallback = byte_fallback[static_cast<unsigned char>(word[i])];
    if (!fallback.empty()) {
      for (std::int32_t id : fallback) kept.push_back({id, 0, 0});
      previous_unknown = false;
    } else if (unknown && !previous_unknown) {
      kept.push_back({*unknown, 0, 0});
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
void BpeTokenizer::Impl::EncodeWord(std::string_view word, std::vector<std::int32_t>& out) const {
  if (word.size() == 1 && byte_token[static_cast<unsigned char>(word[0])] != kMissing) {
    out.push_back(byte_token[static_cast<unsigned char>(word[0])]);
    return;
  }
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    std::lock_guard lock(cache_mutex);
    const auto it = cache.find(word);
    if (it != cache.end()) {
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
    symbols[i] = {byte_token[static_cast<unsigned char>(word[i])], i - 1, i + 1 < n ? i + 1 : -1};
  }
  if (missing_bytes) ReplaceMissing(word, symbols);
  std::priority_queue<Candidate> heap;
  const auto push = [&](std::int32_t left) {
    if (left < 0 || symbols[left].next < 0) return;
    const std::int32_t l = symbols[left].id, r = symbols[symbols[left].next].id;
    const auto it = merges.find(PairKey(l, r));
    if (it != merges.end()) heap.push({it->second.rank, left, l, r, it->second.result});
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
    std::lock_guard lock(cache_mutex);
    if (cache.size() >= kMaxCacheEntries) cache.clear();
    cache.emplace(std::string(word), std::vector<std::int32_t>(out.begin() + first, out.end()));
  }
}

void BpeTokenizer::Impl::EncodeText(std::string_view text, std::vector<std::int32_t>& out) const {
  std::vector<std::string_view> words;
  splitter.Split(text, words);
  for (std::string_view word : words) EncodeWord(word, out);
}

BpeTokenizer::BpeTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BpeTokenizer::BpeTokenizer(BpeTokenizer&&) noexcept = default;
BpeTokenizer& BpeTokenizer::operator=(BpeTokenizer&&) noexcept = default;
BpeTokenizer::~BpeTokenizer() = default;

BpeTokenizer BpeTokenizer::FromGguf(const GgufMetadata& metadata) {
  const auto& model = RequireGgufValue<std::string>(metadata, "tokenizer.ggml.model", kOp, "a BPE tokenizer needs it");
  Require(model == "gpt2", kOp, "tokenizer.ggml.model", model,
          "posenc's BpeTokenizer reads byte-level BPE vocabularies (\"gpt2\") only");
  const std::string* pre_name = GgufFind<std::string>(metadata, "tokenizer.ggml.pre", kOp);
  // llama.cpp treats a missing pre-tokenizer as GPT-2's.
  auto impl = std::make_unique<Impl>(pre_name ? ParsePreTokenizer(*pre_name) : PreTokenizer::kGpt2);

  impl->tokens =
      RequireGgufValue<std::vector<std::string>>(metadata, "tokenizer.ggml.tokens", kOp, "a BPE tokenizer needs it");
  const std::size_t vocab = impl->tokens.size();
  Require(vocab > 0 && vocab <= static_cast<std::size_t>(INT32_MAX), kOp, "tokenizer.ggml.tokens",
          Verbatim{std::to_string(vocab) + " tokens"}, "must hold 1 to 2^31-1 tokens");
  impl->ids.reserve(vocab);
  for (std::size_t i = 0; i < vocab; ++i) {
    // A repeated string keeps its last id, as a Hugging Face vocab built from
    // the list would.
    impl->ids[impl->tokens[i]] = static_cast<std::int32_t>(i);
  }

  impl->special.assign(vocab, false);
  if (const auto* types = GgufFind<std::vector<std::int64_t>>(metadata, "tokenizer.ggml.token_type", kOp)) {
    Require(types->size() == vocab, kOp, "tokenizer.ggml.token_type",
            Verbatim{std::to_string(types->size()) + " entries"},
            "must have one entry per token (" + std::to_string(vocab) + ")");
    for (std::size_t i = 0; i < vocab; ++i) {
      const std::int64_t t = (*types)[i];
      if ((t == kTypeControl || t == kTypeUserDefined) && !impl->tokens[i].empty()) {
        impl->special[i] = true;
        impl->has_specials = true;
        impl->specials_by_first_byte[static_cast<unsigned char>(impl->tokens[i][0])].push_back(
            static_cast<std::int32_t>(i));
      }
    }
    for (auto& bucket : impl->specials_by_first_byte) {
      std::stable_sort(bucket.begin(), bucket.end(),
                       [&](std::int32_t a, std::int32_t b) { return impl->tokens[a].size() > impl->tokens[b].size(); });
    }
  }

  // The byte alphabet: every byte's stand-in character must be a token, so
  // that any text can be encoded without an unknown token.
  const std::array<char32_t, 256> alphabet = ByteAlphabet();
  std::array<int, 324> byte_of{};  // stand-in code point (< 0x144) -> byte
  byte_of.fill(-1);
  for (int b = 0; b < 256; ++b) {
    std::string ch;
    AppendUtf8(ch, alphabet[b]);
    byte_of[alphabet[b]] = b;
    const auto it = impl->ids.find(ch);
    impl->byte_token[b] = it == impl->ids.end() ? kMissing : it->second;
    if (it != impl->ids.end()) continue;
    impl->missing_bytes = true;
    std::vector<std::int32_t> fallback;
    for (unsigned char u : ch) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", u);
      const auto f = impl->ids.find(std::string_view(name));
      if (f == impl->ids.end()) {
        fallback.clear();
        break;
      }
      fallback.push_back(f->second);
    }
    impl->byte_fallback[b] = std::move(fallback);
  }
  impl->token_bytes.resize(vocab);
  for (std::size_t i = 0; i < vocab; ++i) {
    const std::string& t = impl->tokens[i];
    if (impl->special[i]) {
      impl->token_bytes[i] = t;
      continue;
    }
    // Characters outside the alphabet (none in a well-formed vocabulary) are
    // kept as their UTF-8.
    std::string& bytes = impl->token_bytes[i];
    for (std::size_t k = 0; k < t.size();) {
      char32_t cp = 0;
      const std::size_t len = NextCodePoint(t, k, cp);
      if (cp < byte_of.size() && byte_of[cp] >= 0) {
        bytes.push_back(static_cast<char>(byte_of[cp]));
      } else {
        bytes.append(t, k, len);
      }
      k += len;
    }
  }

  const auto& merges =
      RequireGgufValue<std::vector<std::string>>(metadata, "tokenizer.ggml.merges", kOp, "a BPE tokenizer needs it");
  impl->merges.reserve(merges.size());
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string& merge = merges[rank];
    const std::string key = "tokenizer.ggml.merges[" + std::to_string(rank) + "]";
    // Byte-level tokens never hold a real space (it is "Ġ"), so the one
    // space separates the two parts.
    const std::size_t space = merge.find(' ', 1);
    Require(space != std::string::npos && space + 1 < merge.size(), kOp, key, merge,
            "must be two tokens separated by one space");
    const std::string_view left(merge.data(), space), right(merge.data() + space + 1, merge.size() - space - 1);
    const auto l = impl->ids.find(left), r = impl->ids.find(right);
    Require(l != impl->ids.end() && r != impl->ids.end(), kOp, key, merge, "both parts must be tokens");
    const auto result = impl->ids.find(std::string(left) + std::string(right));
    Require(result != impl->ids.end(), kOp, key, merge, "the merged string must be a token");
    // A repeated merge keeps its last rank (Hugging Face builds a map).
    impl->merges.insert_or_assign(PairKey(l->second, r->second),
                                  Merge{static_cast<std::int32_t>(rank), result->second});
  }

  const auto optional_id = [&](const char* key) -> std::optional<std::int32_t> {
    const auto* id = GgufFind<std::int64_t>(metadata, key, kOp);
    if (id == nullptr) return std::nullopt;
    Require(*id >= 0 && static_cast<std::size_t>(*id) < vocab, kOp, key, *id,
            "must be a token id below the vocabulary size " + std::to_string(vocab));
    return static_cast<std::int32_t>(*id);
  };
  impl->bos = optional_id("tokenizer.ggml.bos_token_id");
  impl->eos = optional_id("tokenizer.ggml.eos_token_id");
  impl->unknown = optional_id("tokenizer.ggml.unknown_token_id");
  impl->padding = optional_id("tokenizer.ggml.padding_token_id");
  return BpeTokenizer(std::move(impl));
}

std::vector<std::int32_t> BpeTokenizer::Encode(std::string_view utf8) const {
  std::vector<std::int32_t> out;
  out.reserve(utf8.size() / 3 + 1);
  if (!impl_->has_specials) {
    impl_->EncodeText(utf8, out);
    return out;
  }
  // Special tokens first: the leftmost match, the longest of those starting
  // there; the text between matches is encoded normally.
  std::size_t start = 0;
  for (std::size_t i = 0; i < utf8.size(); ++i) {
    for (std::int32_t id : impl_->specials_by_first_byte[static_cast<unsigned char>(utf8[i])]) {
      const std::string& s = impl_->tokens[id];
      if (utf8.compare(i, s.size(), s) != 0) continue;
      impl_->EncodeText(utf8.substr(start, i - start), out);
      out.push_back(id);
      start = i + s.size();
      i = start - 1;
      break;
    }
  }
  impl_->EncodeText(utf8.substr(start), out);
  return out;
}

std::string BpeTokenizer::Decode(std::span<const std::int32_t> ids) const {
  std::string out;
  for (std::int32_t id : ids) {
    Require(id >= 0 && id < vocab_size(), kOp, "id", id,
            "must be a token id below the vocabulary size " + std::to_string(vocab_size()));
    out += impl_->token_bytes[id];
  }
  return out;
}

std::int32_t BpeTokenizer::vocab_size() const { return static_cast<std::int32_t>(impl_->tokens.size()); }
PreTokenizer BpeTokenizer::pre_tokenizer() const { return impl_->pre_tokenizer; }

const std::string& BpeTokenizer::token(std::int32_t id) const {
  Require(id >= 0 && id < vocab_size(), kOp, "id", id,
          "must be a token id below the vocabulary size " + std::to_string(vocab_size()));
  return impl_->tokens[id];
}

std::optional<std::int32_t> BpeTokenizer::TokenId(std::string_view token) const {
  const auto it = impl_->ids.find(token);
  if (it == impl_->ids.end()) return std::nullopt;
  return it->second;
}

bool BpeTokenizer::IsSpecial(std::int32_t id) const { return id >= 0 && id < vocab_size() && impl_->special[id]; }

std::optional<std::int32_t> BpeTokenizer::bos_id() const { return impl_->bos; }
std::optional<std::int32_t> BpeTokenizer::eos_id() const { return impl_->eos; }
std::optional<std::int32_t> BpeTokenizer::unknown_id() const { return impl_->unknown; }
std::optional<std::int32_t> BpeTokenizer::padding_id() const { return impl_->padding; }

}  // namespace posenc
