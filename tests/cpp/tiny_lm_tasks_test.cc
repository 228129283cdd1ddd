// The synthetic tasks (tiny_lm_tasks.h): each format checked by what a
// reader of the sequence sees (the answer's bytes are where the task says,
// nothing else tells them), the loss restricted to answers, the model's
// predictions, training on a task, and the bad input.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

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

// Explicit targets: a prediction scored against a given byte has the loss
// the same prediction has when that byte is the next one (the logits at t
// read inputs 0..t only), bitwise; the next bytes given as targets are the
// plain loss and gradients, bitwise.
TEST(TinyLmTasks, ExplicitTargetsScoreThePredictionsAgainstTheGivenBytes) {
  constexpr std::int64_t kLength = 7;
  const TinyLmConfig config = SmallConfig(kLength);
  const TinyLmParams params = testing::RandomTinyParams(config, 5);
  const std::vector<std::uint8_t> tokens = testing::RandomBytes(1, kLength, 6);
  const std::vector<std::uint8_t> targets = testing::RandomBytes(1, kLength - 1, 7);  // kLength bytes
  const TinyLmLossResult given = TinyLmLoss(config, params, tokens, 1, kLength, nullptr, {}, {}, targets);
  // Row t: the inputs up to t, then targets[t] as the next byte.
  std::vector<std::uint8_t> rows;
  for (std::int64_t t = 0; t < kLength; ++t) {
    std::vector<std::uint8_t> row(tokens.begin(), tokens.end());
    row[t + 1] = targets[t];
    rows.insert(rows.end(), row.begin(), row.end());
  }
  const TinyLmLossResult next = TinyLmLoss(config, params, rows, kLength, kLength);
  double sum = 0;
  for (std::int64_t t = 0; t < kLength; ++t) {
    EXPECT_EQ(given.token_loss[t], next.token_loss[t * kLength + t]) << "t = " << t;
    sum += given.token_loss[t];
  }
  EXPECT_NEAR(given.loss, sum / kLength, 1e-12);
  EXPECT_NE(given.loss, TinyLmLoss(config, params, tokens, 1, kLength).loss);  // the targets were used

  const std::vector<std::uint8_t> next_bytes(tokens.begin() + 1, tokens.end());
  TinyLmParams plain, explicit_next;
  const double plain_loss = TinyLmLoss(config, params, tokens, 1, kLength, &plain).loss;
  EXPECT_EQ(TinyLmLoss(config, params, tokens, 1, kLength, &explicit_next, {}, {}, next_bytes).loss, plain_loss);
  const std::vector<const TinyLmTensor*> a = TinyLmTensorList(config, std::as_const(plain));
  const std::vector<const TinyLmTensor*> b = TinyLmTensorList(config, std::as_const(explicit_next));
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i]->values, b[i]->values) << a[i]->name;
  ExpectError([&] { TinyLmLoss(config, params, tokens, 1, kLength, nullptr, {}, {}, std::vector<std::uint8_t>(3)); },
              {"targets.size() = 3", "batch * length = 7"});
}

// A previous-byte row: "~" then letters, each prediction but the first
// scored against the byte before its input, a pure function of its inputs.
TEST(TinyLmTasks, PreviousByteRowsAskForTheByteBeforeEachInput) {
  const TinyLmBatch row = MakeTinyLmPreviousByteRow(40, 3, 17);
  ASSERT_EQ(row.tokens.size(), 41u);
  ASSERT_EQ(row.targets.size(), 40u);
  ASSERT_EQ(row.scored.size(), 40u);
  EXPECT_EQ(row.tokens[0], '~');
  std::set<std::uint8_t> letters;
  for (std::size_t t = 1; t < row.tokens.size(); ++t) {
    EXPECT_TRUE(std::isalpha(row.tokens[t])) << t;
    letters.insert(row.tokens[t]);
  }
  EXPECT_GT(letters.size(), 20u);  // both cases, spread
  EXPECT_EQ(row.scored[0], 0);
  for (std::size_t t = 1; t < row.targets.size(); ++t) {
    EXPECT_EQ(row.scored[t], 1);
    EXPECT_EQ(row.targets[t], row.tokens[t - 1]) << t;
  }
  EXPECT_EQ(MakeTinyLmPreviousByteRow(40, 3, 17).tokens, row.tokens);
  EXPECT_NE(MakeTinyLmPreviousByteRow(40, 3, 18).tokens, row.tokens);
  EXPECT_NE(MakeTinyLmPreviousByteRow(40, 4, 17).tokens, row.tokens);
  ExpectError([] { MakeTinyLmPreviousByteRow(1, 0, 0); }, {"length = 1", "[2, "});
}

