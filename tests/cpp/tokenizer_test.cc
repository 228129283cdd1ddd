// BpeTokenizer on tiny hand-made vocabularies given as GGUF metadata, both
// models: byte-level ("gpt2": merge order, the byte-level alphabet,
// pre-tokenizers) and SentencePiece ("llama": score order, byte fallback,
// unused tokens, the space prefix), special tokens, round trips and errors.
// tests/python/test_tokenizer_hf.py checks the real SmolLM2 vocabulary
// against Hugging Face, tests/python/test_tokenizer_spm.py Gemma 3's against
// Google's SentencePiece.
#include "posenc/tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <optional>
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
  m["tokenizer.ggml.model"] = std::string("bert");
  ExpectError([&] { BpeTokenizer::FromGguf(m); }, {"tokenizer.ggml.model = \"bert\"", "unknown tokenizer model"});
  m = v.Metadata();
  m["tokenizer.ggml.tokens"] = std::vector<std::string>{};
  ExpectError([&] { BpeTokenizer::FromGguf(m); }, {"tokenizer.ggml.tokens = 0 tokens", "must hold 1 to"});
  m = v.Metadata();
  m["tokenizer.ggml.token_type"] = std::vector<std::int64_t>(255, 1);
  ExpectError([&] { BpeTokenizer::FromGguf(m); },
              {"tokenizer.ggml.token_type = 255 entries", "one entry per token (256)"});
  m = v.Metadata();
  auto types = std::get<std::vector<std::int64_t>>(m["tokenizer.ggml.token_type"]);
  types[9] = 7;
  m["tokenizer.ggml.token_type"] = types;
  ExpectError([&] { BpeTokenizer::FromGguf(m); }, {"tokenizer.ggml.token_type[9] = 7", "6 byte"});
  m = v.Metadata();
  m["tokenizer.ggml.add_bos_token"] = true;
  ExpectError([&] { BpeTokenizer::FromGguf(m); }, {"add_bos_token = true", "needs tokenizer.ggml.bos_token_id"});
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

// A SentencePiece ("llama") vocabulary laid out like Gemma's: 0 <unk>
// (unknown), 1 <bos> and 2 <eos> (control), 3..258 the byte tokens <0x00> ..
// <0xFF>, then `pieces` from id 259 (kFirstPiece) in order.
constexpr std::int32_t kFirstPiece = 259;

struct Piece {
  std::string text;
  double score = 0;
  std::int64_t type = 1;
};

struct SpmVocab {
  std::vector<Piece> pieces;
  bool bytes = true;
  std::optional<bool> add_space_prefix = false;

  GgufMetadata Metadata() const {
    std::vector<std::string> tokens{"<unk>", "<bos>", "<eos>"};
    std::vector<double> scores(3, -1000.0);
    std::vector<std::int64_t> types{2, 3, 3};
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      tokens.push_back(bytes ? name : "unused byte " + std::to_string(b));
      scores.push_back(0);
      types.push_back(bytes ? 6 : 5);
    }
    for (const Piece& p : pieces) {
      tokens.push_back(p.text);
      scores.push_back(p.score);
      types.push_back(p.type);
    }
    GgufMetadata m;
    m["tokenizer.ggml.model"] = std::string("llama");
    m["tokenizer.ggml.tokens"] = tokens;
    m["tokenizer.ggml.scores"] = scores;
    m["tokenizer.ggml.token_type"] = types;
    m["tokenizer.ggml.unknown_token_id"] = std::int64_t{0};
    m["tokenizer.ggml.bos_token_id"] = std::int64_t{1};
    m["tokenizer.ggml.eos_token_id"] = std::int64_t{2};
    m["tokenizer.ggml.add_bos_token"] = true;
    if (add_space_prefix) m["tokenizer.ggml.add_space_prefix"] = *add_space_prefix;
    return m;
  }
  BpeTokenizer Make() const { return BpeTokenizer::FromGguf(Metadata()); }
};

std::int32_t Byte(unsigned char b) { return 3 + b; }

// Pieces a, b, c, ▁ (ids 259-262) and whatever follows.
SpmVocab Letters(std::vector<Piece> more) {
  SpmVocab v{.pieces = {{"a", -10}, {"b", -10}, {"c", -10}, {"▁", -10}}};
  v.pieces.insert(v.pieces.end(), more.begin(), more.end());
  return v;
}
constexpr std::int32_t kA = kFirstPiece, kB = kFirstPiece + 1, kC = kFirstPiece + 2, kSpace = kFirstPiece + 3;

TEST(SentencePieceTokenizer, ReadsTheModelAndTheBosRule) {
  auto t = Letters({}).Make();
  EXPECT_EQ(t.model(), TokenizerModel::kSentencePieceBpe);
  EXPECT_EQ(TokenizerModelName(t.model()), "llama");
  EXPECT_FALSE(t.pre_tokenizer().has_value());
  EXPECT_TRUE(t.add_bos());
  EXPECT_EQ(t.bos_id(), 1);
  EXPECT_TRUE(t.IsSpecial(1));
  EXPECT_FALSE(t.IsSpecial(0));  // <unk> is not matched in text
  EXPECT_EQ(Vocab{}.Make().model(), TokenizerModel::kByteLevelBpe);
  EXPECT_FALSE(Vocab{}.Make().add_bos());
}

