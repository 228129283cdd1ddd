#include "posenc/chat_template.h"

#include "posenc/error.h"

namespace posenc {

ChatPrompt FormatChat(const BpeTokenizer& tokenizer, std::string_view system, std::string_view user) {
  const auto special = [&](std::string_view token) {
    const std::optional<std::int32_t> id = tokenizer.TokenId(token);
    return id && tokenizer.IsSpecial(*id) ? id : std::nullopt;
  };
  const std::optional<std::int32_t> im_start = special("<|im_start|>"), im_end = special("<|im_end|>");
  if (im_start && im_end) {
    std::string text;
    if (!system.empty()) text.append("<|im_start|>system\n").append(system).append("<|im_end|>\n");
    text.append("<|im_start|>user\n").append(user).append("<|im_end|>\n<|im_start|>assistant\n");
    return {ChatFormat::kChatMl, std::move(text), *im_end};
  }
  const std::optional<std::int32_t> start = special("<start_of_turn>"), end = special("<end_of_turn>");
  if (start && end) {
    std::string text = "<start_of_turn>user\n";
    if (!system.empty()) text.append(system).append("\n\n");
    text.append(user).append("<end_of_turn>\n<start_of_turn>model\n");
    return {ChatFormat::kGemma, std::move(text), *end};
  }
  ThrowError("chat", "tokenizer", std::to_string(tokenizer.vocab_size()) + " tokens",
             "needs the special tokens of a chat format posenc writes: <|im_start|> and <|im_end|> (ChatML) or "
             "<start_of_turn> and <end_of_turn> (Gemma)");
}

std::vector<std::int32_t> EncodePrompt(const BpeTokenizer& tokenizer, std::string_view text) {
  std::vector<std::int32_t> ids;
  if (tokenizer.add_bos()) ids.push_back(*tokenizer.bos_id());
  const std::vector<std::int32_t> encoded = tokenizer.Encode(text);
  ids.insert(ids.end(), encoded.begin(), encoded.end());
  return ids;
}

}  // namespace posenc
