// Training, evaluation and checkpoints of the tiny model: option errors,
// the batch offsets, the weight-decay rule, bitwise-identical training for
// 1 and 2 threads, a loss that falls on a repetitive text, evaluation
// windows (evenly spaced, and sliding: the same bytes at every length) and batches, the byte-unigram baseline, and
// checkpoints that round-trip bit for bit and refuse every kind of bad file by name.
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <numbers>
#include <string>
#include <utility>
#include <vector>

#include "posenc/gguf.h"
#include "posenc/gguf_writer.h"
#include "posenc/parallel.h"
#include "posenc/tiny_lm_checkpoint.h"
#include "posenc/tiny_lm_eval.h"
#include "posenc/tiny_lm_tasks.h"
#include "posenc/tiny_lm_train.h"
#include "temp_dir.h"
#include "test_util.h"
#include "tiny_lm_test_util.h"

namespace posenc {
namespace {

using testing::ExpectError;
namespace fs = std::filesystem;

// d 16, 2 heads (head_dim 8), 2 layers, ffn 24, L 16; the scheme at test
// sizes (testing::TestSized: Shaw clip 3, T5 with 4 buckets up to distance
// 6, reached within 16).
TinyLmConfig SmallConfig(const PositionScheme& scheme) {
  TinyLmConfig config;
  config.d_model = 16;
  config.heads = 2;
  config.layers = 2;
  config.ffn_hidden = 24;
  config.train_length = 16;
  config.scheme = testing::TestSized(scheme);
  return config;
}

std::vector<std::uint8_t> Bytes(std::string_view text) { return {text.begin(), text.end()}; }

std::vector<std::uint8_t> Repeated(std::string_view sentence, std::size_t bytes) {
  std::vector<std::uint8_t> text;
  while (text.size() < bytes) text.insert(text.end(), sentence.begin(), sentence.end());
  text.resize(bytes);
  return text;
}

// Every byte value in a fixed pseudo-random order.
std::vector<std::uint8_t> Noise(std::size_t bytes, std::uint32_t seed) {
  std::vector<std::uint8_t> text(bytes);
  std::uint32_t x = seed;
  for (std::uint8_t& b : text) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<std::uint8_t>(x >> 24);
  }
  return text;
}

bool SameBits(const TinyLmConfig& config, const TinyLmParams& a, const TinyLmParams& b, std::string* first_difference) {
  const auto ta = TinyLmTensorList(config, a), tb = TinyLmTensorList(config, b);
  for (std::size_t t = 0; t < ta.size(); ++t) {
    if (ta[t]->values.size() != tb[t]->values.size() ||
        std::memcmp(ta[t]->values.data(), tb[t]->values.data(), ta[t]->values.size() * sizeof(float)) != 0) {
      *first_difference = ta[t]->name;
      return false;
    }
  }
  return true;
}

// A fresh directory for each test.
class TempDir : public testing::TempDir {
 public:
  TempDir() : testing::TempDir("tiny-lm-train") {}
};

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

// --------------------------------------------------------------- evaluation

TEST(TinyLmEval, OffsetsEvenlySpacedNeverOverlapping) {
  EXPECT_EQ(TinyLmEvalOffsets(100, 9, 4), (std::vector<std::int64_t>{0, 25, 50, 75}));
  EXPECT_EQ(TinyLmEvalOffsets(100, 9, 1), (std::vector<std::int64_t>{0}));
  // At most text / (length + 1) windows: 100 / 33 = 3.
  EXPECT_EQ(TinyLmEvalOffsets(100, 32, 10), (std::vector<std::int64_t>{0, 33, 66}));
  EXPECT_EQ(TinyLmEvalOffsets(10, 9, 5), (std::vector<std::int64_t>{0}));
  ExpectError([] { TinyLmEvalOffsets(9, 9, 1); }, {"[eval] text = 9 bytes", "length + 1 = 10"});
  ExpectError([] { TinyLmEvalOffsets(100, 0, 1); }, {"[eval] length = 0"});
  ExpectError([] { TinyLmEvalOffsets(100, 4, 0); }, {"[eval] windows = 0"});
}

TEST(TinyLmEval, SlidingWindowsByHand) {
  // Length 16, stride 8, bytes 1..40: window 0 scores bytes 1..16, then each
  // window 8 later its last 8 positions (bytes 17..24, 25..32, 33..40).
  TinyLmWindows w = TinyLmSlidingWindows(1000, 16, 8, 40);
  EXPECT_EQ(w.length, 16);
  EXPECT_EQ(w.offsets, (std::vector<std::int64_t>{0, 8, 16, 24}));
  EXPECT_EQ(w.first_scored, (std::vector<std::int64_t>{0, 8, 8, 8}));
  // Bytes 1..44: the last window ends at byte 44 (offset 28) and scores 41..44.
  w = TinyLmSlidingWindows(1000, 16, 8, 44);
  EXPECT_EQ(w.offsets, (std::vector<std::int64_t>{0, 8, 16, 24, 28}));
  EXPECT_EQ(w.first_scored, (std::vector<std::int64_t>{0, 8, 8, 8, 12}));
  w = TinyLmSlidingWindows(17, 16, 8, 16);  // one window
  EXPECT_EQ(w.offsets, (std::vector<std::int64_t>{0}));
  ExpectError([] { TinyLmSlidingWindows(100, 16, 16, 64); },
              {"[eval] stride = 16: must be in [1, length - 1 = 15] (windows that overlap"});
  ExpectError([] { TinyLmSlidingWindows(100, 16, 0, 64); }, {"[eval] stride = 0: must be in [1, length - 1 = 15]"});
  ExpectError([] { TinyLmSlidingWindows(100, 1, 1, 64); }, {"[eval] length = 1: must be >= 2"});
  ExpectError([] { TinyLmSlidingWindows(100, 16, 8, 15); }, {"[eval] predicted_bytes = 15: must be >= length = 16"});
  ExpectError([] { TinyLmSlidingWindows(64, 16, 8, 64); },
              {"[eval] text = 64 bytes: must hold predicted_bytes + 1 = 65"});
}

// The zoo's windows: at every length and stride, text[1..P] is scored, each
// byte once and in order, byte i with min(i, at least length - stride + 1)
// bytes of context and at most length; no window reads past byte P. So every
// length scores the same bytes whatever other lengths are evaluated, and
// only how far back the model may look changes with the length.
TEST(TinyLmEval, SlidingWindowsScoreTheSameBytesAtEveryLength) {
  for (const std::int64_t predicted : {64, 100, 1000}) {
    for (const std::int64_t length : {2, 3, 16, 32, 64}) {
      for (const std::int64_t stride : {length / 2, length / 4, length - 1, std::int64_t{1}}) {
        if (stride < 1) continue;
        const TinyLmWindows w = TinyLmSlidingWindows(predicted + 1, length, stride, predicted);
        std::vector<std::int64_t> scored;
        for (std::size_t i = 0; i < w.offsets.size(); ++i) {
          ASSERT_LE(w.offsets[i] + length, predicted);
          for (std::int64_t t = w.first_scored[i]; t < length; ++t) {
            const std::int64_t byte = w.offsets[i] + t + 1, context = t + 1;
            scored.push_back(byte);
            EXPECT_LE(context, length);
            EXPECT_GE(context, std::min(byte, length - stride + 1)) << "byte " << byte;
          }
        }
        std::vector<std::int64_t> every(static_cast<std::size_t>(predicted));
        for (std::int64_t i = 0; i < predicted; ++i) every[i] = i + 1;
        EXPECT_EQ(scored, every) << "P " << predicted << ", length " << length << ", stride " << stride;
      }
    }
  }

  // Through the model: the same count of scored predictions at every length,
  // each one the loss of its byte in its window (one TinyLmLoss call a
  // window), and nothing read past byte P.
  const TinyLmConfig config = SmallConfig(AlibiScheme{});
  const TinyLmParams params = InitTinyLm(config, 4);
  const std::vector<std::uint8_t> text = Noise(1000, 6);
  const std::vector<std::uint8_t> just_enough(text.begin(), text.begin() + 65);
  for (const std::int64_t length : {8, 16, 32}) {
    const TinyLmWindows w = TinyLmSlidingWindows(65, length, length / 2, 64);
    const TinyLmEvalResult r = EvaluateTinyLmAt(config, params, text, w);
    EXPECT_EQ(r.loss, EvaluateTinyLmAt(config, params, just_enough, w).loss);
    ASSERT_EQ(r.scored_loss.size(), 64u);
    ASSERT_EQ(r.scored_position.size(), 64u);
    std::size_t j = 0;
    double mean = 0;
    for (std::size_t i = 0; i < w.offsets.size(); ++i) {
      const std::vector<std::uint8_t> window(text.begin() + w.offsets[i], text.begin() + w.offsets[i] + length + 1);
      const TinyLmLossResult one = TinyLmLoss(config, params, window, 1, length);
      for (std::int64_t t = w.first_scored[i]; t < length; ++t, ++j) {
        EXPECT_NEAR(r.scored_loss[j], one.token_loss[t], 1e-5) << "length " << length << ", byte " << j + 1;
        EXPECT_EQ(r.scored_position[j], t);
        mean += one.token_loss[t] / 64;
      }
    }
    EXPECT_NEAR(r.loss, mean, 1e-5);
  }
  ExpectError(
      [&] { EvaluateTinyLmAt(config, params, just_enough, {.length = 16, .offsets = {49}, .first_scored = {0}}); },
      {"[eval] offsets[0] = 49: must leave a window of length + 1 = 17 bytes in the text of 65 bytes"});
  ExpectError(
      [&] { EvaluateTinyLmAt(config, params, just_enough, {.length = 16, .offsets = {0}, .first_scored = {16}}); },
      {"[eval] first_scored[0] = 16: must be a position in [0, length - 1 = 15]"});
  ExpectError(
      [&] { EvaluateTinyLmAt(config, params, just_enough, {.length = 16, .offsets = {0}, .first_scored = {}}); },
      {"[eval] first_scored = 0 entries: must have one entry a window (1)"});
}

TEST(TinyLmEval, MeanOverWindowsAsOneCallEach) {
  const TinyLmConfig config = SmallConfig(T5Scheme{});
  const TinyLmParams params = InitTinyLm(config, 5);
  const std::vector<std::uint8_t> text = Noise(3000, 3);
  // 48 windows of 40: 8192 / 40 = 204 a call, so one batch of all 48.
  const TinyLmEvalResult r = EvaluateTinyLm(config, params, text, 40, 48);
  EXPECT_EQ(r.windows, 48);
  EXPECT_EQ(r.length, 40);
  ASSERT_EQ(r.position_loss.size(), 40u);
  std::vector<double> expected(40, 0.0);
  double mean = 0.0;
  for (const std::int64_t offset : TinyLmEvalOffsets(3000, 40, 48)) {
    const std::vector<std::uint8_t> window(text.begin() + offset, text.begin() + offset + 41);
    const TinyLmLossResult one = TinyLmLoss(config, params, window, 1, 40);
    for (std::size_t t = 0; t < 40; ++t) expected[t] += one.position_loss[t] / 48;
    mean += one.loss / 48;
  }
  for (std::size_t t = 0; t < 40; ++t) EXPECT_NEAR(r.position_loss[t], expected[t], 1e-5) << t;
  EXPECT_NEAR(r.loss, mean, 1e-5);
  EXPECT_NEAR(r.BitsPerByte(), r.loss / std::numbers::ln2, 1e-12);
  EXPECT_NEAR(r.Perplexity(), std::exp(r.loss), 1e-9);
  // An untrained model is near uniform over 256 bytes.
  EXPECT_NEAR(r.loss, std::log(256.0), 0.1);
  // Several batches (1024 / 8192 per call: 8 windows a call) average the same way.
  const TinyLmEvalResult long_windows = EvaluateTinyLm(config, params, Noise(40000, 4), 1024, 20);
  EXPECT_EQ(long_windows.windows, 20);
  EXPECT_NEAR(long_windows.loss, std::log(256.0), 0.1);
}

TEST(TinyLmEval, LearnedTablePastItsLength) {
  TinyLmConfig config = SmallConfig(LearnedScheme{});
  const TinyLmParams params = InitTinyLm(config, 1);
  const std::vector<std::uint8_t> text = Noise(2000, 5);
  ExpectError([&] { EvaluateTinyLm(config, params, text, 32, 4); },
              {"[tiny_lm] position = 16", "learned position table of 16 rows", "hierarchical"});
  config.learned_past_table = LearnedPastTable::kHierarchical;
  EXPECT_EQ(EvaluateTinyLm(config, params, text, 32, 4).windows, 4);
}

// A RoPE model under every training-free method runs its attention through
// posenc::Attention (strided q, k, v views of the model's qkv rows, the
// rotation inside the kernel): at the training length, where each method's
// defaults leave RoPE as it is, that path must give the model's own loss;
// past it, the method must change what it claims to change and nothing else.
TEST(TinyLmEval, ExtensionMethodsThroughTheAttentionKernel) {
  const TinyLmConfig config = SmallConfig(RopeScheme{});  // L_train = 16
  TinyLmParams params = InitTinyLm(config, 7);
  // Sharp attention (init scores are near uniform), so that positions matter.
  for (TinyLmBlock& block : params.blocks) {
    for (float& w : block.attn_qkv.values) w *= 25.0f;
  }
  const std::vector<std::uint8_t> text = Noise(20000, 8);
  const TinyLmEvalResult own16 = EvaluateTinyLm(config, params, text, 16, 8);
  for (const char* name : {"linear", "ntk", "dynamic-ntk", "yarn", "leaky-rerope", "window", "lambda", "none:logn"}) {
    const ContextExtension method = ParseContextExtension(name);
    EXPECT_TRUE(SameAsModelRope(PlanTinyLmExtension(config, method, 16), TinyLmRopeSpec(config), 16)) << name;
    const TinyLmEvalResult r = EvaluateTinyLm(config, params, text, 16, 8, method);
    EXPECT_NEAR(r.loss, own16.loss, 2e-5 * own16.loss) << name;
    for (std::size_t t = 0; t < 16; ++t) EXPECT_NEAR(r.position_loss[t], own16.position_loss[t], 1e-4) << name << t;
  }
  // Past the training length (64 = 4 L_train): position interpolation moves
  // every position; the window (16 keys) and ReRoPE (window 8) leave the
  // positions that see no farther key as the model has them.
  const TinyLmEvalResult own64 = EvaluateTinyLm(config, params, text, 64, 8);
  const TinyLmEvalResult linear = EvaluateTinyLm(config, params, text, 64, 8, ParseContextExtension("linear"));
  EXPECT_GT(std::abs(linear.loss - own64.loss), 1e-3);
  EXPECT_GT(std::abs(linear.position_loss[5] - own64.position_loss[5]), 1e-4);
  const auto same_until = [&](const char* name, std::size_t until) {
    const TinyLmEvalResult r = EvaluateTinyLm(config, params, text, 64, 8, ParseContextExtension(name));
    for (std::size_t t = 0; t < until; ++t) EXPECT_NEAR(r.position_loss[t], own64.position_loss[t], 1e-4) << name << t;
    double later = 0;  // positions that see farther keys: changed
    for (std::size_t t = until + 8; t < 64; ++t) later += std::abs(r.position_loss[t] - own64.position_loss[t]);
    EXPECT_GT(later, 1e-3) << name;
  };
  same_until("window", 16);
  same_until("rerope", 8);
  same_until("self-extend", 8);
}

TEST(TinyLmEval, ExtensionMethodsNeedRope) {
  const TinyLmConfig config = SmallConfig(AlibiScheme{});
  const TinyLmParams params = InitTinyLm(config, 2);
  const std::vector<std::uint8_t> text = Noise(4000, 9);
  ExpectError([&] { EvaluateTinyLm(config, params, text, 32, 4, ParseContextExtension("yarn")); },
              {"[eval] method = \"yarn\"", "RoPE models only", "alibi"});
  ExpectError([&] { PlanTinyLmExtension(config, ParseContextExtension("lambda"), 32); }, {"RoPE models only"});
  // "none" is the model as trained, whatever its scheme: bitwise the same.
  EXPECT_EQ(EvaluateTinyLm(config, params, text, 32, 4, ParseContextExtension("none")).loss,
            EvaluateTinyLm(config, params, text, 32, 4).loss);
  // The planner's own rules still apply: ReRoPE's window must be below L_train.
  ExpectError(
      [&] {
        EvaluateTinyLm(SmallConfig(RopeScheme{}), InitTinyLm(SmallConfig(RopeScheme{}), 2), text, 32, 4,
                       ParseContextExtension("rerope:window=16"));
      },
      {"window = 16"});
}

// The engine's rule (logit_range.h): logits that are NaN, or past what a
// log-softmax resolves, are an error naming the position and the windows,
// never "nan" in every column or a loss of 0 (weights set here directly: a
// checkpoint with NaN is refused at load, below; one with 1e20, as `posenc
// eval` read it, scored a loss of 0.0000 and a perplexity of 1.000).
TEST(TinyLmEval, CorruptWeightsAreAnErrorNotALoss) {
  const TinyLmConfig config = SmallConfig(AlibiScheme{});
  TinyLmParams params = InitTinyLm(config, 1);
  params.blocks[0].ffn_down.values[0] = std::numeric_limits<float>::quiet_NaN();
  ExpectError([&] { EvaluateTinyLm(config, params, Noise(1000, 3), 16, 4); },
              {"[tiny_lm] logits[sequence 0 of the batch, position 0, byte 0] = nan: must be finite and of magnitude "
               "< 65536",
               "(windows 0..3)"});
  for (const TinyLmConfig& scheme : {SmallConfig(RopeScheme{}), config}) {
    TinyLmParams huge = InitTinyLm(scheme, 1);
    std::fill(huge.token_embd.values.begin(), huge.token_embd.values.end(), 1e20F);
    ExpectError([&] { EvaluateTinyLm(scheme, huge, Noise(1000, 3), 16, 4); },
                {"[tiny_lm] logits[sequence 0 of the batch, position 0, byte 0] = ", "magnitude < 65536"});
    // The tasks' evaluation reads the same forward pass.
    ExpectError([&] { EvaluateTinyLmTask(scheme, huge, TinyLmTask::kCopy, 32, 4, 1); }, {"magnitude < 65536"});
  }
}

TEST(TinyLmEval, ByteUnigramLoss) {
  ByteCounts uniform{};
  uniform.fill(10);
  EXPECT_NEAR(ByteUnigramLoss(uniform, Noise(1000, 6)), std::log(256.0), 1e-12);
  // One byte value: p = (n + 1) / (n + 256); an unseen byte 1 / (n + 256).
  const std::vector<std::uint8_t> as(744, 'a');
  const ByteCounts counts = CountBytes(as);
  EXPECT_EQ(counts['a'], 744);
  EXPECT_NEAR(ByteUnigramLoss(counts, Bytes("aaaa")), -std::log(745.0 / 1000.0), 1e-12);
  EXPECT_NEAR(ByteUnigramLoss(counts, Bytes("ab")), (-std::log(745.0 / 1000.0) + std::log(1000.0)) / 2, 1e-12);
  ExpectError([&] { ByteUnigramLoss(counts, {}); }, {"[eval] text = 0 bytes"});
  ByteCounts negative{};
  negative[7] = -1;
  ExpectError([&] { ByteUnigramLoss(negative, Bytes("a")); }, {"[eval] counts[7] = -1"});
}

TEST(TinyLmEval, BucketPositionLoss) {
  const std::vector<double> loss{1, 2, 3, 4, 5};
  EXPECT_EQ(BucketPositionLoss(loss, 2), (std::vector<double>{1.5, 3.5, 5}));
  EXPECT_EQ(BucketPositionLoss(loss, 5), (std::vector<double>{3}));
  EXPECT_EQ(BucketPositionLoss(loss, 9), (std::vector<double>{3}));
  ExpectError([&] { BucketPositionLoss(loss, 0); }, {"[eval] width = 0: must be >= 1"});
}

// -------------------------------------------------------------- checkpoints

TinyLmTrainingInfo SomeInfo() {
  TinyLmTrainingInfo info;
  info.seed = 42;
  info.tokens = 123456;
  info.steps = 61;
  info.batch = 16;
  info.lr = 2e-3;
  info.final_loss = 1.2345678901234567;
  info.corpus = "train-corpus.txt";
  for (std::size_t b = 0; b < info.corpus_byte_counts.size(); ++b) {
    info.corpus_byte_counts[b] = static_cast<std::int64_t>(b * b);
  }
  return info;
}

TEST(TinyLmCheckpoint, RoundTripBitExactForEveryScheme) {
  const TempDir dir;
  for (const PositionScheme& scheme : AllPositionSchemes()) {
    SCOPED_TRACE(PositionSchemeName(scheme));
    TinyLmConfig config = SmallConfig(scheme);
    if (auto* rope = std::get_if<RopeScheme>(&config.scheme)) rope->theta = 500000.0;
    if (auto* fire = std::get_if<FireScheme>(&config.scheme)) fire->c = 0.375;
    config.norm_eps = 1e-6;
    // Values with every bit pattern class: init plus noise, a subnormal, -0.
    TinyLmParams params = InitTinyLm(config, 9);
    params.token_embd.values[0] = std::numeric_limits<float>::denorm_min();
    params.token_embd.values[1] = -0.0f;
    const std::string path = dir / (std::string(PositionSchemeName(scheme)) + ".gguf");
    SaveTinyLmCheckpoint(path, config, params, SomeInfo());
    const TinyLmCheckpoint loaded = LoadTinyLmCheckpoint(path);
    EXPECT_EQ(loaded.config.scheme, config.scheme);  // every field of the scheme (shaw clip 3, theta 500000, ...)
    EXPECT_EQ(loaded.config.d_model, 16);
    EXPECT_EQ(loaded.config.heads, 2);
    EXPECT_EQ(loaded.config.layers, 2);
    EXPECT_EQ(loaded.config.ffn_hidden, 24);
    EXPECT_EQ(loaded.config.train_length, 16);
    EXPECT_EQ(loaded.config.norm_eps, 1e-6);
    std::string where;
    EXPECT_TRUE(SameBits(config, params, loaded.params, &where)) << where;
    const TinyLmTrainingInfo expected = SomeInfo();
    EXPECT_EQ(loaded.info.name, "tiny-lm-" + std::string(PositionSchemeName(scheme)) + "-L16");
    EXPECT_EQ(loaded.info.seed, 42);
    EXPECT_EQ(loaded.info.tokens, 123456);
    EXPECT_EQ(loaded.info.steps, 61);
    EXPECT_EQ(loaded.info.batch, 16);
    EXPECT_EQ(loaded.info.lr, 2e-3);
    EXPECT_EQ(loaded.info.final_loss, expected.final_loss);
    EXPECT_EQ(loaded.info.corpus, "train-corpus.txt");
    EXPECT_EQ(loaded.info.corpus_byte_counts, expected.corpus_byte_counts);
    EXPECT_EQ(loaded.info.posenc_version, PosencVersion());
    // The same loss from the loaded model.
    const std::vector<std::uint8_t> tokens = Noise(17, 8);
    EXPECT_EQ(TinyLmLoss(config, params, tokens, 1, 16).loss,
              TinyLmLoss(loaded.config, loaded.params, tokens, 1, 16).loss);
  }
}

TEST(TinyLmCheckpoint, NonFiniteWeightsAreRefusedAtLoad) {
  const TempDir dir;
  const TinyLmConfig config = SmallConfig(RopeScheme{});
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (const auto& [bad, text] : {std::pair{nan, "nan"}, std::pair{inf, "inf"}, std::pair{-inf, "-inf"}}) {
    TinyLmParams params = InitTinyLm(config, 1);
    params.blocks[1].ffn_up.values[17] = bad;
    params.blocks[1].ffn_up.values[20] = nan;  // only the first is named
    SaveTinyLmCheckpoint(dir / "bad.gguf", config, params, SomeInfo());
    const std::string expected = std::string("bad.gguf: [checkpoint] blk.1.ffn_up.weight[17] = ") + text +
                                 ": must be finite (the first NaN or infinite weight of the tensor)";
    ExpectError([&] { LoadTinyLmCheckpoint(dir / "bad.gguf"); }, {expected.c_str()});
  }
}

TEST(TinyLmCheckpoint, TensorsInListOrderWithReversedShapes) {
  const TempDir dir;
  const TinyLmConfig config = SmallConfig(ShawScheme{});
  const TinyLmParams params = InitTinyLm(config, 1);
  TinyLmTrainingInfo info = SomeInfo();
  info.name = "my model";
  SaveTinyLmCheckpoint(dir / "m.gguf", config, params, info);
  const GgufFile file = GgufFile::Open(dir / "m.gguf");
  const auto list = TinyLmTensorList(config, params);
  ASSERT_EQ(file.tensors().size(), list.size());
  for (std::size_t t = 0; t < list.size(); ++t) {
    EXPECT_EQ(file.tensors()[t].name, list[t]->name);
    EXPECT_EQ(file.tensors()[t].shape, std::vector<std::int64_t>(list[t]->shape.rbegin(), list[t]->shape.rend()));
  }
  EXPECT_EQ(*GgufString(file.metadata(), "general.architecture", "test"), "posenc-tiny-lm");
  EXPECT_EQ(*GgufString(file.metadata(), "general.name", "test"), "my model");
  EXPECT_EQ(*GgufString(file.metadata(), "posenc-tiny-lm.scheme", "test"), "shaw");
  EXPECT_EQ(*GgufCount(file.metadata(), "posenc-tiny-lm.train_length", "test"), 16);
}

// Writes a checkpoint the way SaveTinyLmCheckpoint does, with one change:
// a key left out or replaced, a tensor's shape changed, a tensor left out
// or added.
struct BadCheckpoint {
  TinyLmConfig config = SmallConfig(RopeScheme{});
  std::string drop_key, drop_tensor;
  std::map<std::string, std::string> string_keys;  // replacements of string keys
  std::map<std::string, std::int64_t> int_keys;    // replacements of integer keys
  std::string reshape_tensor;                      // written as [1, size] instead
  bool extra_tensor = false;

