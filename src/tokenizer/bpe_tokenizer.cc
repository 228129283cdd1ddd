// The tokenizer of a GGUF file: the shared vocabulary and special-token
// matching, and the dispatch to the model of tokenizer.ggml.model.
#include <algorithm>
#include <array>
#include <memory>

#include "posenc/error.h"
#include "posenc/tokenizer.h"
#include "tokenizer/byte_level_bpe.h"
#include "tokenizer/sentencepiece_bpe.h"
#include "tokenizer/vocabulary.h"

namespace posenc {
namespace {

constexpr const char* kOp = "tokenizer";

}  // namespace

std::string_view PreTokenizerName(PreTokenizer pre) {
  switch (pre) {
    case PreTokenizer::kGpt2: return "gpt2";
    case PreTokenizer::kSmolLm: return "smollm";
    case PreTokenizer::kLlama3: return "llama-bpe";
  }
  return "?";
}

std::string_view TokenizerModelName(TokenizerModel model) {
  switch (model) {
    case TokenizerModel::kByteLevelBpe: return "gpt2";
    case TokenizerModel::kSentencePieceBpe: return "llama";
  }
  return "?";
}

struct BpeTokenizer::Impl {
  tokenizer::Vocabulary vocab;
  // Exactly one is set, by tokenizer.ggml.model.
  std::unique_ptr<tokenizer::ByteLevelBpe> byte_level;
  std::unique_ptr<tokenizer::SentencePieceBpe> sentencepiece;
  std::vector<std::string> token_bytes;  // what Decode writes per token
  // Special tokens as matched in the (normalized) text, by first byte,
  // longest first (leftmost-longest matching).
  std::vector<std::string> special_text;
  std::array<std::vector<std::int32_t>, 256> specials_by_first_byte;
  bool has_specials = false;
  std::optional<std::int32_t> bos, eos, unknown, padding;
  bool add_bos = false;

