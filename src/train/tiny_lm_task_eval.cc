// Training batches of the synthetic tasks and their evaluation
// (include/posenc/tiny_lm_tasks.h): the sequences through TinyLmLoss, each
// answer checked against the model's most likely bytes.
#include <algorithm>
#include <chrono>
#include <string>

#include "posenc/error.h"
#include "posenc/tiny_lm_eval.h"
#include "posenc/tiny_lm_tasks.h"
#include "train/tiny_lm_internal.h"

namespace posenc {
namespace {

constexpr const char* kOp = "tasks";
// Predictions per TinyLmLoss call, as EvaluateTinyLmAt's.
constexpr std::int64_t kBatchTokens = 8192;

}  // namespace

TinyLmBatch MakeTinyLmTaskBatch(std::span<const TinyLmTask> tasks, std::int64_t length, std::int64_t batch,
                                std::uint64_t seed, std::int64_t step, double previous_share) {
  Require(!tasks.empty(), kOp, "tasks", Verbatim{"(none)"}, "must list at least one task");
  Require(batch >= 1, kOp, "batch", batch, "must be >= 1");
  Require(step >= 0, kOp, "step", step, "must be >= 0");
  Require(previous_share >= 0 && previous_share < 1, kOp, "previous_share", previous_share,
          "must be in [0, 1) (the share of the rows from the previous-byte stream)");
  const auto previous_row = [&](std::int64_t index) {
    return std::floor(static_cast<double>(index + 1) * previous_share) >
           std::floor(static_cast<double>(index) * previous_share);
  };
  TinyLmBatch out;
  out.tokens.reserve(static_cast<std::size_t>(batch * (length + 1)));
  out.scored.reserve(static_cast<std::size_t>(batch * length));
  for (std::int64_t r = 0; r < batch; ++r) {
    const std::int64_t index = step * batch + r;
    TinyLmBatch row;
    if (previous_row(index)) {
      row = MakeTinyLmPreviousByteRow(length, seed, index);
    } else {
      TinyLmTaskSequence s =
          MakeTinyLmTaskSequence(tasks[static_cast<std::size_t>(index) % tasks.size()], length, seed, index);
      row.tokens = std::move(s.tokens);
      row.scored = std::move(s.scored);
      if (previous_share > 0) row.targets.assign(row.tokens.begin() + 1, row.tokens.end());  // the next bytes
    }
    out.tokens.insert(out.tokens.end(), row.tokens.begin(), row.tokens.end());
    out.scored.insert(out.scored.end(), row.scored.begin(), row.scored.end());
    out.targets.insert(out.targets.end(), row.targets.begin(), row.targets.end());
  }
  return out;
}

std::int64_t TinyLmTaskEvalResult::Correct() const {
  return std::count_if(outcomes.begin(), outcomes.end(), [](const TinyLmTaskOutcome& o) { return o.correct; });
}

double TinyLmTaskEvalResult::Accuracy() const {
  return outcomes.empty() ? 0.0 : static_cast<double>(Correct()) / static_cast<double>(outcomes.size());
}

TinyLmTaskEvalResult EvaluateTinyLmTask(const TinyLmConfig& config, const TinyLmParams& params, TinyLmTask task,
                                        std::int64_t length, std::int64_t sequences, std::uint64_t seed,
                                        std::span<const double> depths, const std::optional<ContextExtension>& method) {
  ValidateTinyLmParams(config, params);
  CheckTinyLmTaskLength(task, length, kOp, "length");
  Require(sequences >= 1, kOp, "sequences", sequences, "must be >= 1");
  // The plan, before any work: its errors name the method's parameters.
  std::optional<ExtensionPlan> plan;
  if (method && !IsModelAsTrained(*method)) plan = PlanTinyLmExtension(config, *method, length);
  // Every sequence first: a bad depth is an error before any work.
  std::vector<TinyLmTaskSequence> all;
  if (depths.empty()) {
    for (std::int64_t i = 0; i < sequences; ++i) all.push_back(MakeTinyLmTaskSequence(task, length, seed, i));
  } else {
    std::int64_t index = 0;
    for (const double depth : depths) {
      for (std::int64_t i = 0; i < sequences; ++i) {
        all.push_back(MakeTinyLmTaskSequence(task, length, seed, index++, depth));
      }
    }
  }
  const auto start = std::chrono::steady_clock::now();
  const auto count = static_cast<std::int64_t>(all.size());
  const std::int64_t per_call = std::clamp<std::int64_t>(kBatchTokens / length, 1, count);
  tiny_lm::KernelAttention kernel;  // every layer under the method's options, or the model's own attention
  if (plan) kernel = [&](std::int64_t /*layer*/) { return plan->attention; };
  TinyLmTaskEvalResult result;
  std::int64_t answer_bytes = 0;
  std::vector<std::uint8_t> rows, scored;
  for (std::int64_t first = 0; first < count; first += per_call) {
    const std::int64_t batch = std::min(per_call, count - first);
    rows.clear();
    scored.clear();
    for (std::int64_t s = first; s < first + batch; ++s) {
      rows.insert(rows.end(), all[s].tokens.begin(), all[s].tokens.end());
      scored.insert(scored.end(), all[s].scored.begin(), all[s].scored.end());
    }
    // Loss refuses NaN and logits past what a log-softmax resolves
    // (logit_range.h): every loss here is finite.
    const TinyLmLossResult loss = tiny_lm::Loss(config, params, rows, batch, length, nullptr, kernel, scored,
                                                tiny_lm::EvaluationPositions(config, length, first));
    const auto bytes =
        static_cast<std::int64_t>(std::count_if(scored.begin(), scored.end(), [](std::uint8_t f) { return f != 0; }));
    result.loss += loss.loss * static_cast<double>(bytes);
    answer_bytes += bytes;
    for (std::int64_t b = 0; b < batch; ++b) {
      const TinyLmTaskSequence& s = all[first + b];
      const std::vector<bool> correct = TinyLmTaskCorrect(
          s,
          std::span(loss.prediction).subspan(static_cast<std::size_t>(b * length), static_cast<std::size_t>(length)));
      for (std::size_t a = 0; a < s.answers.size(); ++a) {
        result.outcomes.push_back(
            {.depth = s.answers[a].depth, .distance = s.answers[a].distance, .correct = correct[a]});
      }
    }
  }
  result.loss /= static_cast<double>(answer_bytes);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace posenc
