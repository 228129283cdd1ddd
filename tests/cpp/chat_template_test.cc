// The chat formats of `posenc generate --chat` on tiny vocabularies: the
// prompt text and its ids (Gemma's BOS first), the end-of-turn token, and a
// vocabulary with neither format.
#include "posenc/chat_template.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "posenc/error.h"

namespace posenc {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

// A SentencePiece vocabulary with Gemma's specials (ids as in Gemma 3:
// <pad> 0, <eos> 1, <bos> 2, <unk> 3), "\n" (user defined, as in Gemma), Hi
// (from H + i), and the byte tokens for everything else.
GgufMetadata GemmaLike() {
  std::vector<std::string> tokens{"<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>", "\n",
                                  "H",     "i",     "▁",     "Hi"};
  std::vector<std::int64_t> types{3, 3, 3, 2, 3, 3, 4, 1, 1, 1, 1};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    tokens.emplace_back(name);
    types.push_back(6);
  }
  GgufMetadata m;
  m["tokenizer.ggml.model"] = std::string("llama");
  m["tokenizer.ggml.tokens"] = tokens;
  m["tokenizer.ggml.scores"] = std::vector<double>(tokens.size(), -1.0);
  m["tokenizer.ggml.token_type"] = types;
  m["tokenizer.ggml.bos_token_id"] = std::int64_t{2};
  m["tokenizer.ggml.eos_token_id"] = std::int64_t{1};
  m["tokenizer.ggml.unknown_token_id"] = std::int64_t{3};
  m["tokenizer.ggml.add_bos_token"] = true;
  m["tokenizer.ggml.add_space_prefix"] = false;
  return m;
}

TEST(ChatTemplate, Gemma) {
  const BpeTokenizer t = BpeTokenizer::FromGguf(GemmaLike());
  const ChatPrompt chat = FormatChat(t, "", "Hi");
  EXPECT_EQ(chat.format, ChatFormat::kGemma);
  EXPECT_EQ(chat.text, "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(chat.end_of_turn, 5);
  // <bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n
  const auto ids = [](const std::vector<std::vector<std::int32_t>>& parts) {
    std::vector<std::int32_t> all;
    for (const auto& part : parts) all.insert(all.end(), part.begin(), part.end());
    return all;
  };
  EXPECT_EQ(EncodePrompt(t, chat.text),
            ids({{2, 4}, t.Encode("user"), {6}, t.Encode("Hi"), {5, 6, 4}, t.Encode("model"), {6}}));
  EXPECT_THAT(t.Encode("Hi"), ElementsAreArray({10}));
  // No system role: the system text goes before the user's, a blank line between.
  const ChatPrompt with_system = FormatChat(t, "Be brief.", "Hi");
  EXPECT_EQ(with_system.text, "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\n");
  EXPECT_EQ(EncodePrompt(t, with_system.text),
            ids({{2, 4}, t.Encode("user"), {6}, t.Encode("Be brief."), {6, 6, 10, 5, 6, 4}, t.Encode("model"), {6}}));
}

TEST(ChatTemplate, ChatMlAndNoBos) {
  // Byte-level: printable ASCII as itself, other bytes as names no text has.
  std::vector<std::string> tokens;
  tokens.reserve(258);
  for (int b = 0; b < 256; ++b)
    tokens.push_back(b >= '!' && b <= '~' ? std::string(1, static_cast<char>(b)) : std::to_string(b).append("#"));
  tokens.insert(tokens.end(), {"<|im_start|>", "<|im_end|>"});
  std::vector<std::int64_t> types(256, 1);
  types.insert(types.end(), {3, 3});
  GgufMetadata m;
  m["tokenizer.ggml.model"] = std::string("gpt2");
  m["tokenizer.ggml.tokens"] = tokens;
  m["tokenizer.ggml.token_type"] = types;
  m["tokenizer.ggml.merges"] = std::vector<std::string>{};
  m["tokenizer.ggml.bos_token_id"] = std::int64_t{256};
  m["tokenizer.ggml.add_bos_token"] = false;
  const BpeTokenizer t = BpeTokenizer::FromGguf(m);
  const ChatPrompt chat = FormatChat(t, "S", "U");
  EXPECT_EQ(chat.format, ChatFormat::kChatMl);
  EXPECT_EQ(chat.text, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(chat.end_of_turn, 257);
  EXPECT_EQ(EncodePrompt(t, chat.text), t.Encode(chat.text));
  EXPECT_EQ(EncodePrompt(t, chat.text)[0], 256);  // <|im_start|> as text, no BOS added
}

TEST(ChatTemplate, NeitherFormat) {
  GgufMetadata m = GemmaLike();
  auto tokens = std::get<std::vector<std::string>>(m["tokenizer.ggml.tokens"]);
  tokens[5] = "<end_turn>";
  m["tokenizer.ggml.tokens"] = tokens;
  try {
    FormatChat(BpeTokenizer::FromGguf(m), "", "Hi");
    ADD_FAILURE() << "no posenc::Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("[chat] tokenizer = 267 tokens: needs the special tokens of a chat format"));
  }
}

}  // namespace
}  // namespace posenc
