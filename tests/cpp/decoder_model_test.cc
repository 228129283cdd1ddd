// The Llama engine on a tiny random-weight GGUF written by the test: the fast
// forward (packed matmul, SIMD attention, threads) against the float64
// reference forward, for the model's own RoPE and every context-extension
// method; thread-count invariance; loading errors. The same for a tiny
// Gemma 3 (local and global layers), Qwen2 (biases required) and Phi-3
// (fused projections, LongRoPE from its factor tensors).
#include "posenc/decoder_model.h"
#include "posenc/perplexity.h"

#include <algorithm>
#include <cmath>

#include "posenc/context_extension.h"
#include "posenc/generation.h"
#include "posenc/parallel.h"
#include "test_util.h"
#include "random_llama.h"

namespace posenc {
namespace {

using testing::ExpectError;
using testing::RandomLlamaGguf;
using testing::RandomLlamaOptions;

class ThreadCount {
 public:
  explicit ThreadCount(int n) : saved_(NumThreads()) { SetNumThreads(n); }
  ~ThreadCount() { SetNumThreads(saved_); }

 private:
  int saved_;
};

struct RandomModel {
  std::vector<unsigned char> bytes;
  GgufFile file;
  DecoderModel model;
  explicit RandomModel(const RandomLlamaOptions& options = {}, WeightStorage storage = WeightStorage::kAsStored,
                       DotActivations activations = DotActivations::kFloat32)
      : bytes(RandomLlamaGguf(options)), file(GgufFile::Parse(std::as_bytes(std::span(bytes)))),
        model(DecoderModel::FromGguf(file, storage, activations)) {}
};

std::vector<std::int32_t> RandomTokens(std::int64_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::int32_t> tokens(n);
  for (auto& t : tokens) t = static_cast<std::int32_t>(rng() % testing::kTinyVocab);
  return tokens;
}

// max |fast - reference| / max |reference|.
double RelativeError(const std::vector<float>& fast, const std::vector<double>& ref) {
  double max_diff = 0, max_ref = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(fast[i] - ref[i]));
    max_ref = std::max(max_ref, std::abs(ref[i]));
  }
  return max_diff / max_ref;
}

// A tiny Gemma 3: seven layers (layer 5 global, the others local with a
// window of 8 keys: local layers before and after a global one, as in the
// 270M model's 18), one KV head as the 270M model.
RandomLlamaOptions TinyGemma3() {
  RandomLlamaOptions options;
  options.architecture = "gemma3";
  options.blocks = 7;
  options.kv_heads = 1;
  options.sliding_window = 8;
  return options;
}

// A tiny Phi-3-128k: fused projections and LongRoPE, its original length
// 16 of a context of 64.
RandomLlamaOptions TinyPhi3() {
  RandomLlamaOptions options;
  options.architecture = "phi3";
  options.context = 64;
  options.longrope_original = 16;
  return options;
}

// max |a - b| / max |a| of two runs' logits.
double RelativeDifference(const std::vector<float>& a, const std::vector<float>& b) {
  double max_diff = 0, max_abs = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    max_diff = std::max(max_diff, static_cast<double>(std::abs(a[i] - b[i])));
    max_abs = std::max(max_abs, static_cast<double>(std::abs(a[i])));
  }
  return max_diff / max_abs;  // NaN (a row never written) fails a comparison
}

// The logits of `tokens` from a prefill of `prefill` tokens, then one decode
// step a token.
std::vector<float> PrefillThenDecode(const DecoderModel& model, std::span<const std::int32_t> tokens,
                                     std::int64_t prefill, const AttentionOptions& attention) {
  const std::int64_t vocab = model.hparams().vocab_size, n = static_cast<std::int64_t>(tokens.size());
  std::vector<float> decoded(n * vocab, std::nanf(""));
  const auto keep = [&](std::int64_t offset) {
    return [&, offset](std::span<const std::int64_t> rows, std::span<const float> logits) {
      for (std::size_t r = 0; r < rows.size(); ++r) {
        std::copy_n(logits.begin() + r * vocab, vocab, decoded.begin() + (offset + rows[r]) * vocab);
      }
    };
  };
  DecoderCache cache = model.NewCache();
  std::vector<std::int64_t> all(prefill);
  for (std::int64_t r = 0; r < prefill; ++r) all[r] = r;
  model.Extend(cache, tokens.first(prefill), attention, all, keep(0));
  for (std::int64_t t = prefill; t < n; ++t) {
    const std::int64_t row0 = 0;
    model.Extend(cache, tokens.subspan(t, 1), attention, std::span(&row0, 1), keep(t));
  }
  return decoded;
}

