// The Witten-Bell byte n-gram: probabilities of a four-byte corpus written
// out by hand from the formula (Chen & Goodman 1998, eq. 17; counts in the
// comments), distributions that sum to 1 after every context, seen or not,
// the back-off of unseen contexts, and errors that name the parameter.
#include <cmath>
#include <cstdint>
#include <random>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/byte_ngram.h"
#include "test_util.h"

namespace posenc {
namespace {

using testing::ExpectError;

std::vector<std::uint8_t> Bytes(std::string_view s) { return {s.begin(), s.end()}; }

// Corpus "abac". Counts by context:
//   empty:  a 2, b 1, c 1          (c = 4, T = 3)
//   "a":    b 1, c 1               (c = 2, T = 2)
//   "b":    a 1                    (c = 1, T = 1)
//   "ab":   a 1                    (c = 1, T = 1)
//   "ba":   c 1                    (c = 1, T = 1)
//   "c", "ac" and every other context: never seen.
// p(w | h) = (c(h w) + T(h) p(w | h')) / (c(h) + T(h)), ending in 1/256.
TEST(ByteNgram, WittenBellByHand) {
  const ByteNgram model(Bytes("abac"), 3);
  const auto p = [&](std::string_view context, char next, int order = 0) {
    return model.Probability(Bytes(context), static_cast<std::uint8_t>(next), order);
  };
  const double u = 1.0 / 256;
  const double a0 = (2 + 3 * u) / (4 + 3), b0 = (1 + 3 * u) / (4 + 3), c0 = (1 + 3 * u) / (4 + 3);
  const double z0 = (0 + 3 * u) / (4 + 3);
  constexpr double kTol = 1e-15;
  // Order 1: the unigram, whatever the context.
  EXPECT_NEAR(p("", 'a'), a0, kTol);
  EXPECT_NEAR(p("b", 'a', 1), a0, kTol);
  EXPECT_NEAR(p("", 'z'), z0, kTol);
  // Order 2.
  EXPECT_NEAR(p("a", 'b', 2), (1 + 2 * b0) / (2 + 2), kTol);
  EXPECT_NEAR(p("a", 'a', 2), (0 + 2 * a0) / (2 + 2), kTol);
  EXPECT_NEAR(p("b", 'a', 2), (1 + 1 * a0) / (1 + 1), kTol);
  EXPECT_NEAR(p("c", 'z', 2), z0, kTol);  // "c" never precedes a byte: the unigram
  // Order 3 (the model's own): the last two bytes of the context.
  EXPECT_NEAR(p("ba", 'c'), (1 + 1 * (1 + 2 * c0) / (2 + 2)) / (1 + 1), kTol);
  EXPECT_NEAR(p("xxba", 'c'), p("ba", 'c'), kTol);
  EXPECT_NEAR(p("ab", 'b'), (0 + 1 * ((0 + 1 * b0) / (1 + 1))) / (1 + 1), kTol);
  // Unseen "zb" backs off to "b", unseen "ac" to "c" and then the unigram.
  EXPECT_NEAR(p("zb", 'a'), (1 + 1 * a0) / (1 + 1), kTol);
  EXPECT_NEAR(p("ac", 'a'), a0, kTol);
  // Losses: -log p of each byte from `first` on, the context cut at the text's start.
  const std::vector<double> losses = model.Losses(Bytes("aba"), 0);
  ASSERT_EQ(losses.size(), 3u);
  EXPECT_NEAR(losses[0], -std::log(a0), 1e-14);
  EXPECT_NEAR(losses[1], -std::log((1 + 2 * b0) / (2 + 2)), 1e-14);
  EXPECT_NEAR(losses[2], -std::log((1 + 1 * ((1 + 1 * a0) / (1 + 1))) / (1 + 1)), 1e-14);
  EXPECT_EQ(model.Losses(Bytes("aba"), 3).size(), 0u);
  EXPECT_NEAR(model.Losses(Bytes("aba"), 2, 2)[0], -std::log((1 + 1 * a0) / (1 + 1)), 1e-14);
}

// Every context of a text-like corpus (all its contexts up to 4 bytes, and
// contexts it never had): the 256 probabilities sum to 1, each equal to
// Probability's.
TEST(ByteNgram, DistributionsSumToOne) {
  std::mt19937 rng(7);
  std::vector<std::uint8_t> corpus(20000);
  // Skewed bytes so that contexts repeat, with some seen rarely.
  std::geometric_distribution<int> skew(0.15);
  for (std::uint8_t& b : corpus) b = static_cast<std::uint8_t>('a' + std::min(skew(rng), 40));
  const ByteNgram model(corpus, 5);
  std::vector<std::vector<std::uint8_t>> contexts{{}, {0}, {255, 255, 255, 255}, {'a', 200}, {200, 'a'}};
  for (std::size_t i = 4; i < corpus.size(); i += 97) {
    for (std::size_t k = 1; k <= 4; ++k) contexts.emplace_back(corpus.begin() + i - k, corpus.begin() + i);
  }
  for (const auto& context : contexts) {
    for (const int order : {0, 1, 2, 3, 4, 5}) {
      const std::array<double, 256> p = model.Distribution(context, order);
      double sum = 0;
      for (int w = 0; w < 256; ++w) {
        EXPECT_GT(p[w], 0.0);
        EXPECT_NEAR(p[w], model.Probability(context, static_cast<std::uint8_t>(w), order), 1e-15);
        sum += p[w];
      }
      EXPECT_NEAR(sum, 1.0, 1e-12) << "context of " << context.size() << " bytes, order " << order;
    }
  }
  // A longer context changes nothing past order - 1 bytes.
  const std::vector<std::uint8_t> long_context(corpus.begin() + 100, corpus.begin() + 120);
  const std::vector<std::uint8_t> last4(corpus.begin() + 116, corpus.begin() + 120);
  EXPECT_EQ(model.Distribution(long_context), model.Distribution(last4));
}

// A corpus shorter than the order: the longer contexts are simply never seen.
TEST(ByteNgram, ShortCorpus) {
  const ByteNgram model(Bytes("a"), 4);
  EXPECT_NEAR(model.Probability(Bytes("aaa"), 'a'), (1 + 1.0 / 256) / 2, 1e-15);
}

TEST(ByteNgram, Errors) {
  ExpectError([] { ByteNgram(Bytes("abc"), 0); }, {"[ngram] order = 0: must be in [1, 8]"});
  ExpectError([] { ByteNgram(Bytes("abc"), 9); }, {"[ngram] order = 9: must be in [1, 8]"});
  ExpectError([] { ByteNgram(Bytes(""), 2); }, {"[ngram] corpus = 0 bytes: must not be empty"});
  const ByteNgram model(Bytes("abc"), 3);
  ExpectError([&] { model.Probability(Bytes("ab"), 'c', 4); }, {"[ngram] order = 4: must be in [0, 3]"});
  ExpectError([&] { model.Distribution(Bytes("ab"), -1); }, {"[ngram] order = -1: must be in [0, 3]"});
  ExpectError([&] { model.Losses(Bytes("ab"), 3); }, {"[ngram] first = 3: must be in [0, 2]"});
}

}  // namespace
}  // namespace posenc
