// The chat formats posenc writes itself (GGUF's Jinja templates are not run):
// one user turn, after an optional system message, ready for the model's
// reply. Which one is told by the vocabulary's turn tokens.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/tokenizer.h"

namespace posenc {

enum class ChatFormat {
  // <|im_start|>role\n ... <|im_end|>\n: SmolLM2-Instruct, Qwen and others.
  kChatMl,
  // <start_of_turn>user\n ... <end_of_turn>\n<start_of_turn>model\n: Gemma.
  // Gemma has no system role: its own template puts the system text in front
  // of the first user text, followed by a blank line.
  kGemma,
};

struct ChatPrompt {
  ChatFormat format;
  // The turns as text, special tokens written out (Encode matches them);
  // BOS is not in it: EncodePrompt adds it for models that want it (Gemma's
  // "<bos><start_of_turn>user\n...").
  std::string text;
  // The token that ends the model's turn (<|im_end|>, <end_of_turn>).
  std::int32_t end_of_turn;
};

// Throws posenc::Error (op "chat") when the vocabulary has the turn tokens of
// neither format.
ChatPrompt FormatChat(const BpeTokenizer& tokenizer, std::string_view system, std::string_view user);

// The ids a prompt starts the model with: BOS if the model adds it
// (BpeTokenizer::add_bos), then Encode(text).
std::vector<std::int32_t> EncodePrompt(const BpeTokenizer& tokenizer, std::string_view text);

}  // namespace posenc
