// BpeTokenizer on tiny hand-made vocabularies given as GGUF metadata: merge
// order, the byte-level alphabet, pre-tokenizers, special tokens, round trips
// and errors. tests/python/test_tokenizer_hf.py checks the real SmolLM2
// vocabulary against Hugging Face.
#include "posenc/tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "posenc/error.h"

namespace posenc {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The GPT-2 stand-in character of a byte, as UTF-8 ("Ġ" for a space).
std::string ByteChar(unsigned char b) {
  const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
  char32_t cp = b;
  if (!printable) {
    cp = 256;
    for (int c = 0; c < b; ++c) {
      if (!((c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE)) ++cp;
    }
  }
  std::string out;
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  return out;
}

// A vocabulary: ids 0..255 are the bytes' characters in byte order, then
// `extra` tokens, then `specials` (token_type 3).
struct Vocab {
  std::vector<std::string> extra, merges, specials;
  std::string pre = "gpt2";

  GgufMetadata Metadata() const {
    std::vector<std::string> tokens;
    tokens.reserve(256 + extra.size());
    for (int b = 0; b < 256; ++b) tokens.push_back(ByteChar(static_cast<unsigned char>(b)));
    tokens.insert(tokens.end(), extra.begin(), extra.end());
    std::vector<std::int64_t> types(tokens.size(), 1);
    tokens.insert(tokens.end(), specials.begin(), specials.end());
    types.resize(tokens.size(), 3);
    GgufMetadata m;
    m["tokenizer.ggml.model"] = std::string("gpt2");
    m["tokenizer.ggml.pre"] = pre;
    m["tokenizer.ggml.tokens"] = tokens;
    m["tokenizer.ggml.token_type"] = types;
    m["tokenizer.ggml.merges"] = merges;
    if (!specials.empty()) {
      m["tokenizer.ggml.eos_token_id"] = std::int64_t{256 + static_cast<std::int64_t>(extra.size())};
    }
    return m;
  }
  BpeTokenizer Make() const { return BpeTokenizer::FromGguf(Metadata()); }
  std::int32_t Id(const std::string& token) const { return *Make().TokenId(token); }
};

std::int32_t B(char c) { return static_cast<unsigned char>(c); }

template <class F>
void ExpectError(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no posenc::Error";
  } catch (const Error& e) {
    for (const auto& part : parts) EXPECT_THAT(e.what(), HasSubstr(part));
  }
}

TEST(BpeTokenizer, LowestRankMergesFirst) {
  Vocab v{.extra = {"ab", "bc", "abc"}, .merges = {"b c", "a b", "a bc", "ab c"}};
  auto t = v.Make();
  // "b c" (rank 0) beats "a b" (rank 1): a + bc, then "a bc".
  EXPECT_THAT(t.Encode("abc"), ElementsAre(258));
  EXPECT_THAT(t.Encode("ab"), ElementsAre(256));
  Vocab w{.extra = {"ab", "bc", "abc"}, .merges = {"a b", "ab c"}};
  EXPECT_THAT(w.Make().Encode("abcbc"), ElementsAre(258, B('b'), B('c')));
}

TEST(BpeTokenizer, LeftmostPairWinsTies) {
  Vocab v{.extra = {"aa"}, .merges = {"a a"}};
  EXPECT_THAT(v.Make().Encode("aaa"), ElementsAre(256, B('a')));
  EXPECT_THAT(v.Make().Encode("aaaaa"), ElementsAre(256, 256, B('a')));
}

TEST(BpeTokenizer, EveryByteHasItsAlphabetToken) {
  Vocab v;
  auto t = v.Make();
  // No merges: one token per UTF-8 byte, whatever the character.
  EXPECT_THAT(t.Encode("é"), ElementsAre(0xC3, 0xA9));
  EXPECT_THAT(t.Encode(" \n"), ElementsAre(B(' '), B('\n')));
  EXPECT_EQ(t.token(B(' ')), "Ġ");
  EXPECT_EQ(t.token(B('\n')), "Ċ");
  EXPECT_EQ(t.token(0xAD), "Ń");
  std::string all;
  for (int b = 1; b < 256; ++b) all.push_back(static_cast<char>(b));
  // Not valid UTF-8 as a whole; decode of the byte tokens still gives the bytes.
  std::vector<std::int32_t> ids;
  for (int b = 1; b < 256; ++b) ids.push_back(b);
  EXPECT_EQ(t.Decode(ids), all);
}

// SmolLM2's vocabulary lacks the characters of six control bytes (0x04 ...).
TEST(BpeTokenizer, BytesMissingFromTheVocabulary) {
  Vocab v{.extra = {"ab"}, .merges = {"a b"}};
  auto m = v.Metadata();
  auto tokens = std::get<std::vector<std::string>>(m["tokenizer.ggml.tokens"]);
  tokens[4] = "<four>";
  tokens[6] = "<six>";
  m["tokenizer.ggml.tokens"] = tokens;
  // No unknown token: dropped.
  EXPECT_THAT(BpeTokenizer::FromGguf(m).Encode("a\x04"
                                               "b"),
              ElementsAre(B('a'), B('b')));
  EXPECT_THAT(BpeTokenizer::FromGguf(m).Encode("\x04"), ElementsAre());
  // The unknown token, once for a run (Hugging Face's fuse_unk).
  m["tokenizer.ggml.unknown_token_id"] = std::int64_t{0};
  EXPECT_THAT(BpeTokenizer::FromGguf(m).Encode("a\x04\x06\x04"
                                               "b ab"),
              ElementsAre(B('a'), 0, B('b'), B(' '), 256));
  // <0xXX> tokens for the character's UTF-8 bytes (U+0104 is C4 84).
  tokens[5] = "<0xC4>";
  tokens[7] = "<0x84>";
  m["tokenizer.ggml.tokens"] = tokens;
  EXPECT_THAT(BpeTokenizer::FromGguf(m).Encode("\x04"), ElementsAre(5, 7));
}

TEST(BpeTokenizer, Gpt2RegexLeavesOneSpaceForTheNextWord) {
  Vocab v{.extra = {"ĠĠ", "Ġx"}, .merges = {"Ġ Ġ", "Ġ x"}};
  // "    x" -> "   " + " x" -> ĠĠ Ġ | Ġx (one word "    " would be ĠĠ ĠĠ).
  EXPECT_THAT(v.Make().Encode("    x"), ElementsAre(256, B(' '), 257));
  // Contractions are words of their own; a space joins the word after it.
  Vocab c{.extra = {"'s", "Ġs"}, .merges = {"' s", "Ġ s"}};
  EXPECT_THAT(c.Make().Encode("it's s"), ElementsAre(B('i'), B('t'), 256, 257));
}

TEST(BpeTokenizer, SmolLmSplitsEveryDigit) {
  Vocab v{.extra = {"12", "Ġ1"}, .merges = {"1 2", "Ġ 1"}};
  EXPECT_THAT(v.Make().Encode(" 12"), ElementsAre(B(' '), 256));  // "1 2" ranks first
  v.pre = "smollm";
  EXPECT_THAT(v.Make().Encode(" 12"), ElementsAre(B(' '), B('1'), B('2')));
  // Other number characters too (Arabic-Indic three, one half).
  EXPECT_THAT(v.Make().Encode("1٣½"), ElementsAre(B('1'), 0xD9, 0xA3, 0xC2, 0xBD));
}

TEST(BpeTokenizer, Llama3GroupsDigitsByThree) {
  Vocab v{.extra = {"12", "123"}, .merges = {"1 2", "12 3"}, .pre = "llama-bpe"};
  EXPECT_THAT(v.Make().Encode("1231"), ElementsAre(257, B('1')));
}

TEST(BpeTokenizer, SpecialTokensAreMatchedWholeBeforeSplitting) {
  Vocab v{.extra = {"im"}, .merges = {"i m"}, .specials = {"<|im|>", "<|im|>x"}};
  auto t = v.Make();
  // Longest special at the leftmost position; text around it is BPE'd.
  EXPECT_THAT(t.Encode("a<|im|>im"), ElementsAre(B('a'), 257, 256));
  EXPECT_THAT(t.Encode("<|im|>xim<|im|>"), ElementsAre(258, 256, 257));
  EXPECT_TRUE(t.IsSpecial(257));
  EXPECT_FALSE(t.IsSpecial(256));
  const std::vector<std::int32_t> ids{257, 256};
  EXPECT_EQ(t.Decode(ids), "<|im|>im");
  EXPECT_EQ(t.eos_id(), 257);
}

TEST(BpeTokenizer, DecodeOfEncodeIsTheTextForRandomUtf8) {
  Vocab v{.extra = {"Ġt", "he", "Ġthe", "ĠĠ"}, .merges = {"Ġ t", "h e", "Ġt he", "Ġ Ġ"}};
  for (const char* pre : {"gpt2", "smollm", "llama-bpe"}) {
    v.pre = pre;
    auto t = v.Make();
    std::mt19937 rng(7);
    for (int trial = 0; trial < 300; ++trial) {
      std::string text;
      const int n = static_cast<int>(rng() % 40);
      for (int i = 0; i < n; ++i) {
        // Mostly ASCII (spaces, digits, apostrophes), some of every UTF-8 length.
        char32_t cp;
        switch (rng() % 4) {
          case 0: cp = " \n\t'0123456789the"[rng() % 17]; break;
          case 1: cp = 0x20 + rng() % 0x5F; break;
          case 2: cp = 0x80 + rng() % 0x3000; break;
          default: cp = 0x10000 + rng() % 0x10000; break;
        }
        if (cp >= 0xD800 && cp < 0xE000) cp = 'x';
        if (cp < 0x80) {
          text.push_back(static_cast<char>(cp));
        } else if (cp < 0x800) {
          text += {static_cast<char>(0xC0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3F))};
        } else if (cp < 0x10000) {
          text += {static_cast<char>(0xE0 | (cp >> 12)), static_cast<char>(0x80 | ((cp >> 6) & 0x3F)),
                   static_cast<char>(0x80 | (cp & 0x3F))};
        } else {
          text += {static_cast<char>(0xF0 | (cp >> 18)), static_cast<char>(0x80 | ((cp >> 12) & 0x3F)),
                   static_cast<char>(0x80 | ((cp >> 6) & 0x3F)), static_cast<char>(0x80 | (cp & 0x3F))};
        }
      }
      ASSERT_EQ(t.Decode(t.Encode(text)), text) << pre << " trial " << trial;
    }
  }
  EXPECT_THAT(v.Make().Encode(" the"), ElementsAre(258));
}