TEST(DecoderModel, ReadsHyperparameters) {
  const RandomModel tiny;
  const DecoderHyperparams& hp = tiny.model.hparams();
  EXPECT_EQ(hp.architecture, "llama");
  EXPECT_EQ(hp.vocab_size, 256);
  EXPECT_EQ(hp.embedding_length, 32);
  EXPECT_EQ(hp.block_count, 2);
  EXPECT_EQ(hp.head_count, 4);
  EXPECT_EQ(hp.head_count_kv, 2);
  EXPECT_EQ(hp.head_dim, 8);
  EXPECT_EQ(hp.context_length, 32);
  EXPECT_TRUE(hp.tied_output);
  EXPECT_EQ(hp.rope.layout, RopeLayout::kInterleaved);  // llama.cpp's permuted Q/K
  EXPECT_DOUBLE_EQ(hp.rope.theta, 10000);
}

TEST(DecoderModel, MatchesFloat64ReferenceOnEveryTarget) {
  for (const bool tied : {true, false}) {
    RandomLlamaOptions options;
    options.tied = tied;
    const RandomModel tiny(options);
    const auto tokens = RandomTokens(37, 7);
    const std::vector<double> ref = reference::DecoderLogits(tiny.file, tokens, tiny.model.DefaultAttention());
    testing::ForEachTarget([&] {
      const std::vector<float> fast = tiny.model.Logits(tokens, tiny.model.DefaultAttention());
      ASSERT_EQ(fast.size(), ref.size());
      EXPECT_LT(RelativeError(fast, ref), 2e-5) << "tied " << tied;
    });
  }
}

// Biases on q, k and v (DecoderFeatures::qkv_bias: Qwen2's; llama.cpp's
// llama graph adds them where a file has them), read from the tensors: they
// move the logits as the float64 reference says, in one forward and through
// the cache, and zero biases change no bit.
TEST(DecoderModel, QkvBiasesMatchTheReference) {
  RandomLlamaOptions options;
  const RandomModel plain(options);
  options.qkv_bias = 0.0;
  const RandomModel zero(options);
  options.qkv_bias = 0.5;
  const RandomModel biased(options);
  EXPECT_FALSE(plain.model.hparams().qkv_bias);
  EXPECT_TRUE(biased.model.hparams().qkv_bias);
  const auto tokens = RandomTokens(70, 7);  // past the training length, as a method runs
  const DecoderHyperparams& hp = plain.model.hparams();
  for (const char* method : {"none", "yarn", "rerope"}) {
    SCOPED_TRACE(method);
    const AttentionOptions attention = PlanModelExtension(ParseContextExtension(method), hp, 70).attention;
    const std::vector<float> without = plain.model.Logits(tokens, attention);
    EXPECT_EQ(zero.model.Logits(tokens, attention), without);
    const std::vector<float> with = biased.model.Logits(tokens, attention);
    EXPECT_GT(RelativeDifference(with, without), 0.05);
    EXPECT_LT(RelativeError(with, reference::DecoderLogits(biased.file, tokens, attention)), 2e-5);
    EXPECT_LT(RelativeDifference(with, PrefillThenDecode(biased.model, tokens, 61, attention)), 1e-5);
  }
}

TEST(DecoderModel, EveryExtensionMethodMatchesReferencePastTrainingLength) {
  const RandomModel tiny;
  const auto tokens = RandomTokens(70, 3);  // beyond the training length 32
  const DecoderHyperparams& hp = tiny.model.hparams();
  for (const char* method : {"none", "linear", "ntk", "dynamic-ntk", "yarn", "rerope", "leaky-rerope",
                             "rerope:window=5", "window", "window:window=9", "lambda", "lambda:sinks=2,window=9",
                             "ntk:logn", "yarn,logn", "self-extend", "self-extend:group=3,window=7"}) {
    SCOPED_TRACE(method);
    const ExtensionPlan plan = PlanModelExtension(ParseContextExtension(method), hp, 70);
    const std::vector<double> ref = reference::DecoderLogits(tiny.file, tokens, plan.attention);
    EXPECT_LT(RelativeError(tiny.model.Logits(tokens, plan.attention), ref), 2e-5);
  }
}

