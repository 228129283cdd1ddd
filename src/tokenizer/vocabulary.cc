#include "tokenizer/vocabulary.h"

#include "posenc/error.h"

namespace posenc::tokenizer {
namespace {

constexpr const char* kOp = "tokenizer";

}  // namespace

Vocabulary Vocabulary::FromGguf(const GgufMetadata& metadata) {
  Vocabulary v;
  v.tokens = RequireGgufValue<std::vector<std::string>>(metadata, "tokenizer.ggml.tokens", kOp, "a tokenizer needs it");
  const std::size_t n = v.tokens.size();
  Require(n > 0 && n <= static_cast<std::size_t>(INT32_MAX), kOp, "tokenizer.ggml.tokens",
          Verbatim{std::to_string(n) + " tokens"}, "must hold 1 to 2^31-1 tokens");
  v.ids.reserve(n);
  for (std::size_t i = 0; i < n; ++i) v.ids[v.tokens[i]] = static_cast<std::int32_t>(i);

  v.types.assign(n, TokenType::kNormal);
  if (const auto* types = GgufFind<std::vector<std::int64_t>>(metadata, "tokenizer.ggml.token_type", kOp)) {
    Require(types->size() == n, kOp, "tokenizer.ggml.token_type", Verbatim{std::to_string(types->size()) + " entries"},
            "must have one entry per token (" + std::to_string(n) + ")");
    for (std::size_t i = 0; i < n; ++i) {
      const std::int64_t t = (*types)[i];
      Require(t >= 1 && t <= 6, kOp, "tokenizer.ggml.token_type[" + std::to_string(i) + "]", t,
              "must be a GGUF token type: 1 normal, 2 unknown, 3 control, 4 user defined, 5 unused, 6 byte");
      v.types[i] = static_cast<TokenType>(t);
    }
  }
  return v;
}

}  // namespace posenc::tokenizer
