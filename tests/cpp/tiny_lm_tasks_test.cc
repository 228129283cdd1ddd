// The synthetic tasks (tiny_lm_tasks.h): each format checked by what a
// reader of the sequence sees (the answer's bytes are where the task says,
// nothing else tells them), the loss restricted to answers, the model's
// predictions, training on a task, and the bad input.
#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <utility>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "posenc/error.h"
#include "posenc/tiny_lm_tasks.h"
#include "posenc/tiny_lm_train.h"
#include "test_util.h"
#include "tiny_lm_test_util.h"

namespace posenc {
namespace {

using testing::ExpectError;

std::string Text(const TinyLmTaskSequence& s) { return {s.tokens.begin(), s.tokens.end()}; }

// The common contract: sizes, the scored flags are exactly the answers'
// bytes, and every answer's bytes are the bytes `distance` back.
void ExpectWellFormed(const TinyLmTaskSequence& s, std::int64_t length, bool needle) {
  ASSERT_EQ(static_cast<std::int64_t>(s.tokens.size()), length + 1);
  ASSERT_EQ(static_cast<std::int64_t>(s.scored.size()), length);
  ASSERT_FALSE(s.answers.empty());
  std::vector<std::uint8_t> expected(s.scored.size(), 0);
  for (const TinyLmTaskAnswer& a : s.answers) {
    ASSERT_GE(a.first, 0);
    ASSERT_LE(a.first + a.size, length);
    ASSERT_GT(a.distance, 0);
    EXPECT_GE(a.depth, 0.0);
    EXPECT_LE(a.depth, 1.0);
    for (std::int64_t b = 0; b < a.size; ++b) {
      expected[static_cast<std::size_t>(a.first + b)] = 1;
      const std::int64_t at = a.first + 1 + b;
      EXPECT_EQ(s.tokens[at], s.tokens[at - a.distance]) << Text(s);
    }
    if (needle) continue;  // its placement: NeedleSitsAtItsDepth
    EXPECT_NEAR(a.depth, static_cast<double>(a.first + 1 - a.distance) / static_cast<double>(length), 1e-12);
  }
  EXPECT_EQ(s.scored, expected) << Text(s);
}

TEST(TinyLmTasks, EveryTaskIsWellFormedAtOddLengths) {
  for (const TinyLmTask task : AllTinyLmTasks()) {
    for (std::int64_t length = TinyLmTaskMinLength(task); length < 140; length += 7) {
      for (std::int64_t index = 0; index < 3; ++index) {
        SCOPED_TRACE(std::string(TinyLmTaskName(task)) + " length " + std::to_string(length));
        ExpectWellFormed(MakeTinyLmTaskSequence(task, length, 5, index), length, task == TinyLmTask::kNeedle);
      }
    }
  }
}

TEST(TinyLmTasks, CopyRepeatsTheStringAfterTheSeparator) {
  const TinyLmTaskSequence s = MakeTinyLmTaskSequence(TinyLmTask::kCopy, 12, 1, 0);
  const std::string text = Text(s);  // 13 bytes: "." "<" 5 letters "|" the 5 again
  EXPECT_EQ(text.substr(0, 2), ".<");
  EXPECT_EQ(text[7], '|');
  EXPECT_EQ(text.substr(2, 5), text.substr(8, 5));
  ASSERT_EQ(s.answers.size(), 5u);
  for (const TinyLmTaskAnswer& a : s.answers) EXPECT_EQ(a.distance, 6);
}

TEST(TinyLmTasks, EvenGivesEveryOtherByte) {
  const TinyLmTaskSequence s = MakeTinyLmTaskSequence(TinyLmTask::kEven, 13, 2, 0);
  const std::string text = Text(s);  // "<" 8 letters "|" 4 answers
  ASSERT_EQ(text.size(), 14u);
  EXPECT_EQ(text[0], '<');
  EXPECT_EQ(text[9], '|');
  EXPECT_EQ(text.substr(10), std::string({text[1], text[3], text[5], text[7]}));
  ASSERT_EQ(s.answers.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(s.answers[i].distance, 9 - static_cast<std::int64_t>(i));
}

TEST(TinyLmTasks, RecallAsksEveryKeyOnceAndItsValueIsTheByteBeforeIt) {
  for (const std::int64_t length : {16, 40, 200, 1000}) {
    const TinyLmTaskSequence s = MakeTinyLmTaskSequence(TinyLmTask::kRecall, length, 3, 1);
    const std::string text = Text(s);
    const std::size_t bar = text.find('|');
    ASSERT_NE(bar, std::string::npos);
    const std::string context = text.substr(0, bar), queries = text.substr(bar + 1);
    const auto pairs = static_cast<std::size_t>(std::min<std::int64_t>(26, length / 4));
    ASSERT_EQ(queries.size(), 2 * pairs) << text;
    std::set<char> keys;
    for (std::size_t q = 0; q < pairs; ++q) {
      const char key = queries[2 * q], value = queries[2 * q + 1];
      ASSERT_TRUE(key >= 'A' && key <= 'Z') << text;
      EXPECT_TRUE(keys.insert(key).second) << "key asked twice: " << text;
      // The key occurs once in the context, right after its value.
      ASSERT_EQ(std::count(context.begin(), context.end(), key), 1) << text;
      EXPECT_EQ(context[context.find(key) - 1], value) << text;
    }
    // The pairs span the context: the first pair near its start, the last at its end.
    EXPECT_LT(context.find_first_not_of('.'), context.size() / pairs + 1) << text;
    EXPECT_NE(context.back(), '.');
  }
}

TEST(TinyLmTasks, NeedleSitsAtItsDepth) {
  const std::int64_t length = 40;  // 41 bytes: 32 filler, "#ddd", "?#ddd"
  for (const double depth : {0.0, 0.5, 1.0}) {
    const TinyLmTaskSequence s = MakeTinyLmTaskSequence(TinyLmTask::kNeedle, length, 4, 0, depth);
    const std::string text = Text(s);
    const auto at = static_cast<std::size_t>(std::llround(depth * 32));
    EXPECT_EQ(text[at], '#') << text;
    EXPECT_EQ(text.substr(at + 1, 3), text.substr(38, 3)) << text;
    EXPECT_EQ(text.substr(36, 2), "?#");
    EXPECT_EQ(std::count(text.begin(), text.end(), '#'), 2) << text;
    ASSERT_EQ(s.answers.size(), 1u);
    EXPECT_EQ(s.answers[0].size, 3);
    EXPECT_NEAR(s.answers[0].depth, static_cast<double>(at) / 32, 1e-12);
  }
}

TEST(TinyLmTasks, SequencesArePureFunctionsOfTheirInputs) {
  for (const TinyLmTask task : AllTinyLmTasks()) {
    const TinyLmTaskSequence a = MakeTinyLmTaskSequence(task, 50, 7, 3);
    EXPECT_EQ(a.tokens, MakeTinyLmTaskSequence(task, 50, 7, 3).tokens);
    EXPECT_NE(a.tokens, MakeTinyLmTaskSequence(task, 50, 7, 4).tokens);
    EXPECT_NE(a.tokens, MakeTinyLmTaskSequence(task, 50, 8, 3).tokens);
  }
}

TEST(TinyLmTasks, AnAnswerIsRightOnlyWhenEveryByteIs) {
  const TinyLmTaskSequence s = MakeTinyLmTaskSequence(TinyLmTask::kNeedle, 30, 1, 0);
  std::vector<std::uint8_t> predictions(s.tokens.begin() + 1, s.tokens.end());  // every byte right
  EXPECT_EQ(TinyLmTaskCorrect(s, predictions), std::vector<bool>{true});
  predictions[static_cast<std::size_t>(s.answers[0].first + 2)] ^= 1;  // the last digit wrong
  EXPECT_EQ(TinyLmTaskCorrect(s, predictions), std::vector<bool>{false});
  ExpectError([&] { TinyLmTaskCorrect(s, std::span(predictions).first(5)); }, {"predictions.size() = 5"});
}

TEST(TinyLmTasks, BadInputNamesTheRule) {
  ExpectError([] { ParseTinyLmTask("sort", "tasks", "--tasks"); },
              {"[tasks] --tasks = \"sort\"", "copy, recall, needle, even"});
  ExpectError([] { MakeTinyLmTaskSequence(TinyLmTask::kNeedle, 7, 0, 0); },
              {"length = 7", "[8, ", "needle", "\"#ddd\""});
  ExpectError([] { MakeTinyLmTaskSequence(TinyLmTask::kCopy, 2, 0, 0); }, {"length = 2", "copy"});
  ExpectError([] { MakeTinyLmTaskSequence(TinyLmTask::kNeedle, 20, 0, 0, 1.5); }, {"depth = 1.5", "[0, 1]"});
  ExpectError([] { MakeTinyLmTaskSequence(TinyLmTask::kCopy, 20, 0, 0, 0.5); }, {"depth = 0.5", "needle only"});
}

TinyLmConfig SmallConfig(std::int64_t length) {
  TinyLmConfig config;
  config.d_model = 16;
  config.heads = 2;
  config.layers = 2;
  config.ffn_hidden = 32;
  config.train_length = length;
  return config;
}

// The loss over answers only: the mean of the scored predictions' losses,
// and its gradient the mean of theirs (each a gradient of one prediction).
TEST(TinyLmTasks, TheLossAndItsGradientCountOnlyTheScoredPredictions) {
  const TinyLmConfig config = SmallConfig(9);
  const TinyLmParams params = testing::RandomTinyParams(config, 3);
  const std::vector<std::uint8_t> tokens = testing::RandomBytes(2, 9, 4);
  const TinyLmLossResult all = TinyLmLoss(config, params, tokens, 2, 9);
  std::vector<std::uint8_t> scored(18, 0);
  scored[4] = scored[13] = 1;
  TinyLmParams grads, grad_a, grad_b;
  const TinyLmLossResult masked = TinyLmLoss(config, params, tokens, 2, 9, &grads, scored);
  EXPECT_NEAR(masked.loss, (all.token_loss[4] + all.token_loss[13]) / 2, 1e-12);
  EXPECT_EQ(masked.token_loss, all.token_loss);  // every prediction's loss, scored or not
  std::vector<std::uint8_t> only(18, 0);
  only[4] = 1;
  TinyLmLoss(config, params, tokens, 2, 9, &grad_a, only);
  only[4] = 0;
  only[13] = 1;
  TinyLmLoss(config, params, tokens, 2, 9, &grad_b, only);
  const std::vector<const TinyLmTensor*> g = TinyLmTensorList(config, std::as_const(grads));
  const std::vector<const TinyLmTensor*> a = TinyLmTensorList(config, std::as_const(grad_a));
  const std::vector<const TinyLmTensor*> b = TinyLmTensorList(config, std::as_const(grad_b));
  double largest = 0;
  for (std::size_t t = 0; t < g.size(); ++t) {
    for (std::size_t e = 0; e < g[t]->values.size(); ++e) {
      const double expected = (static_cast<double>(a[t]->values[e]) + b[t]->values[e]) / 2;
      largest = std::max(largest, std::abs(expected));
      EXPECT_NEAR(g[t]->values[e], expected, 1e-6 + 1e-4 * std::abs(expected)) << g[t]->name << "[" << e << "]";
    }
  }
  EXPECT_GT(largest, 1e-3);  // the comparison had gradients to compare
  // Every flag set is the plain loss, bitwise.
  TinyLmParams plain, ones;
  TinyLmLoss(config, params, tokens, 2, 9, &plain);
  TinyLmLoss(config, params, tokens, 2, 9, &ones, std::vector<std::uint8_t>(18, 1));
  EXPECT_EQ(TinyLmTensorList(config, plain)[0]->values, TinyLmTensorList(config, ones)[0]->values);
  ExpectError([&] { TinyLmLoss(config, params, tokens, 2, 9, nullptr, std::vector<std::uint8_t>(18, 0)); },
              {"scored", "at least one"});
  ExpectError([&] { TinyLmLoss(config, params, tokens, 2, 9, nullptr, std::vector<std::uint8_t>(5, 1)); },
              {"scored.size() = 5", "batch * length = 18"});
}

// The prediction is the byte of least loss: no other target scores lower.
TEST(TinyLmTasks, ThePredictionIsTheMostLikelyByte) {
  const TinyLmConfig config = SmallConfig(4);
  const TinyLmParams params = testing::RandomTinyParams(config, 5);
  // 256 rows of the same inputs, row b's last target the byte b.
  const std::vector<std::uint8_t> row = testing::RandomBytes(1, 4, 6);
  std::vector<std::uint8_t> tokens;
  for (int byte = 0; byte < 256; ++byte) {
    tokens.insert(tokens.end(), row.begin(), row.end() - 1);
    tokens.push_back(static_cast<std::uint8_t>(byte));
  }
  const TinyLmLossResult r = TinyLmLoss(config, params, tokens, 256, 4);
  const std::uint8_t predicted = r.prediction[3];
  for (int byte = 0; byte < 256; ++byte) {
    EXPECT_EQ(r.prediction[byte * 4 + 3], predicted);  // the same inputs
    EXPECT_GE(r.token_loss[byte * 4 + 3], r.token_loss[predicted * 4 + 3]) << byte;
  }
}

// A model trained on copy at L solves it at L: the loss on answers, the
// batches and the evaluation fit together (chance is 1/26).
TEST(TinyLmTasks, TrainingOnCopyLearnsIt) {
#ifdef POSENC_SANITIZED
  // 200 steps are 10-30x slower under a sanitizer; the code they run (the
  // masked loss, the task batches, the evaluation) is checked there by the
  // tests above and by posenc tasks' CLI test.
  GTEST_SKIP() << "a learning test: release build only";
#endif
  TinyLmConfig config = SmallConfig(12);
  config.d_model = 32;
  TinyLmTrainOptions options;
  options.tokens = 40000;
  options.batch = 16;
  options.lr = 1e-2;
  options.min_lr = 1e-3;
  const std::vector<TinyLmTask> tasks{TinyLmTask::kCopy};
  const TinyLmTrainResult trained = TrainTinyLm(
      config, options, [&](std::int64_t step) { return MakeTinyLmTaskBatch(tasks, 12, options.batch, 0, step); });
  const TinyLmTaskEvalResult at_l = EvaluateTinyLmTask(config, trained.params, TinyLmTask::kCopy, 12, 64, 99);
  EXPECT_GT(at_l.Accuracy(), 0.9) << "answer loss " << at_l.loss;
  EXPECT_EQ(at_l.outcomes.size(), 64u * 5);
}

TEST(TinyLmTasks, EvaluationBadInput) {
  const TinyLmConfig config = SmallConfig(12);
  const TinyLmParams params = InitTinyLm(config, 0);
  ExpectError([&] { EvaluateTinyLmTask(config, params, TinyLmTask::kCopy, 12, 0, 0); }, {"sequences = 0"});
  const std::vector<double> depths{0.5, -0.1};
  ExpectError([&] { EvaluateTinyLmTask(config, params, TinyLmTask::kNeedle, 12, 2, 0, depths); },
              {"depth = -0.1", "[0, 1]"});
  TinyLmConfig alibi = config;
  alibi.scheme = AlibiScheme{};
  ExpectError(
      [&] {
        EvaluateTinyLmTask(alibi, InitTinyLm(alibi, 0), TinyLmTask::kCopy, 24, 2, 0, {}, ParseContextExtension("yarn"));
      },
      {"applies to RoPE models only"});
}

}  // namespace
}  // namespace posenc