TEST(DecoderModel, ExtensionMethodsChangeTheOutputOnlyWhereTheyShould) {
  const RandomModel tiny;
  const auto tokens = RandomTokens(70, 4);
  const DecoderHyperparams& hp = tiny.model.hparams();
  const auto logits = [&](const char* method) {
    return tiny.model.Logits(tokens, PlanContextExtension(ParseContextExtension(method), hp.rope, hp.context_length,
                                                          static_cast<std::int64_t>(tokens.size()))
                                         .attention);
  };
  const std::vector<float> none = logits("none");
  EXPECT_EQ(none, tiny.model.Logits(tokens, tiny.model.DefaultAttention()));
  // ReRoPE with window w and the sliding window of W keys agree with plain
  // RoPE on rows whose every distance is inside (first w / W tokens), and
  // only there (the next row moves by far more than rounding).
  const std::int64_t vocab = hp.vocab_size;
  const auto row_diff = [&](const std::vector<float>& other, std::int64_t row) {
    double diff = 0;
    for (std::int64_t j = row * vocab; j < (row + 1) * vocab; ++j)
      diff = std::max(diff, std::abs(double{none[j]} - other[j]));
    return diff;
  };
  const auto same_rows = [&](const std::vector<float>& other) {
    std::int64_t rows = 0;
    while (rows < 70 && row_diff(other, rows) < 1e-4) ++rows;
    if (rows < 70) {
      EXPECT_GT(row_diff(other, rows), 1e-3) << "row " << rows;
    }
    return rows;
  };
  EXPECT_EQ(same_rows(logits("rerope")), 17);  // window 16: distances 0..16 -> row 16 has distance 16 = window
  EXPECT_EQ(same_rows(logits("window:window=9")), 9);
  EXPECT_EQ(same_rows(logits("linear")), 1);  // row 0 sees only itself (distance 0)
}

// A model of each weight type: d, heads * head_dim and ffn in whole blocks.
RandomLlamaOptions QuantizedLlama(GgmlType type) {
  RandomLlamaOptions options;
  options.weights = type;
  options.tied = type != GgmlType::kQ8_0;  // one type with its own output matrix
  if (TraitsOf(type).block_elements == 256) {
    options.d = 256;
    options.head_dim = 64;
    options.ffn = 256;
  } else {
    options.ffn = 64;
  }
  return options;
}

// Weights kept as stored: a forward of many tokens runs the float32 kernel
// on the exactly dequantized weights, so it is bitwise the float32 model's;
// both are near the float64 reference; the stored model holds the file's
// bytes, not 4 a weight.
TEST(DecoderModel, StoredWeightsForwardIsBitwiseTheFloat32Model) {
  for (const GgmlType type :
       {GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
        GgmlType::kQ8_0, GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K}) {
    SCOPED_TRACE(std::string(TraitsOf(type).name));
    const RandomModel stored(QuantizedLlama(type));
    const RandomModel as_f32(QuantizedLlama(type), WeightStorage::kFloat32);
    const auto tokens = RandomTokens(37, 11);
    const std::vector<float> logits = stored.model.Logits(tokens, stored.model.DefaultAttention());
    EXPECT_EQ(logits, as_f32.model.Logits(tokens, as_f32.model.DefaultAttention()));
    const std::vector<double> ref = reference::DecoderLogits(stored.file, tokens, stored.model.DefaultAttention());
    // float32 sums over k = 256 for the K-quant models, 32 to 64 otherwise.
    EXPECT_LT(RelativeError(logits, ref), stored.model.hparams().embedding_length == 256 ? 1e-4 : 2e-5);
    const double block_bytes = static_cast<double>(TraitsOf(type).block_bytes) / TraitsOf(type).block_elements;
    EXPECT_LT(stored.model.WeightBytes(), as_f32.model.WeightBytes() * (block_bytes / 4 + 0.05));
  }
}

// max |decode - forward| / max |forward| over the logits of tokens
// [prefill, n): the first `prefill` tokens in one Extend, then one token a
// call, against one forward pass (Logits) of all n.
double DecodeVsForward(const DecoderModel& model, std::span<const std::int32_t> tokens, std::int64_t prefill) {
  const auto n = static_cast<std::int64_t>(tokens.size());
  const std::int64_t vocab = model.hparams().vocab_size;
  const AttentionOptions attention = model.DefaultAttention();
  const std::vector<float> full = model.Logits(tokens, attention);
  DecoderCache cache = model.NewCache();
  model.Extend(cache, tokens.first(prefill), attention, {},
               [](std::span<const std::int64_t>, std::span<const float>) {});
  double max_diff = 0, max_abs = 0;
  for (std::int64_t t = prefill; t < n; ++t) {
    const std::int64_t row0 = 0;
    model.Extend(cache, tokens.subspan(t, 1), attention, std::span(&row0, 1),
                 [&](std::span<const std::int64_t>, std::span<const float> logits) {
                   for (std::int64_t v = 0; v < vocab; ++v) {
                     max_diff = std::max(max_diff, std::abs(static_cast<double>(logits[v]) - full[t * vocab + v]));
                     max_abs = std::max(max_abs, std::abs(static_cast<double>(full[t * vocab + v])));
                   }
                 });
  }
  return max_diff / max_abs;
}

