// The llama family beyond Llama on tiny random-weight GGUFs: Gemma 3 (local
// and global layers, its cache, the 27B query scale), Qwen2 (biases
// required), Phi-3 (fused projections, LongRoPE from its factor tensors) and
// the RoPE scalings a file carries as tensors.
#include <algorithm>
#include <cmath>
#include <string>
#include <variant>

#include "decoder_model_test_util.h"
#include "posenc/context_extension.h"
#include "posenc/decoder_model.h"

namespace posenc {
namespace {

using testing::ExpectError;
using testing::ExpectLoadError;
using testing::PrefillThenDecode;
using testing::RandomLlamaGguf;
using testing::RandomLlamaOptions;
using testing::RandomModel;
using testing::RandomTokens;
using testing::RelativeDifference;
using testing::RelativeError;
using testing::TinyGemma3;

// A tiny Phi-3-128k: fused projections and LongRoPE, its original length
// 16 of a context of 64.
RandomLlamaOptions TinyPhi3() {
  RandomLlamaOptions options;
  options.architecture = "phi3";
  options.context = 64;
  options.longrope_original = 16;
  return options;
}

TEST(DecoderModelGemma3, ReadsHyperparametersAndLayerKinds) {
  const RandomModel tiny(TinyGemma3());
  const DecoderHyperparams& hp = tiny.model.hparams();
  EXPECT_EQ(hp.architecture, "gemma3");
  EXPECT_EQ(hp.rope.layout, RopeLayout::kHalfSplit);  // no Q/K permutation for Gemma
  EXPECT_EQ(hp.sliding_window, 8);
  EXPECT_EQ(hp.sliding_window_pattern, 6);
  for (std::int64_t l = 0; l < 7; ++l) EXPECT_EQ(hp.IsLocalLayer(l), l != 5) << l;

  // A method reaches the global layer only; local layers keep RoPE of base
  // 10,000 and their window.
  const AttentionOptions rerope = PlanModelExtension(ParseContextExtension("rerope"), hp, 70).attention;
  EXPECT_EQ(&tiny.model.LayerAttention(rerope, 5), &rerope);
  const AttentionOptions& local = tiny.model.LayerAttention(rerope, 0);
  ASSERT_TRUE(std::holds_alternative<RopeEncoding>(local.encoding));
  EXPECT_DOUBLE_EQ(std::get<RopeEncoding>(local.encoding).spec.theta, 10000);
  EXPECT_EQ(local.mask.window, 8);
  EXPECT_TRUE(local.mask.causal);

  // With every layer local (a pattern above the block count) a method would
  // change nothing: refused, naming the layers and why; the model's own
  // attention still plans.
  DecoderHyperparams all_local = hp;
  all_local.sliding_window_pattern = 8;
  ExpectError(
      [&] { PlanModelExtension(ParseContextExtension("yarn"), all_local, 70); },
      {"method = \"yarn\"", "all of its 7 layers are local", "sliding_window_pattern 8", "only the global layers"});
  ExpectError([&] { PlanModelExtension(ParseContextExtension("none:logn"), all_local, 70); }, {"all of its 7"});
  EXPECT_NO_THROW(PlanModelExtension(ParseContextExtension("none"), all_local, 70));
}

TEST(DecoderModelGemma3, MatchesFloat64ReferenceOnEveryTarget) {
  const RandomModel tiny(TinyGemma3());
  const DecoderHyperparams& hp = tiny.model.hparams();
  const auto tokens = RandomTokens(70, 7);  // past the window and the training length 32
  for (const char* method : {"none", "rerope", "yarn", "self-extend"}) {
    SCOPED_TRACE(method);
    const AttentionOptions attention = PlanModelExtension(ParseContextExtension(method), hp, 70).attention;
    const std::vector<double> ref = reference::DecoderLogits(tiny.file, tokens, attention);
    testing::ForEachTarget([&] { EXPECT_LT(RelativeError(tiny.model.Logits(tokens, attention), ref), 2e-5); });
  }
}

TEST(DecoderModelGemma3, DecodingWithTheCacheMatchesOneForward) {
  const RandomModel tiny(TinyGemma3());
  const DecoderHyperparams& hp = tiny.model.hparams();
  const auto tokens = RandomTokens(70, 5);
  // The local layers forget what their window has passed as the cache grows
  // (61 tokens, then one at a time): the decode steps read the rest.
  for (const char* method : {"none", "rerope", "leaky-rerope", "yarn", "self-extend"}) {
    SCOPED_TRACE(method);
    const AttentionOptions attention = PlanModelExtension(ParseContextExtension(method), hp, 70).attention;
    testing::ForEachTarget([&] {
      EXPECT_LT(RelativeDifference(tiny.model.Logits(tokens, attention),
                                   PrefillThenDecode(tiny.model, tokens, 61, attention)),
                1e-5);
    });
  }
}

// The cache of a model whose layers are all local (window 8) stops growing:
// after 2,000 tokens it holds a fraction of a Llama's of the same shapes; a
// rewind within the window's reach replays exactly, one past it is refused
// and changes nothing.
TEST(DecoderModelGemma3, LocalLayersKeepOnlyWhatTheirWindowSees) {
  RandomLlamaOptions options = TinyGemma3();
  options.blocks = 5;  // every layer local
  const RandomModel gemma(options);
  options.architecture = "llama";
  const RandomModel llama(options);
  const std::int64_t n = 2000, prefill = 1900;
  const auto tokens = RandomTokens(n, 9);
  const auto run = [&](const DecoderModel& model, DecoderCache& cache) {
    const AttentionOptions attention = model.DefaultAttention();
    model.Extend(cache, std::span(tokens).first(prefill), attention, {}, {});
    for (std::int64_t t = prefill; t < n; ++t) model.Extend(cache, std::span(tokens).subspan(t, 1), attention, {}, {});
  };
  DecoderCache bounded = gemma.model.NewCache(), full = llama.model.NewCache();
  run(gemma.model, bounded);
  run(llama.model, full);
  EXPECT_EQ(bounded.tokens(), n);
  EXPECT_LT(bounded.Bytes(), full.Bytes() / 4);

  // Kept from 2000 - 16 rounded down to 16 = 1984 on: a query at 1991 sees
  // 1984..1991; one at 1990 would need 1983.
  const std::vector<float> logits = gemma.model.Logits(tokens, gemma.model.DefaultAttention());
  ExpectError([&] { bounded.Truncate(1990); },
              {"cache.truncate = 1990", "must be >= 1991", "local layer 0 keeps the tokens from 1984 on"});
  EXPECT_EQ(bounded.tokens(), n);
  bounded.Truncate(1991);
  const std::int64_t vocab = gemma.model.hparams().vocab_size, last = 8;
  std::vector<float> replayed;
  gemma.model.Extend(
      bounded, std::span(tokens).subspan(1991), gemma.model.DefaultAttention(), std::span(&last, 1),
      [&](std::span<const std::int64_t>, std::span<const float> row) { replayed.assign(row.begin(), row.end()); });
  const std::vector<float> expected(logits.end() - vocab, logits.end());
  EXPECT_LT(RelativeDifference(expected, replayed), 1e-5);
}

// Gemma 3 27B's query scale: 1/sqrt(d / heads), not 1/sqrt(head_dim), told
// by its 62 blocks (llama.cpp's rule; Hugging Face's query_pre_attn_scalar
// 168 = 5376 / 32). A tiny 62-block model with d / heads = 8 against
// head_dim 16: the engine matches the float64 reference with the scale,
// and a 6-block model of the same shape keeps head_dim.
TEST(DecoderModelGemma3, TwentySevenBQueryScale) {
  RandomLlamaOptions options = TinyGemma3();
  options.head_dim = 16;
  options.blocks = 62;
  const RandomModel deep(options);
  const DecoderHyperparams& hp = deep.model.hparams();
  EXPECT_DOUBLE_EQ(hp.query_pre_attn_scalar, 8.0);
  EXPECT_DOUBLE_EQ(hp.QueryFactor(), std::sqrt(2.0));
  options.blocks = 6;
  EXPECT_EQ(RandomModel(options).model.hparams().query_pre_attn_scalar, 0.0);
  EXPECT_EQ(RandomModel(options).model.hparams().QueryFactor(), 1.0);

  const auto tokens = RandomTokens(20, 3);
  const AttentionOptions attention = deep.model.DefaultAttention();
  const std::vector<double> ref = reference::DecoderLogits(deep.file, tokens, attention);
  testing::ForEachTarget([&] { EXPECT_LT(RelativeError(deep.model.Logits(tokens, attention), ref), 2e-5); });
  EXPECT_LT(
      RelativeDifference(deep.model.Logits(tokens, attention), PrefillThenDecode(deep.model, tokens, 15, attention)),
      1e-5);
}

TEST(DecoderModelGemma3, RejectsAMissingGemmaTensor) {
  std::vector<unsigned char> renamed = RandomLlamaGguf(TinyGemma3());
  const std::string from = "blk.3.post_ffw_norm.weight";
  auto it = std::search(renamed.begin(), renamed.end(), from.begin(), from.end());
  ASSERT_NE(it, renamed.end());
  *(it + 6) = 'X';  // blk.3.pXst_ffw_norm.weight
  ExpectLoadError(renamed, {"blk.3.post_ffw_norm.weight", "missing"});
}

// Renames the first `from` in a file's bytes by changing its character at
// `at` to 'X': a tensor missing.
std::vector<unsigned char> Renamed(std::vector<unsigned char> bytes, const std::string& from, std::size_t at) {
  const auto it = std::search(bytes.begin(), bytes.end(), from.begin(), from.end());
  EXPECT_NE(it, bytes.end()) << from;
  if (it != bytes.end()) *(it + static_cast<std::ptrdiff_t>(at)) = 'X';
  return bytes;
}

// A Qwen2 layer has biases on q, k and v: a file without them is refused
// rather than run as another model; with them, its RoPE is half-split
// (llama.cpp's NEOX rope type for qwen2) and the engine is the reference.
TEST(DecoderModelQwen2, RequiresItsBiasesAndMatchesTheReference) {
  RandomLlamaOptions options;
  options.architecture = "qwen2";
  ExpectLoadError(RandomLlamaGguf(options), {"blk.0.attn_q.bias", "missing"});
  options.qkv_bias = 0.5;
  const RandomModel qwen2(options);
  const DecoderHyperparams& hp = qwen2.model.hparams();
  EXPECT_EQ(hp.architecture, "qwen2");
  EXPECT_TRUE(hp.qkv_bias);
  EXPECT_FALSE(hp.fused_qkv || hp.fused_gate_up);
  EXPECT_EQ(hp.rope.layout, RopeLayout::kHalfSplit);
  const auto tokens = RandomTokens(40, 7);
  const AttentionOptions attention = qwen2.model.DefaultAttention();
  EXPECT_LT(
      RelativeError(qwen2.model.Logits(tokens, attention), reference::DecoderLogits(qwen2.file, tokens, attention)),
      2e-5);
}

// Phi-3's fused attn_qkv and ffn_up [2 ffn] hold the rows of the separate
// tensors: with the same values (one seed) a phi3 file and a qwen2 file
// (zero biases; both half-split) are the same model, bit for bit, and the
// fused biases (attn_qkv.bias) are the separate ones too.
TEST(DecoderModelPhi3, FusedProjectionsAreTheSeparateTensors) {
  for (const double bias : {0.0, 0.5}) {
    RandomLlamaOptions options;
    options.qkv_bias = bias;
    options.architecture = "qwen2";
    const RandomModel separate(options);
    options.architecture = "phi3";
    if (bias == 0.0) options.qkv_bias.reset();
    const RandomModel fused(options);
    const DecoderHyperparams& hp = fused.model.hparams();
    EXPECT_TRUE(hp.fused_qkv && hp.fused_gate_up);
    EXPECT_EQ(hp.qkv_bias, bias != 0.0);
    EXPECT_EQ(hp.rope.layout, RopeLayout::kHalfSplit);
    const auto tokens = RandomTokens(40, 3);
    const AttentionOptions attention = fused.model.DefaultAttention();
    const std::vector<float> logits = fused.model.Logits(tokens, attention);
    EXPECT_EQ(logits, separate.model.Logits(tokens, attention)) << "bias " << bias;
    EXPECT_LT(RelativeError(logits, reference::DecoderLogits(fused.file, tokens, attention)), 2e-5);
  }
}

// LongRoPE as Phi-3-128k's GGUF carries it (factor tensors, original length
// 16 of 64, the attention factor): the short factors for a sequence within
// the original length, the long ones past it (as Hugging Face chooses), the
// engine the reference and its decode one forward on either side.
TEST(DecoderModelPhi3, LongRopeFromItsTensorsMatchesTheReference) {
  const RandomModel phi3(TinyPhi3());
  const DecoderHyperparams& hp = phi3.model.hparams();
  ASSERT_TRUE(std::holds_alternative<LongRopeScaling>(hp.rope.scaling));
  const auto& longrope = std::get<LongRopeScaling>(hp.rope.scaling);
  EXPECT_EQ(longrope.original_max_position, 16);
  EXPECT_DOUBLE_EQ(longrope.factor, 4.0);
  ASSERT_TRUE(longrope.attention_factor.has_value());
  EXPECT_NEAR(*longrope.attention_factor, std::sqrt(1 + std::log(4.0) / std::log(16.0)), 1e-7);
  EXPECT_EQ(longrope.long_factor.front(), 1.0);
  EXPECT_EQ(longrope.long_factor.back(), 8.0);
  for (const std::int64_t n : {16, 40}) {
    SCOPED_TRACE(n);
    const AttentionOptions attention = PlanModelExtension(ParseContextExtension("none"), hp, n).attention;
    const auto& frequencies = std::get<RopeEncoding>(attention.encoding).frequencies;
    const std::vector<double>& chosen = n > 16 ? longrope.long_factor : longrope.short_factor;
    const double plain = 1.0 / std::pow(hp.rope.theta, 2.0 / static_cast<double>(hp.head_dim));  // pair 1
    EXPECT_NEAR(frequencies.inv_freq[1], plain / chosen[1], 1e-12 * plain);
    const auto tokens = RandomTokens(n, 5);
    const std::vector<float> logits = phi3.model.Logits(tokens, attention);
    EXPECT_LT(RelativeError(logits, reference::DecoderLogits(phi3.file, tokens, attention)), 2e-5);
    EXPECT_LT(RelativeDifference(logits, PrefillThenDecode(phi3.model, tokens, n - 6, attention)), 1e-5);
  }
}

// The RoPE scalings GGUF files carry as tensors hold one scaling each: a
// LongRoPE factor set without the other, or factors with a scaling type in
// the metadata, are refused naming the tensor; Llama 3's rope_freqs run as
// the reference says.
TEST(DecoderModel, RopeFactorTensorsAreOneScaling) {
  ExpectLoadError(Renamed(RandomLlamaGguf(TinyPhi3()), "rope_factors_long.weight", 13),
                  {"rope_factors_long.weight", "missing", "both the short and the long"});
  RandomLlamaOptions options;
  options.rope_freqs = true;
  const RandomModel llama3(options);
  ASSERT_TRUE(std::holds_alternative<FrequencyFactorScaling>(llama3.model.hparams().rope.scaling));
  const auto tokens = RandomTokens(40, 5);
  const AttentionOptions attention = llama3.model.DefaultAttention();
  EXPECT_LT(
      RelativeError(llama3.model.Logits(tokens, attention), reference::DecoderLogits(llama3.file, tokens, attention)),
      2e-5);
  options.rope_scaling_type = "yarn";
  ExpectLoadError(RandomLlamaGguf(options), {"rope_freqs.weight", "llama.rope.scaling.type = yarn", "one scaling"});
  RandomLlamaOptions both = TinyPhi3();
  both.rope_freqs = true;
  ExpectLoadError(RandomLlamaGguf(both), {"rope_freqs.weight", "rope_factors_short/long"});
}

}  // namespace
}  // namespace posenc