TEST(BpeTokenizer, Errors) {
  Vocab v;
  v.pre = "qwen9";
  ExpectError([&] { v.Make(); }, {"[tokenizer] tokenizer.ggml.pre = \"qwen9\"", "unknown"});
  v.pre = "gpt2";
  auto m = v.Metadata();
  m["tokenizer.ggml.model"] = std::string("llama");
  ExpectError([&] { BpeTokenizer::FromGguf(m); }, {"tokenizer.ggml.model = \"llama\""});
  m = v.Metadata();
  m.erase("tokenizer.ggml.merges");
  ExpectError([&] { BpeTokenizer::FromGguf(m); }, {"tokenizer.ggml.merges = missing"});
  Vocab bad{.merges = {"a b"}};
  ExpectError([&] { bad.Make(); }, {"tokenizer.ggml.merges[0] = \"a b\"", "merged string"});
  Vocab nospace{.merges = {"ab"}};
  ExpectError([&] { nospace.Make(); }, {"merges[0] = \"ab\"", "one space"});
  auto t = v.Make();
  ExpectError([&] { t.Encode("ok \xC3("); }, {"[tokenizer] text = byte 3", "not valid UTF-8"});
  v.pre = "smollm";
  ExpectError([&] { v.Make().Encode("\xFF"); }, {"not valid UTF-8"});
  const std::vector<std::int32_t> out_of_range{1 << 20};
  ExpectError([&] { t.Decode(out_of_range); }, {"[tokenizer] id = 1048576"});
}

}  // namespace
}  // namespace posenc