// A prompt's prefill (generation's Prefill: the last row's logits only, no
// other row's computed) gives bitwise the last row of a perplexity pass
// (every row's logits), for the Llama and the Gemma 3 (its own output matrix
// or the tied embedding), weights as float32 or kept quantized, either
// decode activations. Before, one chosen row took the decode kernel (the
// weights dequantized in registers, or x rounded to int8), which differs.
TEST(DecoderModel, PromptPrefillLogitsAreBitwiseTheLastRowOfEveryRow) {
  for (const char* architecture : {"llama", "gemma3"}) {
    for (const GgmlType type : {GgmlType::kF32, GgmlType::kQ4_1, GgmlType::kQ8_0, GgmlType::kQ4_K}) {
      for (const DotActivations activations : {DotActivations::kFloat32, DotActivations::kInt8}) {
        if (type == GgmlType::kF32 && activations == DotActivations::kInt8) continue;  // no integer product
        SCOPED_TRACE(std::string(architecture) + ", " + std::string(TraitsOf(type).name) +
                     (activations == DotActivations::kInt8 ? ", int8" : ", f32"));
        RandomLlamaOptions options = type == GgmlType::kF32 ? TinyGemma3() : QuantizedLlama(type);
        options.architecture = architecture;
        if (options.architecture == "gemma3") options.blocks = 7;  // local and global layers
        const RandomModel tiny(options, WeightStorage::kAsStored, activations);
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
      }
    }
  }
}

// Decode (one token a call: the kernels that read the stored blocks in
// registers) matches one forward pass.
TEST(DecoderModel, StoredWeightsDecodeMatchesOneForward) {
  for (const GgmlType type : {GgmlType::kQ4_1, GgmlType::kQ8_0, GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kBF16}) {
    SCOPED_TRACE(std::string(TraitsOf(type).name));
    const RandomModel tiny(QuantizedLlama(type));
    EXPECT_LT(DecodeVsForward(tiny.model, RandomTokens(40, 13), 33), 1e-5);
  }
}

// Int8 activations round x in every product with quantized weights, the
// prefill's and the decode's: one forward pass of int8 activations is near
// the float32 activations' but not equal to it (the rounding of x), and
// decode is near that pass (the same integer products summed in another
// order; not to float32 rounding, as a last-bit difference in x can move
// its int8 rounding); float32 weights have no integer product to use them
// (an error naming the parameter).
TEST(DecoderModel, Int8ActivationsInPrefillAndDecode) {
  for (const GgmlType type : {GgmlType::kQ4_1, GgmlType::kQ6_K}) {
    SCOPED_TRACE(std::string(TraitsOf(type).name));
    const RandomModel tiny(QuantizedLlama(type), WeightStorage::kAsStored, DotActivations::kInt8);
    const std::vector<std::int32_t> tokens = RandomTokens(24, 17);
    EXPECT_LT(DecodeVsForward(tiny.model, tokens, 20), 3e-2);
    const RandomModel float32(QuantizedLlama(type));
    const std::vector<float> int8_logits = tiny.model.Logits(tokens, tiny.model.DefaultAttention());
    const std::vector<float> float32_logits = float32.model.Logits(tokens, float32.model.DefaultAttention());
    double largest_diff = 0, largest = 0;
    for (std::size_t i = 0; i < int8_logits.size(); ++i) {
      largest_diff = std::max(largest_diff, std::abs(static_cast<double>(int8_logits[i]) - float32_logits[i]));
      largest = std::max(largest, std::abs(static_cast<double>(float32_logits[i])));
    }
    EXPECT_GT(largest_diff / largest, 1e-5);
    EXPECT_LT(largest_diff / largest, 3e-2);
  }
  const std::vector<unsigned char> bytes = RandomLlamaGguf(QuantizedLlama(GgmlType::kQ4_1));
  const GgufFile file = GgufFile::Parse(std::as_bytes(std::span(bytes)));
  ExpectError([&] { DecoderModel::FromGguf(file, WeightStorage::kFloat32, DotActivations::kInt8); },
              {"activations", "int8", "stored"});
}

