// Evaluation of the tiny model: windows (evenly spaced, and sliding: the
// same bytes at every length) and batches, the training-free methods through
// the attention kernel, corrupt weights as an error, the byte-unigram
// baseline and the position buckets.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "posenc/tiny_lm_eval.h"
#include "posenc/tiny_lm_tasks.h"
#include "test_util.h"
#include "tiny_lm_train_test_util.h"

namespace posenc {
namespace {

using testing::Bytes;
using testing::ExpectError;
using testing::Noise;
using testing::SmallConfig;

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

}  // namespace
}  // namespace posenc