TEST(SentencePieceTokenizer, HighestScoreMergesFirst) {
  // ab outscores bc: ab + c; the other way round: a + bc.
  EXPECT_THAT(Letters({{"ab", -1}, {"bc", -2}}).Make().Encode("abc"), ElementsAre(kFirstPiece + 4, kC));
  EXPECT_THAT(Letters({{"ab", -2}, {"bc", -1}}).Make().Encode("abc"), ElementsAre(kA, kFirstPiece + 5));
  // Merged symbols merge on: bc, then a + bc (its score need not be high).
  EXPECT_THAT(Letters({{"ab", -2}, {"bc", -1}, {"abc", -9}}).Make().Encode("abc"), ElementsAre(kFirstPiece + 6));
  // The score decides, not the id.
  EXPECT_THAT(Letters({{"bc", -5}, {"ab", -4}}).Make().Encode("abc"), ElementsAre(kFirstPiece + 5, kC));
}

TEST(SentencePieceTokenizer, LeftmostPairWinsTies) {
  auto t = Letters({{"aa", -1}}).Make();
  EXPECT_THAT(t.Encode("aaa"), ElementsAre(kFirstPiece + 4, kA));
  EXPECT_THAT(t.Encode("aaaaa"), ElementsAre(kFirstPiece + 4, kFirstPiece + 4, kA));
}

TEST(SentencePieceTokenizer, SpacesAreU2581AndCanBeMergedLikeAnyCharacter) {
  // No pre-tokenizer: "▁" merges with what follows it, and with what is
  // before it if the vocabulary has such a token.
  auto t = Letters({{"▁a", -1}, {"b▁", -2}}).Make();
  EXPECT_THAT(t.Encode("a a"), ElementsAre(kA, kFirstPiece + 4));
  EXPECT_THAT(t.Encode("b c"), ElementsAre(kFirstPiece + 5, kC));
  EXPECT_THAT(t.Encode("b a"), ElementsAre(kB, kFirstPiece + 4));
  EXPECT_EQ(t.token(kFirstPiece + 4), "▁a");
  const std::vector<std::int32_t> ids{kFirstPiece + 5, kFirstPiece + 4, kSpace};
  EXPECT_EQ(t.Decode(ids), "b  a ");
}

TEST(SentencePieceTokenizer, SpacePrefix) {
  SpmVocab v = Letters({{"▁a", -1}});
  EXPECT_THAT(v.Make().Encode("a"), ElementsAre(kA));
  v.add_space_prefix = true;
  EXPECT_THAT(v.Make().Encode("a"), ElementsAre(kFirstPiece + 4));
  EXPECT_THAT(v.Make().Encode(""), ElementsAre());
  // llama.cpp's default when the key is absent: a prefix.
  v.add_space_prefix.reset();
  EXPECT_THAT(v.Make().Encode("a a"), ElementsAre(kFirstPiece + 4, kFirstPiece + 4));
}

TEST(SentencePieceTokenizer, CharactersOutsideTheVocabularyBecomeBytes) {
  auto t = Letters({{"é", -1}}).Make();
  EXPECT_THAT(t.Encode("aé€"), ElementsAre(kA, kFirstPiece + 4, Byte(0xE2), Byte(0x82), Byte(0xAC)));
  EXPECT_THAT(t.Encode("\r"), ElementsAre(Byte('\r')));
  const std::vector<std::int32_t> ids{Byte(0xE2), Byte(0x82), Byte(0xAC), Byte(' ')};
  EXPECT_EQ(t.Decode(ids), "€ ");
  EXPECT_EQ(t.token(Byte(0xE2)), "<0xE2>");
  // Without byte tokens: the unknown token, once per character.
  SpmVocab v = Letters({});
  v.bytes = false;
  EXPECT_THAT(v.Make().Encode("a€€"), ElementsAre(kA, 0, 0));
}

TEST(SentencePieceTokenizer, UnusedTokensAreSplitBack) {
  // ab is unused (type 5): merged, so that abc can form, then split back.
  auto t = Letters({{"ab", -1, 5}, {"abc", -2}}).Make();
  EXPECT_THAT(t.Encode("abc"), ElementsAre(kFirstPiece + 5));
  EXPECT_THAT(t.Encode("abb"), ElementsAre(kA, kB, kB));
}