TEST(DecoderModel, NextTokenNllIsTheLogSoftmaxOfTheLogits) {
  const RandomModel tiny;
  const auto tokens = RandomTokens(150, 9);  // > 64 rows: two logit blocks
  const auto attention = tiny.model.DefaultAttention();
  const std::vector<float> logits = tiny.model.Logits(tokens, attention);
  const std::vector<double> nll = tiny.model.NextTokenNll(tokens, attention);
  ASSERT_EQ(nll.size(), tokens.size() - 1);
  for (std::size_t i = 0; i + 1 < tokens.size(); ++i) {
    const float* row = logits.data() + i * 256;
    double sum = 0;
    for (int j = 0; j < 256; ++j) sum += std::exp(static_cast<double>(row[j]));
    EXPECT_NEAR(nll[i], std::log(sum) - row[tokens[i + 1]], 1e-5) << i;
  }
}

TEST(DecoderModel, BitwiseIdenticalForAnyThreadCount) {
  const RandomModel tiny;
  const auto tokens = RandomTokens(97, 11);
  const auto attention = tiny.model.DefaultAttention();
  std::vector<float> one;
  {
    ThreadCount threads(1);
    one = tiny.model.Logits(tokens, attention);
  }
  for (const int n : {2, 3}) {
    ThreadCount threads(n);
    EXPECT_EQ(tiny.model.Logits(tokens, attention), one) << n << " threads";
  }
}

TEST(DecoderModel, ForwardFlopsCountsEveryWeightOnceAndTheCausalPairs) {
  // Counted from the file, not from the hyperparameters: every matrix is one
  // multiply-add per element per token (token_embd is a lookup, but the
  // tied output multiplies by it once more); attention adds q.k and p.v,
  // 2 x head_dim multiply-adds per causal (query, key) pair, head and layer.
  for (const bool tied : {true, false}) {
    RandomLlamaOptions options;
    options.tied = tied;
    const RandomModel tiny(options);
    double matrix_elements = 0;
    for (const GgufTensorInfo& t : tiny.file.tensors()) {
      if (t.shape.size() == 2 && t.name != "token_embd.weight") matrix_elements += static_cast<double>(t.Elements());
    }
    if (tied) matrix_elements += static_cast<double>(tiny.file.Tensor("token_embd.weight").Elements());
    const double per_pair = 2.0 * 2 * options.heads * options.head_dim * options.blocks;
    for (const std::int64_t n : {1, 3, 50}) {
      const double pairs = n * (n + 1) / 2.0;
      EXPECT_DOUBLE_EQ(tiny.model.ForwardFlops(n), 2 * matrix_elements * static_cast<double>(n) + per_pair * pairs)
          << "tied " << tied << ", n " << n;
      // A prompt's prefill: the output matrix for the last row only.
      const double output_elements = static_cast<double>(testing::kTinyVocab * options.d);
      EXPECT_DOUBLE_EQ(tiny.model.ForwardFlops(n, 1),
                       tiny.model.ForwardFlops(n) - 2 * output_elements * static_cast<double>(n - 1))
          << "tied " << tied << ", n " << n;
    }
  }
}

TEST(DecoderModel, ForwardFlopsRejectsMoreLogitRowsThanTokens) {
  const RandomModel tiny;
  EXPECT_EQ(tiny.model.ForwardFlops(4, 0) + 2.0 * 4 * testing::kTinyVocab * 32, tiny.model.ForwardFlops(4));
  ExpectError([&] { tiny.model.ForwardFlops(4, 5); }, {"logit_rows = 5", "[0, tokens = 4]"});
}

TEST(DecoderModel, ForwardFlopsCountsOnlyTheWindowInGemmaLocalLayers) {
  // Gemma 3's local layers attend to the keys of their window: the count of
  // causal pairs per layer comes from the layer's own mask, enumerated.
  RandomLlamaOptions options;
  options.blocks = 7;                // local, 5 more, global (the 6th), local
  const RandomModel llama(options);  // every layer global
  options.architecture = "gemma3";
  const RandomModel gemma(options);
  const AttentionOptions attention = gemma.model.DefaultAttention();
  const double per_pair = 2.0 * 2 * options.heads * options.head_dim;
  for (const std::int64_t n : {1, 5, 8, 9, 50}) {
    double skipped = 0;  // pairs a local layer's mask hides
    for (std::int64_t l = 0; l < options.blocks; ++l) {
      const AttentionMask& mask = gemma.model.LayerAttention(attention, l).mask;
      for (std::int64_t p = 0; p < n; ++p) {
        for (std::int64_t j = 0; j <= p; ++j) skipped += mask.window > 0 && p - j >= mask.window ? 1 : 0;
      }
    }
    if (n > options.sliding_window) {
      EXPECT_GT(skipped, 0) << n;
    }
    // Gemma's matrices differ from the Llama's by its norms only (vectors).
    EXPECT_DOUBLE_EQ(gemma.model.ForwardFlops(n), llama.model.ForwardFlops(n) - per_pair * skipped) << "n " << n;
  }
}