  void EncodeText(std::string_view text, std::vector<std::int32_t>& out) const {
    if (byte_level) {
      byte_level->Encode(text, out);
    } else {
      sentencepiece->Encode(text, out);
    }
  }
};

BpeTokenizer::BpeTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BpeTokenizer::BpeTokenizer(BpeTokenizer&&) noexcept = default;
BpeTokenizer& BpeTokenizer::operator=(BpeTokenizer&&) noexcept = default;
BpeTokenizer::~BpeTokenizer() = default;

BpeTokenizer BpeTokenizer::FromGguf(const GgufMetadata& metadata) {
  const auto& model = RequireGgufValue<std::string>(metadata, "tokenizer.ggml.model", kOp, "a tokenizer needs it");
  Require(model == "gpt2" || model == "llama", kOp, "tokenizer.ggml.model", model,
          "unknown tokenizer model (posenc knows gpt2: byte-level BPE, llama: SentencePiece BPE)");
  auto impl = std::make_unique<Impl>();
  impl->vocab = tokenizer::Vocabulary::FromGguf(metadata);
  const tokenizer::Vocabulary& vocab = impl->vocab;
  const std::int32_t vocab_size = vocab.size();

  const auto optional_id = [&](const char* key) -> std::optional<std::int32_t> {
    const auto* id = GgufFind<std::int64_t>(metadata, key, kOp);
    if (id == nullptr) return std::nullopt;
    Require(*id >= 0 && *id < vocab_size, kOp, key, *id,
            "must be a token id below the vocabulary size " + std::to_string(vocab_size));
    return static_cast<std::int32_t>(*id);
  };
  impl->bos = optional_id("tokenizer.ggml.bos_token_id");
  impl->eos = optional_id("tokenizer.ggml.eos_token_id");
  impl->unknown = optional_id("tokenizer.ggml.unknown_token_id");
  impl->padding = optional_id("tokenizer.ggml.padding_token_id");
  if (const bool* add_bos = GgufFind<bool>(metadata, "tokenizer.ggml.add_bos_token", kOp)) {
    Require(!*add_bos || impl->bos.has_value(), kOp, "tokenizer.ggml.add_bos_token", Verbatim{"true"},
            "needs tokenizer.ggml.bos_token_id");
    impl->add_bos = *add_bos;
  }

  if (model == "gpt2") {
    impl->byte_level = std::make_unique<tokenizer::ByteLevelBpe>(metadata, vocab, impl->unknown);
  } else {
    impl->sentencepiece = std::make_unique<tokenizer::SentencePieceBpe>(metadata, vocab, impl->unknown);
  }

  impl->token_bytes.resize(vocab_size);
  impl->special_text.resize(vocab_size);
  for (std::int32_t id = 0; id < vocab_size; ++id) {
    const std::string& token = vocab.tokens[id];
    if (!vocab.IsSpecial(id)) {
      impl->token_bytes[id] =
          impl->byte_level ? impl->byte_level->TokenBytes(vocab, id) : impl->sentencepiece->TokenBytes(id);
      continue;
    }
    impl->token_bytes[id] = token;
    if (token.empty()) continue;
    impl->special_text[id] = impl->sentencepiece ? tokenizer::SentencePieceBpe::NormalizeToken(token) : token;
    impl->specials_by_first_byte[static_cast<unsigned char>(impl->special_text[id][0])].push_back(id);
    impl->has_specials = true;
  }
  for (auto& bucket : impl->specials_by_first_byte) {
    std::stable_sort(bucket.begin(), bucket.end(), [&](std::int32_t a, std::int32_t b) {
      return impl->special_text[a].size() > impl->special_text[b].size();
    });
  }
  return BpeTokenizer(std::move(impl));
}

std::vector<std::int32_t> BpeTokenizer::Encode(std::string_view utf8) const {
  std::string normalized;
  std::string_view text = utf8;
  if (impl_->sentencepiece) {
    normalized = impl_->sentencepiece->Normalize(utf8);
    text = normalized;
  }
  std::vector<std::int32_t> out;
  out.reserve(text.size() / 3 + 1);
  if (!impl_->has_specials) {
    impl_->EncodeText(text, out);
    return out;
  }
  // Special tokens first: the leftmost match, the longest of those starting
  // there; the text between matches is encoded normally.
  std::size_t start = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    for (std::int32_t id : impl_->specials_by_first_byte[static_cast<unsigned char>(text[i])]) {
      const std::string& s = impl_->special_text[id];
      if (text.compare(i, s.size(), s) != 0) continue;
      impl_->EncodeText(text.substr(start, i - start), out);
      out.push_back(id);
      start = i + s.size();
      i = start - 1;
      break;
    }
  }
  impl_->EncodeText(text.substr(start), out);
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

std::int32_t BpeTokenizer::vocab_size() const { return impl_->vocab.size(); }

TokenizerModel BpeTokenizer::model() const {
  return impl_->byte_level ? TokenizerModel::kByteLevelBpe : TokenizerModel::kSentencePieceBpe;
}

std::optional<PreTokenizer> BpeTokenizer::pre_tokenizer() const {
  if (!impl_->byte_level) return std::nullopt;
  return impl_->byte_level->pre_tokenizer();
}

const std::string& BpeTokenizer::token(std::int32_t id) const {
  Require(id >= 0 && id < vocab_size(), kOp, "id", id,
          "must be a token id below the vocabulary size " + std::to_string(vocab_size()));
  return impl_->vocab.tokens[id];
}

std::optional<std::int32_t> BpeTokenizer::TokenId(std::string_view token) const { return impl_->vocab.Find(token); }

bool BpeTokenizer::IsSpecial(std::int32_t id) const {
  return id >= 0 && id < vocab_size() && impl_->vocab.IsSpecial(id) && !impl_->vocab.tokens[id].empty();
}

std::optional<std::int32_t> BpeTokenizer::bos_id() const { return impl_->bos; }
std::optional<std::int32_t> BpeTokenizer::eos_id() const { return impl_->eos; }
std::optional<std::int32_t> BpeTokenizer::unknown_id() const { return impl_->unknown; }
std::optional<std::int32_t> BpeTokenizer::padding_id() const { return impl_->padding; }
bool BpeTokenizer::add_bos() const { return impl_->add_bos; }

}  // namespace posenc