  void Write(const std::string& path) const {
    const TinyLmParams params = InitTinyLm(config, 1);
    const std::string good = path + ".good";
    SaveTinyLmCheckpoint(good, config, params, SomeInfo());
    const GgufFile file = GgufFile::Open(good);
    GgufWriter writer;
    for (const auto& [key, value] : file.metadata()) {
      if (key == drop_key) continue;
      if (const auto it = string_keys.find(key); it != string_keys.end()) {
        writer.AddString(key, it->second);
      } else if (const auto at = int_keys.find(key); at != int_keys.end()) {
        writer.AddInt64(key, at->second);
      } else if (const auto* s = std::get_if<std::string>(&value)) {
        writer.AddString(key, *s);
      } else if (const auto* i = std::get_if<std::int64_t>(&value)) {
        writer.AddInt64(key, *i);
      } else if (const auto* d = std::get_if<double>(&value)) {
        writer.AddFloat64(key, *d);
      } else if (const auto* a = std::get_if<std::vector<std::int64_t>>(&value)) {
        writer.AddInt64Array(key, *a);
      }
    }
    for (const TinyLmTensor* t : TinyLmTensorList(config, params)) {
      if (t->name == drop_tensor) continue;
      std::vector<std::int64_t> ne(t->shape.rbegin(), t->shape.rend());
      if (t->name == reshape_tensor) ne = {static_cast<std::int64_t>(t->values.size()), 1};
      writer.AddTensor(t->name, ne, t->values);
    }
    if (extra_tensor) writer.AddTensor("blk.9.attn_qkv.weight", {2}, std::vector<float>{1, 2});
    writer.Write(path);
    fs::remove(good);
  }
};

TEST(TinyLmCheckpoint, LoadErrorsNameTheFileAndTheProblem) {
  const TempDir dir;
  const std::string path = dir / "bad.gguf";
  const auto load_error = [&](const BadCheckpoint& bad, std::initializer_list<const char*> fragments) {
    bad.Write(path);
    ExpectError([&] { LoadTinyLmCheckpoint(path); }, fragments);
  };
  BadCheckpoint bad;
  bad.string_keys["general.architecture"] = "llama";
  load_error(bad, {"bad.gguf: [checkpoint] general.architecture = \"llama\": must be \"posenc-tiny-lm\""});
  bad = {};
  bad.string_keys["posenc-tiny-lm.scheme"] = "xpos";
  load_error(bad, {"bad.gguf: [checkpoint] posenc-tiny-lm.scheme = \"xpos\": must be one of nope, sinusoidal"});
  bad = {};
  bad.drop_key = "posenc-tiny-lm.heads";
  load_error(bad, {"bad.gguf: [checkpoint] posenc-tiny-lm.heads = missing"});
  bad = {};
  bad.drop_key = "posenc-tiny-lm.training.corpus_byte_counts";
  load_error(bad, {"[checkpoint] posenc-tiny-lm.training.corpus_byte_counts = missing"});
  bad = {};
  bad.string_keys["posenc-tiny-lm.d_model"] = "16";  // a string where a number belongs
  load_error(bad, {"[checkpoint] posenc-tiny-lm.d_model = non-numeric: must be a number"});
  bad = {};
  bad.reshape_tensor = "blk.1.ffn_up.weight";
  load_error(bad, {"bad.gguf: [checkpoint] blk.1.ffn_up.weight shape = [1, 384]: must be [24, 16] for this config"});
  bad = {};
  bad.drop_tensor = "output_norm.weight";
  load_error(bad, {"bad.gguf: [checkpoint] output_norm.weight = missing: a rope model of this config has this tensor"});
  bad = {};
  bad.extra_tensor = true;
  load_error(bad, {"[checkpoint] tensor = \"blk.9.attn_qkv.weight\": is not part of a rope model"});
  // A checkpoint of another scheme's tensors: the first missing one is named.
  bad = {};
  bad.config = SmallConfig(FireScheme{});
  bad.string_keys["posenc-tiny-lm.scheme"] = "kerple";
  load_error(bad, {"bad.gguf: [checkpoint] blk.0.attn_kerple_r1.weight = missing: a kerple model of this config"});
  bad = {};
  bad.config = SmallConfig(FireScheme{});
  bad.int_keys["posenc-tiny-lm.fire_mlp_width"] = 0;
  load_error(bad, {"bad.gguf: [tiny_lm] fire_mlp_width = 0: must be in [1, "});
  bad = {};
  bad.config = SmallConfig(FireScheme{});
  bad.drop_key = "posenc-tiny-lm.fire_c";
  load_error(bad, {"bad.gguf: [checkpoint] posenc-tiny-lm.fire_c = missing"});
  // A config that breaks its own rules: heads not dividing d_model.
  bad = {};
  bad.int_keys["posenc-tiny-lm.heads"] = 3;
  load_error(bad, {"bad.gguf: [tiny_lm] heads = 3: must divide d_model = 16"});
  bad = {};
  bad.int_keys["posenc-tiny-lm.layers"] = -1;
  load_error(bad, {"bad.gguf: [checkpoint] posenc-tiny-lm.layers = -1: must be a whole number >= 0"});
  // int64 edges, exact in the message (read through a double, 2^63 - 1 was
  // reported as 9223372036854775808).
  bad = {};
  bad.int_keys["posenc-tiny-lm.layers"] = std::numeric_limits<std::int64_t>::max();
  load_error(bad, {"bad.gguf: [tiny_lm] layers = 9223372036854775807: must be in [1, 1024]"});
  bad = {};
  bad.int_keys["posenc-tiny-lm.training.tokens"] = std::numeric_limits<std::int64_t>::min();
  load_error(bad, {"[checkpoint] posenc-tiny-lm.training.tokens = -9223372036854775808: must be a whole number >= 0"});
  bad = {};
  bad.int_keys["posenc-tiny-lm.training.tokens"] = std::numeric_limits<std::int64_t>::max();
  bad.Write(path);
  EXPECT_EQ(LoadTinyLmCheckpoint(path).info.tokens, std::numeric_limits<std::int64_t>::max());
}

TEST(TinyLmCheckpoint, TruncatedAndMissingFiles) {
  const TempDir dir;
  const TinyLmConfig config = SmallConfig(KerpleScheme{});
  SaveTinyLmCheckpoint(dir / "good.gguf", config, InitTinyLm(config, 1), SomeInfo());
  const auto size = static_cast<std::int64_t>(fs::file_size(dir / "good.gguf"));
  for (const std::int64_t keep : {std::int64_t{10}, size / 2, size - 1}) {
    SCOPED_TRACE(keep);
    fs::copy_file(dir / "good.gguf", dir / "cut.gguf", fs::copy_options::overwrite_existing);
    fs::resize_file(dir / "cut.gguf", static_cast<std::uintmax_t>(keep));
    ExpectError([&] { LoadTinyLmCheckpoint(dir / "cut.gguf"); }, {"cut.gguf"});
  }
  ExpectError([&] { LoadTinyLmCheckpoint(dir / "none.gguf"); }, {"none.gguf"});
  // Saving into a missing directory names the path and leaves nothing.
  ExpectError([&] { SaveTinyLmCheckpoint(dir / "no/such.gguf", config, InitTinyLm(config, 1), SomeInfo()); },
              {"no/such.gguf"});
}

}  // namespace
}  // namespace posenc