// Prefill then one token at a time through the cache gives the logits of
// one full forward pass, for the model's RoPE and every method (planned for
// the final length, as a decoder must).
TEST(DecoderModel, DecodingWithTheCacheMatchesOneForwardForEveryMethod) {
  const RandomModel tiny;
  const std::int64_t n = 70, prefill = 61;
  const auto tokens = RandomTokens(n, 5);
  const DecoderHyperparams& hp = tiny.model.hparams();
  for (const char* method : {"none", "linear", "ntk", "dynamic-ntk", "yarn", "rerope", "leaky-rerope",
                             "window:window=9", "lambda:sinks=2,window=9", "yarn,logn", "self-extend"}) {
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

TEST(DecoderModel, RejectsBadTokens) {
  const RandomModel tiny;
  const auto attention = tiny.model.DefaultAttention();
  ExpectError([&] { tiny.model.Logits({}, attention); }, {"tokens.size()", ">= 1"});
  const std::vector<std::int32_t> big{1, 256};
  ExpectError([&] { tiny.model.Logits(big, attention); }, {"tokens[1] = 256", "vocab_size = 256"});
  const std::vector<std::int32_t> negative{-1};
  ExpectError([&] { tiny.model.Logits(negative, attention); }, {"tokens[0] = -1"});
}

// A context too long for this machine is an error that names the size,
// before anything is allocated (it was a bare std::bad_alloc after 5 GB).
TEST(DecoderModel, ContextsTooLongForMemoryAreRefusedUpFront) {
  const RandomModel tiny;
  EXPECT_NO_THROW(tiny.model.RequireActivationsFit(100000));
  ExpectError(
      [&] { tiny.model.RequireActivationsFit(std::int64_t{1} << 50); },
      {"[llama] tokens = 1125899906842624", "activations of one forward pass needs", "more than this machine's"});
  const std::vector<std::int32_t> tokens(64, 1);
  ExpectError([&] { EvaluatePerplexity(tiny.model, tokens, {.context = std::int64_t{1} << 50}); },
              {"tokens = 1125899906842624", "memory"});
}

// A GGUF with one change, for the loading errors.
void ExpectLoadError(const std::vector<unsigned char>& bytes, std::initializer_list<const char*> fragments) {
  ExpectError([&] { DecoderModel::FromGguf(GgufFile::Parse(std::as_bytes(std::span(bytes)))); }, fragments);
}

TEST(DecoderModel, RejectsOtherArchitecturesAndBrokenFiles) {
  RandomLlamaOptions gpt2;
  gpt2.architecture = "gpt2";
  ExpectLoadError(RandomLlamaGguf(gpt2), {"general.architecture", "\"gpt2\"", "llama family", "gemma3"});

  // The tensor data of the first tensor cut off: the GGUF reader's error.
  std::vector<unsigned char> truncated = RandomLlamaGguf();
  truncated.resize(truncated.size() - 100);
  ExpectError([&] { GgufFile::Parse(std::as_bytes(std::span(truncated))); }, {"gguf"});

  // A missing tensor: rename blk.1.ffn_up.weight.
  std::vector<unsigned char> renamed = RandomLlamaGguf();
  const std::string from = "blk.1.ffn_up.weight";
  auto it = std::search(renamed.begin(), renamed.end(), from.begin(), from.end());
  ASSERT_NE(it, renamed.end());
  *(it + 6) = 'X';  // blk.1.fXn_up.weight
  ExpectLoadError(renamed, {"blk.1.ffn_up.weight", "missing"});
}

TEST(DecoderModel, RejectsInconsistentHyperparameters) {
  RandomLlamaOptions odd;
  odd.kv_heads = 3;  // does not divide 4 heads
  ExpectLoadError(RandomLlamaGguf(odd), {"attention.head_count_kv = 3", "must divide"});
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