// previous_share of the rows, spread evenly over the indices; the task's
// rows are the task's sequences, their targets the next bytes; no share:
// no targets and the batch as before.
TEST(TinyLmTasks, BatchesMixInTheirShareOfPreviousByteRows) {
  constexpr std::int64_t kLength = 12, kBatch = 8;
  const std::vector<TinyLmTask> tasks{TinyLmTask::kRecall};
  std::int64_t previous = 0;
  for (std::int64_t step = 0; step < 4; ++step) {
    const TinyLmBatch batch = MakeTinyLmTaskBatch(tasks, kLength, kBatch, 5, step, 0.25);
    ASSERT_EQ(batch.targets.size(), static_cast<std::size_t>(kBatch * kLength));
    for (std::int64_t r = 0; r < kBatch; ++r) {
      const std::int64_t index = step * kBatch + r;
      const std::span<const std::uint8_t> tokens(batch.tokens.data() + r * (kLength + 1), kLength + 1);
      const std::span<const std::uint8_t> targets(batch.targets.data() + r * kLength, kLength);
      const std::span<const std::uint8_t> scored(batch.scored.data() + r * kLength, kLength);
      const bool is_previous = index % 4 == 3;  // floor((i + 1) / 4) > floor(i / 4)
      previous += is_previous ? 1 : 0;
      if (is_previous) {
        const TinyLmBatch row = MakeTinyLmPreviousByteRow(kLength, 5, index);
        EXPECT_TRUE(std::equal(tokens.begin(), tokens.end(), row.tokens.begin())) << index;
        EXPECT_TRUE(std::equal(targets.begin(), targets.end(), row.targets.begin())) << index;
        EXPECT_TRUE(std::equal(scored.begin(), scored.end(), row.scored.begin())) << index;
      } else {
        const TinyLmTaskSequence s = MakeTinyLmTaskSequence(TinyLmTask::kRecall, kLength, 5, index);
        EXPECT_TRUE(std::equal(tokens.begin(), tokens.end(), s.tokens.begin())) << index;
        EXPECT_TRUE(std::equal(targets.begin(), targets.end(), s.tokens.begin() + 1)) << index;
        EXPECT_TRUE(std::equal(scored.begin(), scored.end(), s.scored.begin())) << index;
      }
    }
  }
  EXPECT_EQ(previous, 8);
  const TinyLmBatch none = MakeTinyLmTaskBatch(tasks, kLength, kBatch, 5, 1);
  EXPECT_TRUE(none.targets.empty());
  EXPECT_EQ(none.tokens, MakeTinyLmTaskBatch(tasks, kLength, kBatch, 5, 1, 0.0).tokens);
  ExpectError([&] { MakeTinyLmTaskBatch(tasks, kLength, kBatch, 5, 0, 1.0); }, {"previous_share = 1", "[0, 1)"});
  ExpectError([&] { MakeTinyLmTaskBatch(tasks, kLength, kBatch, 5, 0, -0.5); }, {"previous_share = -0.5"});
}

// Training reads a batch's targets: the same rows with the previous-byte
// rows' targets dropped (so that they ask for the next byte) train another
// model; with them given as the next bytes, the same model, bitwise.
TEST(TinyLmTasks, TrainingScoresTheBatchTargets) {
  constexpr std::int64_t kLength = 12;
  const TinyLmConfig config = SmallConfig(kLength);
  TinyLmTrainOptions options;
  options.batch = 4;
  options.tokens = 3 * options.batch * kLength;  // 3 steps
  const std::vector<TinyLmTask> tasks{TinyLmTask::kRecall};
  struct Trained {
    double loss;
    std::vector<float> embedding;
  };
  // A model trained on recall batches with `share` previous-byte rows, each
  // batch changed by `edit` first.
  const auto train = [&](double share, const std::function<void(TinyLmBatch&)>& edit) {
    const TinyLmTrainResult result = TrainTinyLm(config, options, [&](std::int64_t step) {
      TinyLmBatch batch = MakeTinyLmTaskBatch(tasks, kLength, options.batch, 0, step, share);
      edit(batch);
      return batch;
    });
    return Trained{result.final_loss, TinyLmTensorList(config, result.params)[0]->values};
  };
  const auto drop_targets = [](TinyLmBatch& batch) { batch.targets.clear(); };
  const Trained given = train(0.5, [](TinyLmBatch&) {}), next = train(0.5, drop_targets);
  EXPECT_NE(given.loss, next.loss);
  EXPECT_NE(given.embedding, next.embedding);
  const Trained plain = train(0, drop_targets),
                next_given = train(0, [&](TinyLmBatch&batch) {
                  const std::int64_t row = kLength + 1;  // tokens a row: the inputs, then the last target
                  for (std::int64_t r = 0; r < options.batch; ++r) {
                    batch.targets.insert(batch.targets.end(), batch.tokens.begin() + r * row + 1,
                                         batch.tokens.begin() + (r + 1) * row);
                  }
                });
  EXPECT_EQ(plain.embedding, next_given.embedding);
  EXPECT_EQ(plain.loss, next_given.loss);
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
