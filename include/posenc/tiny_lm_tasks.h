// Synthetic byte-level tasks that need the far context, for "train short,
// test long" measured by what a model can answer rather than by perplexity
// (posenc tasks): Kazemnejad et al. 2023 (copy and other algorithmic tasks),
// Ruoss et al. 2023 (randomized positional encodings), Luo et al. 2022
// (URPE: tasks that depend on positions only), the needle-in-a-haystack and
// associative-recall probes of long-context work.
//
// A sequence is length + 1 bytes (TinyLmLoss's rows: inputs 0..length-1,
// each predicting the byte after it). Its answers are spans of bytes the
// model must predict; every other byte is context, not scored. An answer is
// right when every one of its bytes is the model's most likely byte given
// the true bytes before it (exact match under teacher forcing).
//
//   copy    "<" s "|" s           s: n random letters a-z; every answer byte
//                                 lies exactly n + 1 bytes back. Each copied
//                                 byte is one answer.
//   recall  K v K v ... "|" K v K v ...
//                                 min(26, length / 4) pairs of a key (a
//                                 capital, distinct within a sequence) and a
//                                 lower-case value, "." spread evenly
//                                 between them to fill the length, then as
//                                 many queries of keys drawn from the
//                                 pairs; each query's value is one answer,
//                                 its source anywhere in the context
//                                 (Zoology's multi-query associative recall,
//                                 in bytes).
//   needle  filler "#ddd" filler "?#" ddd
//                                 random letters with a 3-digit needle at a
//                                 chosen depth; the answer is the 3 digits at
//                                 the end.
//   even    "<" s "|" s[0] s[2] s[4] ...
//                                 the bytes of s at even positions (Luo et
//                                 al.'s even-token prediction): which byte to
//                                 give depends on positions alone, the
//                                 distance back shrinks by one each answer.
//
// A format's leftover bytes (when the length does not divide evenly) are
// "." at the start. Everything is a pure function of (task, length, seed,
// index, depth): the same sequences on every machine.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "posenc/context_extension.h"
#include "posenc/tiny_lm.h"
#include "posenc/tiny_lm_train.h"

namespace posenc {

enum class TinyLmTask { kCopy, kRecall, kNeedle, kEven };

std::span<const TinyLmTask> AllTinyLmTasks();
std::string_view TinyLmTaskName(TinyLmTask task);  // "copy", "recall", "needle", "even"
// "copy,recall,needle,even": the names for help texts and errors.
std::string_view TinyLmTaskList();
// Throws posenc::Error "[op] flag = name: must be one of ..." for an unknown name.
TinyLmTask ParseTinyLmTask(std::string_view name, const char* op, const char* flag);

// The shortest length (inputs) a task's format fits in with one answer.
std::int64_t TinyLmTaskMinLength(TinyLmTask task);
// Throws posenc::Error "[op] flag = length: must be in [min, 2^20] for the
// task (its format ...)" naming the task.
void CheckTinyLmTaskLength(TinyLmTask task, std::int64_t length, const char* op, const char* flag);

struct TinyLmTaskAnswer {
  std::int64_t first = 0;  // the prediction of its first byte (predicts tokens[first + 1])
  std::int64_t size = 0;   // bytes
  // Where the bytes it needs lie: the position of their first byte over the
  // length, in [0, 1] (the needle: its placement, 0 before the filler, 1
  // after it), and how far back of the answer's first byte they are.
  double depth = 0.0;
  std::int64_t distance = 0;
};

struct TinyLmTaskSequence {
  std::vector<std::uint8_t> tokens;  // [length + 1]
  std::vector<std::uint8_t> scored;  // [length]: 1 at the predictions of answer bytes (TinyLmLoss's `scored`)
  std::vector<TinyLmTaskAnswer> answers;
};

// Sequence `index` of `task` at `length` from `seed`. `depth` (needle only;
// nullopt: uniform) places the needle at round(depth * (the last position it
// can take)). Throws posenc::Error for a length outside the task's range
// and a depth outside [0, 1] or given to another task.
TinyLmTaskSequence MakeTinyLmTaskSequence(TinyLmTask task, std::int64_t length, std::uint64_t seed, std::int64_t index,
                                          std::optional<double> depth = std::nullopt);

// Which answers a model got right: `predictions` [length] (TinyLmLoss's
// `prediction` of this sequence's row), one flag an answer.
std::vector<bool> TinyLmTaskCorrect(const TinyLmTaskSequence& sequence, std::span<const std::uint8_t> predictions);

// A training row of the previous-byte stream, index `index` from `seed`:
// "~" then random letters (a-z, A-Z), every prediction but the first
// scored against the byte before its input (TinyLmBatch's targets: not the
// next byte, so that nothing but a head that looks one byte back answers
// it). Recall's answers need an induction circuit whose first half is
// such a head (the key's byte reads the value before it); trained on recall
// alone, the tiny models stop at guessing among the values not yet asked
// for, and a share of these rows lets them form it (Olsson et al. 2022,
// "In-context learning and induction heads", on the two heads).
TinyLmBatch MakeTinyLmPreviousByteRow(std::int64_t length, std::uint64_t seed, std::int64_t index);

// A training batch of tasks: row r of step `step` is sequence i = step *
// batch + r of task tasks[i % tasks.size()] at `length` from `seed`, or
// previous-byte row i where floor((i + 1) previous_share) > floor(i
// previous_share) (that share of the rows, spread evenly) (TrainTinyLm's
// TinyLmBatchSource: tokens and the answers' bytes scored; with a share,
// every row's targets given). previous_share in [0, 1).
TinyLmBatch MakeTinyLmTaskBatch(std::span<const TinyLmTask> tasks, std::int64_t length, std::int64_t batch,
                                std::uint64_t seed, std::int64_t step, double previous_share = 0.0);

// One answer of an evaluation.
struct TinyLmTaskOutcome {
  double depth = 0.0;         // TinyLmTaskAnswer's
  std::int64_t distance = 0;  // TinyLmTaskAnswer's
  bool correct = false;
};

struct TinyLmTaskEvalResult {
  std::vector<TinyLmTaskOutcome> outcomes;  // sequence by sequence, each one's answers in order
  double loss = 0.0;                        // mean nats per answer byte
  double seconds = 0.0;

  std::int64_t Correct() const;
  double Accuracy() const;  // Correct() / outcomes.size()
};

// Sequences 0..sequences-1 of `task` at `length` from `seed` through the
// model (several a TinyLmLoss call, no gradients), under `method` as
// EvaluateTinyLm runs it (RoPE models only; none: as trained). `depths`
// (needle only; empty: uniform) gives `sequences` needles at each depth,
// depth by depth. Throws posenc::Error for a length outside the task's
// range, sequences < 1, a bad depth, a method the model cannot take, and
// logits that are NaN or past what a log-softmax resolves (TinyLmLoss).
TinyLmTaskEvalResult EvaluateTinyLmTask(const TinyLmConfig& config, const TinyLmParams& params, TinyLmTask task,
                                        std::int64_t length, std::int64_t sequences, std::uint64_t seed,
                                        std::span<const double> depths = {},
                                        const std::optional<ContextExtension>& method = std::nullopt);

}  // namespace posenc