TEST(SentencePieceTokenizer, SpecialTokensAreMatchedWhole) {
  // Gemma's kinds: control turn markers, user-defined newline and space runs.
  auto t = Letters({{"<start_of_turn>", 0, 3}, {"\n", 0, 4}, {"  ", 0, 4}, {"   ", 0, 4}, {"▁a", -1}}).Make();
  const std::int32_t start = kFirstPiece + 4, newline = kFirstPiece + 5, two = kFirstPiece + 6, three = kFirstPiece + 7;
  EXPECT_THAT(t.Encode("<start_of_turn>a\na a"), ElementsAre(start, kA, newline, kA, kFirstPiece + 8));
  // Longest first; a space run is matched as "▁" characters in the text.
  EXPECT_THAT(t.Encode("a     a"), ElementsAre(kA, three, two, kA));
  EXPECT_THAT(t.Encode("a▁▁a"), ElementsAre(kA, two, kA));
  EXPECT_THAT(t.Encode("<start_of_turn"),
              ElementsAre(Byte('<'), Byte('s'), Byte('t'), kA, Byte('r'), Byte('t'), Byte('_'), Byte('o'), Byte('f'),
                          Byte('_'), Byte('t'), Byte('u'), Byte('r'), Byte('n')));
  const std::vector<std::int32_t> ids{start, kA, two, newline};
  EXPECT_EQ(t.Decode(ids), "<start_of_turn>a  \n");
}

TEST(SentencePieceTokenizer, DecodeOfEncodeIsTheText) {
  auto t = Letters({{"ab", -1}, {"▁a", -2}, {"é", -3}, {"\n", 0, 4}, {"<x>", 0, 3}}).Make();
  std::mt19937 rng(11);
  const std::vector<std::string> alphabet{"a", "b", "c", " ", "\n", "é", "€", "😀", "<x>", "<", "\t", "中"};
  for (int trial = 0; trial < 300; ++trial) {
    std::string text;
    const int n = static_cast<int>(rng() % 30);
    for (int i = 0; i < n; ++i) text += alphabet[rng() % alphabet.size()];
    ASSERT_EQ(t.Decode(t.Encode(text)), text) << "trial " << trial;
  }
}

TEST(SentencePieceTokenizer, LongTextsMergeInLogLinearTime) {
  // 1 MB without a special token is one sequence: a quadratic merge loop
  // would take minutes here.
  auto t = Letters({{"aa", -1}, {"aaaa", -2}, {"aaaaaaaa", -3}, {"▁a", -4}}).Make();
  std::string text(1 << 20, 'a');
  for (std::size_t i = 100; i < text.size(); i += 101) text[i] = ' ';
  const std::vector<std::int32_t> ids = t.Encode(text);
  EXPECT_EQ(t.Decode(ids), text);
  EXPECT_LT(ids.size(), text.size() / 4);
}

TEST(SentencePieceTokenizer, Errors) {
  SpmVocab v = Letters({});
  auto m = v.Metadata();
  m.erase("tokenizer.ggml.scores");
  ExpectError([&] { BpeTokenizer::FromGguf(m); }, {"[tokenizer] tokenizer.ggml.scores = missing"});
  m = v.Metadata();
  m["tokenizer.ggml.scores"] = std::vector<double>(5, 0.0);
  ExpectError([&] { BpeTokenizer::FromGguf(m); },
              {"tokenizer.ggml.scores = 5 entries", "must have one entry per token (263)"});
  m = v.Metadata();
  auto scores = std::get<std::vector<double>>(m["tokenizer.ggml.scores"]);
  scores[260] = std::nan("");
  m["tokenizer.ggml.scores"] = scores;
  ExpectError([&] { BpeTokenizer::FromGguf(m); }, {"tokenizer.ggml.scores[260] = nan", "must be finite"});
  m = v.Metadata();
  m["tokenizer.ggml.token_type"] = std::vector<std::int64_t>(7, 1);
  ExpectError([&] { BpeTokenizer::FromGguf(m); }, {"tokenizer.ggml.token_type = 7 entries"});
  m = v.Metadata();
  auto types = std::get<std::vector<std::int64_t>>(m["tokenizer.ggml.token_type"]);
  types[kA] = 6;
  m["tokenizer.ggml.token_type"] = types;
  ExpectError([&] { BpeTokenizer::FromGguf(m); },
              {"tokenizer.ggml.token_type[259] = 6", "a byte token must be named <0xXX>", "not \"a\""});
  m = v.Metadata();
  types = std::get<std::vector<std::int64_t>>(m["tokenizer.ggml.token_type"]);
  types[kA] = 0;
  m["tokenizer.ggml.token_type"] = types;
  ExpectError([&] { BpeTokenizer::FromGguf(m); }, {"tokenizer.ggml.token_type[259] = 0", "1 normal"});
  v.bytes = false;
  m = v.Metadata();
  m.erase("tokenizer.ggml.unknown_token_id");
  ExpectError([&] { BpeTokenizer::FromGguf(m); },
              {"tokenizer.ggml.unknown_token_id = missing", "without all 256 byte tokens"});
  ExpectError([&] { Letters({}).Make().Encode("a\xC3"); }, {"[tokenizer] text = byte 1 of 2", "not valid UTF-8"});
  ExpectError([&] { Letters({}).Make().Encode("\xED\xA0\x80"); }, {"text = byte 0 of 3"});  // a surrogate
  ExpectError([&] { Letters({}).Make().Encode("\xC0\xAF"); }, {"text = byte 0 of 2"});      // overlong
}

}  // namespace
}  // namespace posenc
