// Training of the tiny model: option errors, the batch offsets, the
// weight-decay rule, bitwise-identical training for 1, 2 and 3 threads and a
// loss that falls on a repetitive text. Evaluation: tiny_lm_eval_test.cc;
// checkpoints: tiny_lm_checkpoint_test.cc.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/parallel.h"
#include "posenc/tiny_lm_train.h"
#include "test_util.h"
#include "tiny_lm_train_test_util.h"

namespace posenc {
namespace {

using testing::Bytes;
using testing::ExpectError;
using testing::Noise;
using testing::SameBits;
using testing::SmallConfig;

std::vector<std::uint8_t> Repeated(std::string_view sentence, std::size_t bytes) {
  std::vector<std::uint8_t> text;
  while (text.size() < bytes) text.insert(text.end(), sentence.begin(), sentence.end());
  text.resize(bytes);
  return text;
}

// ------------------------------------------------------------------ options

TEST(TinyLmTrainOptions, StepsWarmupAndErrors) {
  TinyLmConfig config = SmallConfig(RopeScheme{});
  TinyLmTrainOptions options;
  options.tokens = 1000;
  options.batch = 4;
  EXPECT_EQ(options.Steps(config), 16);  // ceil(1000 / 64)
  options.tokens = 1024;
  EXPECT_EQ(options.Steps(config), 16);
  EXPECT_EQ(options.WarmupSteps(config), 1);  // round(0.05 * 16)
  EXPECT_NO_THROW(options.Validate(config));

  const auto with = [&](auto change) {
    TinyLmConfig c = config;
    TinyLmTrainOptions o = options;
    change(c, o);
    return [c, o] { o.Validate(c); };
  };
  using C = TinyLmConfig&;
  using O = TinyLmTrainOptions&;
  ExpectError(with([](C, O o) { o.tokens = 0; }), {"[train] tokens = 0: must be > 0"});
  ExpectError(with([](C, O o) { o.batch = 0; }), {"[train] batch = 0"});
  ExpectError(with([](C, O o) { o.batch = std::int64_t{1} << 21; }), {"[train] batch * train_length = 2097152 * 16"});
  ExpectError(with([](C, O o) { o.seed = -1; }), {"[train] seed = -1"});
  ExpectError(with([](C, O o) { o.lr = 0; }), {"[train] lr = 0"});
  ExpectError(with([](C, O o) { o.min_lr = 1; }), {"[train] min_lr = 1: must be in [0, lr = 0.002]"});
  ExpectError(with([](C, O o) { o.warmup = 1.5; }), {"[train] warmup = 1.5"});
  ExpectError(with([](C, O o) { o.weight_decay = -0.1; }), {"[train] weight_decay = -0.1"});
  ExpectError(with([](C, O o) { o.grad_clip = 0; }), {"[train] grad_clip = 0"});
  ExpectError(with([](C, O o) { o.beta2 = 1; }), {"[train] beta2 = 1"});
  ExpectError(with([](C, O o) { o.log_every = 0; }), {"[train] log_every = 0"});
  ExpectError(with([](C c, O) { c.train_length = 1; }), {"[tiny_lm] train_length = 1"});
  EXPECT_NO_THROW(with([](C, O o) { o.grad_clip = std::numeric_limits<double>::infinity(); })());
}

TEST(TinyLmTrainOptions, ParameterCountWithoutAllocating) {
  for (const PositionScheme& scheme : AllPositionSchemes()) {
    const TinyLmConfig config = SmallConfig(scheme);
    // Named: a temporary in the range expression would die before the loop (C++20).
    const TinyLmParams params = ZeroTinyLmParams(config);
    std::int64_t count = 0;
    for (const TinyLmTensor* t : TinyLmTensorList(config, params)) {
      count += static_cast<std::int64_t>(t->values.size());
    }
    EXPECT_EQ(TinyLmParameterCount(config), count) << PositionSchemeName(scheme);
  }
}

// Training that cannot fit this machine is refused by Validate, before any
// buffer exists, naming the largest part's parameter, the estimate and the
// machine's memory (TrainTinyLm used to allocate gigabytes and then throw a
// bare std::bad_alloc).
TEST(TinyLmTrainOptions, MemoryIsCheckedBeforeAnyAllocation) {
  TinyLmConfig big;  // 51.5 G parameters: about 960 GiB with gradients and moments
  big.d_model = 8192;
  big.layers = 64;
  big.ffn_hidden = 32768;
  big.heads = 16;
  TinyLmTrainOptions options;
  options.tokens = 100000;
  EXPECT_EQ(TinyLmParameterCount(big), 51542761472);
  EXPECT_DOUBLE_EQ(EstimateTinyLmTrainMemory(big, options).model, 5.0 * 4 * 51542761472);
  ExpectError([&] { options.Validate(big); },
              {"[train] parameters = 51542761472: training (the weights, their gradients and AdamW's moments 960.1 GiB",
               "more than this machine's"});

  TinyLmConfig config;  // the default model, 4096 sequences of 4096 bytes a step
  config.train_length = 4096;
  options.batch = 4096;
  ExpectError([&] { options.Validate(config); },
              {"[train] batch * train_length = 16777216: training", "one step's activations 688.8 GiB"});

  config.train_length = 2;  // 5e11 steps, each logged
  options.batch = 1;
  options.tokens = 1000000000000;
  options.log_every = 1;
  ExpectError([&] { options.Validate(config); },
              {"[train] log_every = 1: training", "the loss log of 500000000001 entries"});
  // Logged every 5e9 steps, nothing else grows with the steps.
  options.log_every = 5000000000;
  EXPECT_EQ(EstimateTinyLmTrainMemory(config, options).log, 101.0 * sizeof(TinyLmTrainLogEntry));
  EXPECT_NO_THROW(options.Validate(config));
}

TEST(TinyLmTrain, FinalLossIsTheMeanOfTheLastTenSteps) {
  const TinyLmConfig config = SmallConfig(AlibiScheme{});
  TinyLmTrainOptions options;
  options.batch = 2;
  options.tokens = 13 * 2 * 16;  // 13 steps: the ring of ten wraps
  const TinyLmTrainResult r = TrainTinyLm(config, options, Repeated("abcdefghij", 200));
  ASSERT_EQ(r.log.size(), 13u);
  double sum = 0.0;
  for (std::size_t s = 3; s < 13; ++s) sum += r.log[s].loss;
  EXPECT_EQ(r.final_loss, sum / 10);
  for (const TinyLmTrainLogEntry& e : r.log) EXPECT_EQ(e.mean_loss, e.loss);  // one step an entry

  // Entries every 5 steps (5, 10, and the last, 13) average their steps' losses.
  options.log_every = 5;
  const TinyLmTrainResult every5 = TrainTinyLm(config, options, Repeated("abcdefghij", 200));
  ASSERT_EQ(every5.log.size(), 3u);
  const auto mean = [&](std::size_t first, std::size_t end) {
    double total = 0.0;
    for (std::size_t s = first; s < end; ++s) total += r.log[s].loss;
    return total / static_cast<double>(end - first);
  };
  EXPECT_DOUBLE_EQ(every5.log[0].mean_loss, mean(0, 5));
  EXPECT_DOUBLE_EQ(every5.log[1].mean_loss, mean(5, 10));
  EXPECT_EQ(every5.log[2].step, 13);
  EXPECT_DOUBLE_EQ(every5.log[2].mean_loss, mean(10, 13));
}

// ------------------------------------------------------------------ batches

// TinyLmTrainingBytes is the trainer's own stream: training on it, fed back
// a step's rows at a time, is bitwise training on the corpus (a wrong
// order, step or window of it changes the losses).
TEST(TinyLmBatches, TrainingBytesAreTheStreamTheTrainerReads) {
  const TinyLmConfig config = SmallConfig(AlibiScheme{});
  TinyLmTrainOptions options;
  options.batch = 3;
  options.tokens = 7 * 3 * 16;
  options.seed = 5;
  std::vector<std::uint8_t> corpus(4000);
  std::uint32_t x = 12345;  // distinct windows at distinct offsets
  for (std::uint8_t& b : corpus) b = static_cast<std::uint8_t>((x = x * 1664525u + 1013904223u) >> 24);
  const std::vector<std::uint8_t> seen = TinyLmTrainingBytes(config, options, corpus);
  const std::size_t step_bytes = 3 * (16 + 1);
  ASSERT_EQ(seen.size(), 7 * step_bytes);
  const TinyLmTrainResult from_corpus = TrainTinyLm(config, options, corpus);
  const TinyLmTrainResult from_seen = TrainTinyLm(config, options, [&](std::int64_t step) {
    const auto begin = seen.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(step) * step_bytes);
    return TinyLmBatch{.tokens = std::vector<std::uint8_t>(begin, begin + static_cast<std::ptrdiff_t>(step_bytes))};
  });
  ASSERT_EQ(from_corpus.log.size(), from_seen.log.size());
  for (std::size_t s = 0; s < from_corpus.log.size(); ++s) EXPECT_EQ(from_corpus.log[s].loss, from_seen.log[s].loss);
  EXPECT_EQ(from_corpus.final_loss, from_seen.final_loss);
  // Another seed reads other windows.
  options.seed = 6;
  EXPECT_NE(TinyLmTrainingBytes(config, options, corpus), seen);
}

TEST(TinyLmBatches, PureInRangeAndUniform) {
  const std::vector<std::int64_t> a = TinyLmBatchOffsets(1000, 16, 8, 3, 5);
  EXPECT_EQ(a, TinyLmBatchOffsets(1000, 16, 8, 3, 5));
  EXPECT_NE(a, TinyLmBatchOffsets(1000, 16, 8, 3, 6));
  EXPECT_NE(a, TinyLmBatchOffsets(1000, 16, 8, 4, 5));
  // Row r does not depend on the batch size: a prefix.
  const std::vector<std::int64_t> longer = TinyLmBatchOffsets(1000, 16, 12, 3, 5);
  EXPECT_EQ(a, std::vector<std::int64_t>(longer.begin(), longer.begin() + 8));
  // A corpus of exactly one window has one offset: 0.
  for (const std::int64_t o : TinyLmBatchOffsets(17, 16, 4, 0, 0)) EXPECT_EQ(o, 0);
  // 20 buckets of 50 offsets over 20000 draws: each near 1000 (4 sigma ~ 125).
  std::vector<int> histogram(20, 0);
  for (std::int64_t step = 0; step < 1000; ++step) {
    for (const std::int64_t o : TinyLmBatchOffsets(1016, 16, 20, 7, step)) {
      ASSERT_GE(o, 0);
      ASSERT_LT(o, 1000);
      ++histogram[o / 50];
    }
  }
  for (const int count : histogram) EXPECT_NEAR(count, 1000, 130);
  ExpectError([] { TinyLmBatchOffsets(16, 16, 1, 0, 0); },
              {"[train] text = 16 bytes: must hold at least one window of train_length + 1 = 17 bytes"});
}

// ----------------------------------------------------------------- training

TEST(TinyLmTrain, BitwiseIdenticalForOneTwoAndThreeThreads) {
  const int saved = NumThreads();
  const std::vector<std::uint8_t> corpus = Noise(4000, 1);
  for (const PositionScheme& scheme : AllPositionSchemes()) {
    SCOPED_TRACE(PositionSchemeName(scheme));
    const TinyLmConfig config = SmallConfig(scheme);
    TinyLmTrainOptions options;
    options.tokens = 4 * 8 * 16;  // 4 steps of 8 rows
    options.batch = 8;
    options.seed = 11;
    options.warmup = 0.25;
    std::vector<TinyLmTrainResult> runs;
    for (const int threads : {1, 2, 3}) {
      SetNumThreads(threads);
      runs.push_back(TrainTinyLm(config, options, corpus));
    }
    std::string where;
    ASSERT_EQ(runs[0].log.size(), 4u);
    for (std::size_t r = 1; r < runs.size(); ++r) {
      EXPECT_TRUE(SameBits(config, runs[0].params, runs[r].params, &where)) << where << " with " << r + 1 << " threads";
      for (std::size_t s = 0; s < runs[0].log.size(); ++s) {
        EXPECT_EQ(std::bit_cast<std::uint64_t>(runs[0].log[s].loss), std::bit_cast<std::uint64_t>(runs[r].log[s].loss));
        EXPECT_EQ(runs[0].log[s].grad_norm, runs[r].log[s].grad_norm);
      }
    }
    // And the parameters moved.
    EXPECT_FALSE(SameBits(config, runs[0].params, InitTinyLm(config, 11), &where));
  }
  SetNumThreads(saved);
}

TEST(TinyLmTrain, LossFallsOnARepetitiveText) {
  TinyLmConfig config = SmallConfig(RopeScheme{});
  config.d_model = 32;
  config.heads = 4;
  config.ffn_hidden = 64;
  config.train_length = 32;
  const std::vector<std::uint8_t> corpus = Repeated("the quick brown fox jumps over the lazy dog. ", 5000);
  TinyLmTrainOptions options;
  options.batch = 8;
  options.tokens = 60 * 8 * 32;  // 60 steps
  options.lr = 1e-2;
  options.min_lr = 1e-3;
  options.log_every = 20;
  std::int64_t calls = 0;
  const TinyLmTrainResult r = TrainTinyLm(config, options, corpus, [&](const TinyLmTrainProgress& p) {
    ++calls;
    EXPECT_EQ(p.step, calls);
    EXPECT_EQ(p.steps, 60);
    EXPECT_EQ(p.tokens, calls * 8 * 32);
  });
  EXPECT_EQ(calls, 60);
  EXPECT_EQ(r.steps, 60);
  EXPECT_EQ(r.tokens, 60 * 8 * 32);
  ASSERT_EQ(r.log.size(), 3u);  // steps 20, 40, 60
  EXPECT_EQ(r.log[0].step, 20);
  EXPECT_EQ(r.log[2].step, 60);
  EXPECT_DOUBLE_EQ(r.log[2].lr, 1e-3);  // the end of the cosine
  const double unigram = ByteUnigramLoss(CountBytes(corpus), corpus);
  // From ln 256 = 5.55 at init to well under the unigram floor (~2.9): the
  // model uses the context.
  EXPECT_LT(r.final_loss, 0.6 * unigram) << "unigram " << unigram;
  EXPECT_GT(r.tokens_per_s, 0);
  // Evaluated on the text it learned, past its length too (rope).
  const TinyLmEvalResult at_train = EvaluateTinyLm(config, r.params, corpus, 32, 20);
  EXPECT_LT(at_train.loss, 0.6 * unigram);
}

TEST(TinyLmTrain, CorpusAndDivergenceErrors) {
  const TinyLmConfig config = SmallConfig(AlibiScheme{});
  TinyLmTrainOptions options;
  options.tokens = 100;
  ExpectError([&] { TrainTinyLm(config, options, Bytes("sixteen bytes!!!")); },
              {"[train] text = 16 bytes", "train_length + 1 = 17"});
  // A learning rate of 1e30 sends the weights to infinity in a step or two.
  options.tokens = 20 * 16 * 16;
  options.lr = 1e30;
  options.min_lr = 1e30;
  options.warmup = 0;
  options.weight_decay = 0;
  ExpectError([&] { TrainTinyLm(config, options, Noise(2000, 2)); }, {"[train] step = ", "diverged"});
}

}  // namespace
}  // namespace posenc
