// The Llama engine's cache: a prompt's prefill is bitwise the last row of a
// full forward, decoding one token a call matches one forward for every
// context-extension method, only the chosen rows' logits are made, and a
// rewind replays exactly.
#include <algorithm>
#include <string>

#include "decoder_model_test_util.h"
#include "posenc/context_extension.h"
#include "posenc/decoder_model.h"
#include "posenc/generation.h"

namespace posenc {
namespace {

using testing::ExpectError;
using testing::PrefillThenDecode;
using testing::QuantizedLlama;
using testing::RandomLlamaOptions;
using testing::RandomModel;
using testing::RandomTokens;
using testing::RelativeDifference;
using testing::TinyGemma3;

// Calls body(model) for the tiny models whose output products take every
// kernel: the Llama and the Gemma 3 (its own output matrix or the tied
// embedding), weights as float32 or kept quantized, either decode
// activations.
template <class Body>
void ForEachOutputKernel(const Body& body) {
  for (const char* architecture : {"llama", "gemma3"}) {
    for (const GgmlType type : {GgmlType::kF32, GgmlType::kQ4_1, GgmlType::kQ8_0, GgmlType::kQ4_K}) {
      for (const DotActivations activations : {DotActivations::kFloat32, DotActivations::kInt8}) {
        if (type == GgmlType::kF32 && activations == DotActivations::kInt8) continue;  // no integer product
        SCOPED_TRACE(std::string(architecture) + ", " + std::string(TraitsOf(type).name) +
                     (activations == DotActivations::kInt8 ? ", int8" : ", f32"));
        RandomLlamaOptions options = type == GgmlType::kF32 ? TinyGemma3() : QuantizedLlama(type);
        options.architecture = architecture;
        if (options.architecture == "gemma3") options.blocks = 7;  // local and global layers
        body(RandomModel(options, WeightStorage::kAsStored, activations));
      }
    }
  }
}

// A prompt's prefill (generation's Prefill: the last row's logits only, no
// other row's computed) gives bitwise the last row of a perplexity pass
// (every row's logits) for each output kernel. Before, one chosen row took
// the decode kernel (the weights dequantized in registers, or x rounded to
// int8), which differs.
TEST(DecoderModel, PromptPrefillLogitsAreBitwiseTheLastRowOfEveryRow) {
  ForEachOutputKernel([](const RandomModel& tiny) {
    for (const std::int64_t n : {2, 5, 40}) {
      const auto tokens = RandomTokens(n, 19);
      const AttentionOptions attention = tiny.model.DefaultAttention();
      const std::vector<float> every = tiny.model.Logits(tokens, attention);
      DecoderCache cache = tiny.model.NewCache();
      const std::vector<float> last = Prefill(tiny.model, cache, tokens, attention);
      const std::int64_t vocab = tiny.model.hparams().vocab_size;
      ASSERT_EQ(static_cast<std::int64_t>(last.size()), vocab);
      EXPECT_TRUE(std::equal(last.begin(), last.end(), every.end() - vocab)) << n << " tokens";
    }
  });
}

// A sliding perplexity window's losses (NextTokenNll from row `first`: no
// earlier row's logits computed, the rows in other blocks of the output
// product) are bitwise the tail of every row's, for each output kernel.
TEST(DecoderModel, ScoredRowsLossesAreBitwiseTheTailOfEveryRow) {
  ForEachOutputKernel([](const RandomModel& tiny) {
    const auto tokens = RandomTokens(150, 23);  // > 64 rows: several blocks of logits
    const AttentionOptions attention = tiny.model.DefaultAttention();
    const std::vector<double> every = tiny.model.NextTokenNll(tokens, attention);
    ASSERT_EQ(every.size(), 149U);
    for (const std::int64_t first : {0, 1, 70, 148}) {
      const std::vector<double> tail = tiny.model.NextTokenNll(tokens, first, attention);
      ASSERT_EQ(static_cast<std::int64_t>(tail.size()), 149 - first);
      EXPECT_TRUE(std::equal(tail.begin(), tail.end(), every.begin() + first)) << "from row " << first;
    }
  });
  const RandomModel tiny;
  const auto tokens = RandomTokens(10, 3);
  ExpectError([&] { tiny.model.NextTokenNll(tokens, -1, tiny.model.DefaultAttention()); },
              {"first = -1", "must be in [0, tokens - 1 = 9)"});
  ExpectError([&] { tiny.model.NextTokenNll(tokens, 9, tiny.model.DefaultAttention()); },
              {"first = 9", "must be in [0, tokens - 1 = 9)"});
}

// Prefill then one token at a time through the cache gives the logits of
// one full forward pass, for the model's RoPE and every method (planned for
// the final length, as a decoder must).
TEST(DecoderModel, DecodingWithTheCacheMatchesOneForwardForEveryMethod) {
  const RandomModel tiny;
  const std::int64_t n = 70, prefill = 61;
  const auto tokens = RandomTokens(n, 5);
  const DecoderHyperparams& hp = tiny.model.hparams();
  for (const char* method :
       {"none", "linear", "ntk", "dynamic-ntk", "yarn", "rerope", "leaky-rerope", "window:window=9",
        "lambda:sinks=2,window=9", "yarn,logn", "self-extend", "self-extend-kv", "self-extend-kv:group=3,window=9"}) {
    SCOPED_TRACE(method);
    const AttentionOptions attention = PlanModelExtension(ParseContextExtension(method), hp, n).attention;
    EXPECT_LT(RelativeDifference(tiny.model.Logits(tokens, attention),
                                 PrefillThenDecode(tiny.model, tokens, prefill, attention)),
              1e-5);
  }
}

// Only the listed rows' logits are made; a rewind replays exactly.
TEST(DecoderModel, ExtendScoresChosenRowsAndTruncateRewinds) {
  const RandomModel tiny;
  const auto tokens = RandomTokens(20, 6);
  const auto attention = tiny.model.DefaultAttention();
  const std::int64_t vocab = tiny.model.hparams().vocab_size;
  const std::vector<float> full = tiny.model.Logits(tokens, attention);
  DecoderCache cache = tiny.model.NewCache();
  const std::vector<std::int64_t> rows{3, 4, 11, 19};
  std::vector<std::int64_t> seen;
  const auto check = [&](std::int64_t offset) {
    return [&, offset](std::span<const std::int64_t> block, std::span<const float> logits) {
      ASSERT_EQ(logits.size(), block.size() * vocab);
      for (std::size_t r = 0; r < block.size(); ++r) {
        seen.push_back(offset + block[r]);
        for (std::int64_t v = 0; v < vocab; ++v) {
          EXPECT_NEAR(logits[r * vocab + v], full[(offset + block[r]) * vocab + v], 1e-4);
        }
      }
    };
  };
  tiny.model.Extend(cache, tokens, attention, rows, check(0));
  EXPECT_EQ(seen, rows);
  cache.Truncate(10);
  seen.clear();
  const std::vector<std::int64_t> last{9};
  tiny.model.Extend(cache, std::span(tokens).subspan(10), attention, last, check(10));
  EXPECT_EQ(seen, std::vector<std::int64_t>{19});

  ExpectError([&] { cache.Truncate(21); }, {"cache.truncate = 21", "[0, cached tokens = 20]"});
  const std::vector<std::int64_t> unsorted{2, 1};
  ExpectError([&] { tiny.model.Extend(cache, tokens, attention, unsorted, check(0)); },
              {"logit_rows[1] = 1", "after the previous one"});
  const std::vector<std::int64_t> outside{20};
  ExpectError([&] { tiny.model.Extend(cache, tokens, attention, outside, check(0)); }, {"logit_rows[0] = 20"});
  // Options the kernel rejects leave the cache as it was.
  AttentionOptions bad = attention;
  bad.mask.window = -1;
  ExpectError([&] { tiny.model.Extend(cache, tokens, bad, last, check(0)); }, {"mask.window = -1"});
  EXPECT_EQ(cache.tokens(), 20);
}

}  // namespace
}  // namespace posenc

