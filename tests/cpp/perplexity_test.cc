// Windowed perplexity on the tiny model: which tokens each window scores,
// the value against NextTokenNll of each window, progress, errors.
#include "posenc/perplexity.h"

#include <cmath>
#include <numeric>

#include "test_util.h"
#include "random_llama.h"

namespace posenc {
namespace {

using testing::ExpectError;

struct Fixture {
  std::vector<unsigned char> bytes = testing::RandomLlamaGguf();
  DecoderModel model = DecoderModel::FromGguf(GgufFile::Parse(std::as_bytes(std::span(bytes))));
  std::vector<std::int32_t> tokens;
  Fixture() {
    std::mt19937 rng(5);
    for (int i = 0; i < 100; ++i) tokens.push_back(static_cast<std::int32_t>(rng() % 256));
  }
  std::vector<double> Nll(std::int64_t begin, std::int64_t length, const char* method = "none") const {
    const auto& hp = model.hparams();
    const auto plan = PlanModelExtension(ParseContextExtension(method), hp, length);
    return model.NextTokenNll(std::span(tokens).subspan(begin, length), plan.attention);
  }
};

TEST(Perplexity, NonOverlappingWindowsScoreAllButTheirFirstToken) {
  const Fixture f;
  PerplexityOptions options;
  options.context = 30;  // 100 tokens: 3 whole windows, the last 10 tokens unused
  const PerplexityResult r = EvaluatePerplexity(f.model, f.tokens, options);
  EXPECT_EQ(r.windows, 3);
  EXPECT_EQ(r.scored, 3 * 29);
  EXPECT_EQ(r.processed, 90);
  double sum = 0;
  for (int w = 0; w < 3; ++w) {
    const auto nll = f.Nll(30 * w, 30);
    sum = std::accumulate(nll.begin(), nll.end(), sum);
  }
  EXPECT_NEAR(r.mean_nll, sum / 87, 1e-12);
  EXPECT_NEAR(r.ppl, std::exp(sum / 87), 1e-9 * r.ppl);
  EXPECT_EQ(FormatContextExtension(r.method), "none");
  EXPECT_GT(r.tokens_per_s, 0);
}

TEST(Perplexity, SlidingWindowsScoreEachTokenOnce) {
  const Fixture f;
  PerplexityOptions options;
  options.context = 40;
  options.stride = 15;  // windows at 0, 15, 30, 45, 60
  const PerplexityResult r = EvaluatePerplexity(f.model, f.tokens, options);
  EXPECT_EQ(r.windows, 5);
  EXPECT_EQ(r.scored, 39 + 4 * 15);  // tokens 1..99, each once
  double sum = 0;
  for (int w = 0; w < 5; ++w) {
    const auto nll = f.Nll(15 * w, 40);
    sum = std::accumulate(nll.begin() + (w == 0 ? 0 : 40 - 15 - 1), nll.end(), sum);
  }
  EXPECT_NEAR(r.mean_nll, sum / r.scored, 1e-12);
}

// With BOS, each window is BOS and context - 1 text tokens, every one of
// them scored (the first from BOS alone): non-overlapping windows step by
// context - 1, sliding ones score their last `stride` text tokens.
TEST(Perplexity, BosStartsEveryWindowAndItsPredictionIsScored) {
  const Fixture f;
  const std::int32_t bos = 7;
  const auto& hp = f.model.hparams();
  const auto nll_with_bos = [&](std::int64_t begin, std::int64_t length) {
    std::vector<std::int32_t> window{bos};
    window.insert(window.end(), f.tokens.begin() + begin, f.tokens.begin() + begin + length - 1);
    const auto plan = PlanModelExtension(ParseContextExtension("none"), hp, length);
    return f.model.NextTokenNll(window, plan.attention);
  };
  PerplexityOptions options;
  options.context = 30;  // 29 text tokens a window: 3 windows of the 100 tokens
  options.bos = bos;
  const PerplexityResult r = EvaluatePerplexity(f.model, f.tokens, options);
  EXPECT_EQ(r.windows, 3);
  EXPECT_EQ(r.scored, 3 * 29);
  double sum = 0;
  for (int w = 0; w < 3; ++w) {
    const auto nll = nll_with_bos(29 * w, 30);
    sum = std::accumulate(nll.begin(), nll.end(), sum);
  }
  EXPECT_NEAR(r.mean_nll, sum / 87, 1e-12);
  EXPECT_NE(r.mean_nll, EvaluatePerplexity(f.model, f.tokens, {.context = 30}).mean_nll);

  options.context = 40;
  options.stride = 15;  // text windows of 39 at 0, 15, 30, 45, 60
  const PerplexityResult sliding = EvaluatePerplexity(f.model, f.tokens, options);
  EXPECT_EQ(sliding.windows, 5);
  EXPECT_EQ(sliding.scored, 39 + 4 * 15);  // tokens 0..98, each once
  sum = 0;
  for (int w = 0; w < 5; ++w) {
    const auto nll = nll_with_bos(15 * w, 40);
    sum = std::accumulate(nll.begin() + (w == 0 ? 0 : 40 - 15 - 1), nll.end(), sum);
  }
  EXPECT_NEAR(sliding.mean_nll, sum / sliding.scored, 1e-12);
  options.stride = 40;
  ExpectError([&] { EvaluatePerplexity(f.model, f.tokens, options); },
              {"stride = 40", "[1, context - 1 = 39]", "after BOS"});
}

// The decode pass scores the same tokens as the forward pass, token by
// token through the cache: the same losses to float32 rounding, per
// position too, under a method planned past the training length.
TEST(Perplexity, DecodePassMatchesTheForwardPass) {
  const Fixture f;
  PerplexityOptions options;
  options.context = 45;  // past the tiny model's training length of 32
  options.stride = 20;
  options.extension = ParseContextExtension("rerope:window=8");
  const PerplexityResult prefill = EvaluatePerplexity(f.model, f.tokens, options);
  options.pass = PerplexityPass::kDecode;
  const PerplexityResult decode = EvaluatePerplexity(f.model, f.tokens, options);
  EXPECT_EQ(decode.scored, prefill.scored);
  EXPECT_NEAR(decode.mean_nll, prefill.mean_nll, 1e-5 * prefill.mean_nll);
  ASSERT_EQ(decode.position_nll.size(), prefill.position_nll.size());
  for (std::size_t i = 0; i < decode.position_nll.size(); ++i) {
    EXPECT_NEAR(decode.position_nll[i], prefill.position_nll[i], 1e-5 * prefill.position_nll[i]) << i;
  }
}

// Keys kept as written (each step's method planned for the tokens so far):
// the decode pass of a method that lowers keys the same way at every step is
// unchanged; dynamic NTK past the training length is not. Without the decode
// pass it is an error. Hugging Face is the outside oracle
// (tests/python/test_dynamic_ntk_cache.py).
TEST(Perplexity, KeysKeptAsWrittenNeedTheDecodePassAndChangeOnlyWhatIsReplanned) {
  const Fixture f;
  PerplexityOptions options;
  options.context = 45;  // past the tiny model's training length of 32
  options.max_windows = 1;
  options.pass = PerplexityPass::kDecode;
  const PerplexityResult plain = EvaluatePerplexity(f.model, f.tokens, options);
  options.cached_keys = CachedKeys::kAsWritten;
  EXPECT_EQ(EvaluatePerplexity(f.model, f.tokens, options).position_nll, plain.position_nll);
  options.extension = ParseContextExtension("dynamic-ntk");
  const PerplexityResult written = EvaluatePerplexity(f.model, f.tokens, options);
  options.cached_keys = CachedKeys::kRelowered;
  const PerplexityResult one_base = EvaluatePerplexity(f.model, f.tokens, options);
  for (int i = 0; i < 32; ++i) EXPECT_NEAR(written.position_nll[i], plain.position_nll[i], 1e-9) << i;
  double far = 0;
  for (int i = 32; i < 44; ++i) far = std::max(far, std::abs(written.position_nll[i] - one_base.position_nll[i]));
  EXPECT_GT(far, 1e-4);
  options.cached_keys = CachedKeys::kAsWritten;
  options.pass = PerplexityPass::kPrefill;
  ExpectError([&] { EvaluatePerplexity(f.model, f.tokens, options); },
              {"cached_keys = as-written: needs the decode pass"});
}

TEST(Perplexity, MethodIsPlannedForTheWindowLength) {
  const Fixture f;
  PerplexityOptions options;
  options.context = 64;  // twice the tiny model's training length 32
  options.extension = ParseContextExtension("linear");
  options.max_windows = 1;
  const PerplexityResult r = EvaluatePerplexity(f.model, f.tokens, options);
  EXPECT_EQ(FormatContextExtension(r.method), "linear:factor=2");
  const auto nll = f.Nll(0, 64, "linear");
  EXPECT_NEAR(r.mean_nll, std::accumulate(nll.begin(), nll.end(), 0.0) / 63, 1e-12);
}

TEST(Perplexity, ReportsProgressUpToTheTotal) {
  const Fixture f;
  PerplexityOptions options;
  options.context = 50;
  std::vector<std::int64_t> done;
  EvaluatePerplexity(f.model, f.tokens, options, [&](std::int64_t d, std::int64_t total) {
    EXPECT_EQ(total, 100);
    done.push_back(d);
  });
  ASSERT_EQ(done.size(), 4u);  // 2 windows x 2 layers
  EXPECT_TRUE(std::is_sorted(done.begin(), done.end()));
  EXPECT_EQ(done.back(), 100);
}

// Each position's loss is the mean over the windows that scored it: every
// window past the first scores (and computes the logits of) only its last
// `stride` tokens.
TEST(Perplexity, PositionLossIsTheMeanOverTheWindowsThatScoredEachPosition) {
  const Fixture f;
  PerplexityOptions options;
  options.context = 30;
  options.stride = 20;  // windows at 0, 20, 40, 60; after the first, positions 9.. scored
  const PerplexityResult r = EvaluatePerplexity(f.model, f.tokens, options);
  ASSERT_EQ(r.windows, 4);
  ASSERT_EQ(r.position_nll.size(), 29u);
  std::vector<double> sum(29, 0.0);
  std::vector<int> count(29, 0);
  for (int w = 0; w < 4; ++w) {
    const auto nll = f.Nll(20 * w, 30);
    for (int i = w == 0 ? 0 : 9; i < 29; ++i) {
      sum[i] += nll[i];
      ++count[i];
    }
  }
  for (int i = 0; i < 29; ++i) {
    EXPECT_EQ(count[i], i < 9 ? 1 : 4);
    EXPECT_NEAR(r.position_nll[i], sum[i] / count[i], 1e-12) << i;
  }
  options.stride = 0;  // non-overlapping windows at 0, 30, 60: every position of each
  const PerplexityResult whole = EvaluatePerplexity(f.model, f.tokens, options);
  for (int i = 0; i < 29; ++i) {
    double expected = 0;
    for (int w = 0; w < 3; ++w) expected += f.Nll(30 * w, 30)[i] / 3;
    EXPECT_NEAR(whole.position_nll[i], expected, 1e-12) << i;
  }
}

TEST(Perplexity, NonFiniteLossIsAnErrorNotAPerplexity) {
  testing::RandomLlamaOptions broken;
  broken.nan_in_output_norm = true;
  const auto bytes = testing::RandomLlamaGguf(broken);
  const DecoderModel model = DecoderModel::FromGguf(GgufFile::Parse(std::as_bytes(std::span(bytes))));
  const Fixture f;
  PerplexityOptions options;
  options.context = 20;
  ExpectError([&] { EvaluatePerplexity(model, f.tokens, options); },
              {"[llama] logits[position 0, token 0] = nan: must be finite", "(window 0, from token 0 of the text)"});
}

DecoderModel CorruptModel(const std::string& tensor, float factor) {
  testing::RandomLlamaOptions corrupt;
  corrupt.scaled[tensor] = factor;
  const auto bytes = testing::RandomLlamaGguf(corrupt);
  return DecoderModel::FromGguf(GgufFile::Parse(std::as_bytes(std::span(bytes))));
}

// A corrupt model is an error naming where it shows, never a perplexity. An
// embedding 1e20 times too large gives finite logits near 1e21, where
// max + log sum exp(x - max) is max: the loss of a token the model ranks
// first was exactly 0 and of any other astronomic, "ppl inf" with nothing
// said (and Gemma 3 so corrupted scored a perfect perplexity of 1).
TEST(Perplexity, CorruptModelsAreErrorsNotPerplexities) {
  const Fixture f;
  PerplexityOptions options;
  options.context = 20;
  options.stride = 10;
  ExpectError([&] { EvaluatePerplexity(CorruptModel("token_embd.weight", 1e20F), f.tokens, options); },
              {"[llama] logits[position 0, token ", "must be finite and of magnitude < 65536",
               "(window 0, from token 0 of the text)"});
  // A NaN weight inside a layer: named by the first hidden state it reaches.
  ExpectError([&] { EvaluatePerplexity(CorruptModel("blk.1.ffn_down.weight", NAN), f.tokens, options); },
              {"[llama] hidden state after layer 1[position 0, element 0] = nan: must be finite: layer 1's weights"});
  ExpectError([&] { EvaluatePerplexity(CorruptModel("token_embd.weight", INFINITY), f.tokens, options); },
              {"[llama] input embedding[position 0, element 0] = ", "token_embd holds NaN or infinity"});
  // Logits within range but 500 times too spread: a mean loss past 709
  // nats, whose exp overflows. "ppl inf" is an error too.
  ExpectError([&] { EvaluatePerplexity(CorruptModel("token_embd.weight", 500), f.tokens, options); },
              {"[perplexity] ppl = inf: must be finite: the mean loss, ", "nats a token"});
  // The decode pass runs the same checks, a step at a time.
  options.pass = PerplexityPass::kDecode;
  ExpectError([&] { EvaluatePerplexity(CorruptModel("token_embd.weight", 1e20F), f.tokens, options); },
              {"[llama] logits[position 0, token ", "(window 0, from token 0 of the text)"});
}

TEST(Perplexity, RejectsBadOptions) {
  const Fixture f;
  PerplexityOptions options;
  options.context = 1;
  ExpectError([&] { EvaluatePerplexity(f.model, f.tokens, options); }, {"context = 1", ">= 2"});
  options.context = 10;
  options.stride = 11;
  ExpectError([&] { EvaluatePerplexity(f.model, f.tokens, options); }, {"stride = 11", "[1, context = 10]"});
  options.stride = 0;
  options.context = 101;
  ExpectError([&] { EvaluatePerplexity(f.model, f.tokens, options); }, {"tokens = 100", "context = 101"});
  options.context = 10;
  options.max_windows = -1;
  ExpectError([&] { EvaluatePerplexity(f.model, f.tokens, options); }, {"max_windows = -1"});
}

}  // namespace
}  // namespace posenc
