// The Llama engine on a tiny random-weight GGUF written by the test: the fast
// forward (packed matmul, SIMD attention, threads) against the float64
// reference forward, for the model's own RoPE and every context-extension
// method; thread-count invariance; the count of its FLOPs; input and loading
// errors. Weight types: decoder_weights_test.cc; the cache:
// decoder_cache_test.cc; Gemma 3, Qwen2, Phi-3: decoder_architectures_test.cc.
#include "posenc/decoder_model.h"

#include <algorithm>
#include <cmath>

#include "decoder_model_test_util.h"
#include "posenc/context_extension.h"
#include "posenc/parallel.h"
#include "posenc/perplexity.h"

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

class ThreadCount {
 public:
  explicit ThreadCount(int n) : saved_(NumThreads()) { SetNumThreads(n); }
  ~ThreadCount() { SetNumThreads(saved_); }

 private:
  int saved_;
};

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
  for (const char* method :
       {"none", "linear", "ntk", "dynamic-ntk", "yarn", "rerope", "leaky-rerope", "rerope:window=5", "window",
        "window:window=9", "lambda", "lambda:sinks=2,window=9", "ntk:logn", "yarn,logn", "self-extend",
        "self-extend:group=3,window=7", "self-extend-kv", "self-extend-kv:group=3,window=9"}) {
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

}  // namespace
}  // namespace posenc