namespace posenc {
namespace {

using testing::ExpectError;
using testing::RandomModel;
using testing::RandomTokens;

// The logits of one token a step through a cache keeping `cached_keys`, the
// method planned again at every step for the tokens so far (i + 1).
std::vector<float> StepEachPlanned(const DecoderModel& model, std::span<const std::int32_t> tokens,
                                   const std::string& method, CachedKeys cached_keys) {
  const std::int64_t vocab = model.hparams().vocab_size;
  std::vector<float> logits;
  DecoderCache cache = model.NewCache(cached_keys);
  const std::int64_t row = 0;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const auto length = static_cast<std::int64_t>(i) + 1;
    const AttentionOptions attention =
        PlanModelExtension(ParseContextExtension(method), model.hparams(), length).attention;
    model.Extend(cache, tokens.subspan(i, 1), attention, std::span(&row, 1),
                 [&](std::span<const std::int64_t>, std::span<const float> l) {
                   logits.insert(logits.end(), l.begin(), l.begin() + vocab);
                 });
  }
  return logits;
}

// Keys kept as written change nothing while a method lowers keys the same
// way at every step (plain RoPE; dynamic NTK up to the training length),
// bitwise; past it (dynamic NTK's base grows every step) the cached keys keep
// their older bases and the logits differ. Hugging Face is the outside
// oracle: tests/python/test_dynamic_ntk_cache.py.
TEST(DecoderCache, KeysKeptAsWrittenDifferOnlyWhereTheRotationChanges) {
  const RandomModel tiny;  // trained on 32 tokens
  const auto tokens = RandomTokens(48, 29);
  const std::int64_t vocab = tiny.model.hparams().vocab_size;
  EXPECT_EQ(StepEachPlanned(tiny.model, tokens, "none", CachedKeys::kAsWritten),
            StepEachPlanned(tiny.model, tokens, "none", CachedKeys::kRelowered));
  const auto written = StepEachPlanned(tiny.model, tokens, "dynamic-ntk", CachedKeys::kAsWritten);
  const auto relowered = StepEachPlanned(tiny.model, tokens, "dynamic-ntk", CachedKeys::kRelowered);
  EXPECT_TRUE(std::equal(written.begin(), written.begin() + 32 * vocab, relowered.begin()));
  double far = 0;
  for (std::size_t i = 33 * vocab; i < written.size(); ++i)
    far = std::max(far, double{std::abs(written[i] - relowered[i])});
  EXPECT_GT(far, 1e-3);
}

// What a cache keeping its keys as written refuses, before changing it:
// several tokens after keys rotated otherwise, and a position method's keys.
TEST(DecoderCache, KeysKeptAsWrittenRefuseWhatTheyCannotKeep) {
  const RandomModel tiny;
  const auto& hp = tiny.model.hparams();
  const auto tokens = RandomTokens(40, 31);
  const auto plan = [&](const char* method, std::int64_t length) {
    return PlanModelExtension(ParseContextExtension(method), hp, length).attention;
  };
  DecoderCache cache = tiny.model.NewCache(CachedKeys::kAsWritten);
  EXPECT_EQ(cache.cached_keys(), CachedKeys::kAsWritten);
  const auto ignore = [](std::span<const std::int64_t>, std::span<const float>) {};
  tiny.model.Extend(cache, std::span(tokens).first(36), plan("dynamic-ntk", 36), {}, ignore);
  ExpectError([&] { tiny.model.Extend(cache, std::span(tokens).subspan(36, 2), plan("dynamic-ntk", 38), {}, ignore); },
              {"tokens = 2: must be 1", "rotated otherwise than this call rotates"});
  ExpectError(
      [&] { tiny.model.Extend(cache, std::span(tokens).subspan(36, 1), plan("rerope:window=8", 37), {}, ignore); },
      {"cached_keys = as-written: keeps rotations only", "ReRoPE"});
  EXPECT_EQ(cache.tokens(), 36);
  tiny.model.Extend(cache, std::span(tokens).subspan(36, 1), plan("dynamic-ntk", 37), {}, ignore);
  tiny.model.Extend(cache, std::span(tokens).subspan(37, 1), plan("dynamic-ntk", 38), {}, ignore);
  EXPECT_EQ(cache.tokens(), 38);
}

}  // namespace
}  // namespace posenc
