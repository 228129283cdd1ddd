// The training loop of the tiny model (include/posenc/tiny_lm_train.h):
// options, batches, the weight-decay rule, and the steps.
#include "posenc/tiny_lm_train.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <string>
#include <vector>

#include "posenc/adamw.h"
#include "posenc/error.h"
#include "posenc/input_file.h"
#include "util/split_mix64.h"
#include "train/scheme_trainer.h"
#include "train/tiny_lm_internal.h"

namespace posenc {
namespace {

constexpr const char* kOp = "train";

// Mirrors TinyLmLoss's limit on batch * length (tiny_lm_config.cc).
constexpr std::int64_t kMaxBatchTokens = std::int64_t{1} << 24;
// Steps averaged into final_loss.
constexpr std::int64_t kFinalLossSteps = 10;

// Keeps the batch stream apart from InitTinyLm's streams of the same seed.
constexpr std::uint64_t kBatchSalt = 0x6261746368657321ULL;  // "batches!"

std::vector<std::uint8_t> GatherRows(std::span<const std::uint8_t> corpus, const std::vector<std::int64_t>& offsets,
                                     std::int64_t window) {
  std::vector<std::uint8_t> rows;
  rows.reserve(offsets.size() * static_cast<std::size_t>(window));
  for (const std::int64_t offset : offsets) {
    const auto begin = corpus.begin() + offset;
    rows.insert(rows.end(), begin, begin + window);
  }
  return rows;
}

// The memory check of Validate: the estimate against this machine's memory,
// naming the parameter of the largest part (the one to make smaller).
void RequireTrainingFits(const TinyLmConfig& config, const TinyLmTrainOptions& options) {
  const TinyLmTrainMemory m = EstimateTinyLmTrainMemory(config, options);
  const std::int64_t log_entries = options.Steps(config) / options.log_every + 1;
  const std::string what = "training (the weights, their gradients and AdamW's moments " + Gibibytes(m.model) +
                           ", one step's activations " + Gibibytes(m.activations) + ", the loss log of " +
                           std::to_string(log_entries) + " entries " + Gibibytes(m.log) + ")";
  const double words = m.Total() / sizeof(float);
  if (m.model >= m.activations && m.model >= m.log) {
    RequireFitsInMemory(kOp, "parameters", TinyLmParameterCount(config), what, words, sizeof(float));
  } else if (m.activations >= m.log) {
    RequireFitsInMemory(kOp, "batch * train_length", options.batch * config.train_length, what, words, sizeof(float));
  } else {
    RequireFitsInMemory(kOp, "log_every", options.log_every, what, words, sizeof(float));
  }
}

}  // namespace

TinyLmTrainMemory EstimateTinyLmTrainMemory(const TinyLmConfig& config, const TinyLmTrainOptions& options) {
  const auto d = static_cast<double>(config.d_model), f = static_cast<double>(config.ffn_hidden);
  const auto layers = static_cast<double>(config.layers);
  const auto rows = static_cast<double>(options.batch * config.train_length);
  constexpr double kFloat = sizeof(float);
  TinyLmTrainMemory m;
  m.model = 5 * kFloat * static_cast<double>(TinyLmParameterCount(config));
  // Floats a row: the kept activations, the logits and their gradient,
  // x, delta, xf, dxf, dx, one block's backward temporaries (dact, dup,
  // din, datt, dqkv), the final 1/rms, the row's float64 loss and its bytes.
  const double per_row =
      layers * (8 * d + 2 * f + 2) + 2 * static_cast<double>(TinyLmConfig::kVocab) + 5 * d + (2 * f + 5 * d) + 4;
  // The scheme's partials (biases, tables) on top.
  m.activations = kFloat * rows * per_row + tiny_lm::MakeSchemeTrainer(config)->ScratchBytes(options.batch);
  const std::int64_t log_entries = options.Steps(config) / options.log_every + 1;  // steps 0, k, 2k, ...
  m.log = sizeof(TinyLmTrainLogEntry) * static_cast<double>(log_entries);
  return m;
}

void TinyLmTrainOptions::Validate(const TinyLmConfig& config) const {
  ValidateTinyLmConfig(config);
  Require(tokens > 0, kOp, "tokens", tokens, "must be > 0 (the training budget in bytes)");
  Require(batch >= 1, kOp, "batch", batch, "must be >= 1");
  Require(batch <= kMaxBatchTokens / config.train_length, kOp, "batch * train_length",
          Verbatim{std::to_string(batch) + " * " + std::to_string(config.train_length)},
          "must be <= " + std::to_string(kMaxBatchTokens) + " tokens a step");
  Require(seed >= 0, kOp, "seed", seed, "must be >= 0");
  Require(std::isfinite(lr) && lr > 0, kOp, "lr", lr, "must be a finite number > 0");
  Require(std::isfinite(min_lr) && min_lr >= 0 && min_lr <= lr, kOp, "min_lr", min_lr,
          "must be in [0, lr = " + FormatValue(lr) + "]");
  Require(warmup >= 0 && warmup <= 1, kOp, "warmup", warmup, "must be in [0, 1] (a share of the steps)");
  Require(std::isfinite(weight_decay) && weight_decay >= 0, kOp, "weight_decay", weight_decay,
          "must be a finite number >= 0");
  Require(grad_clip > 0, kOp, "grad_clip", grad_clip, "must be > 0 (+infinity: never clip)");
  Require(beta1 >= 0 && beta1 < 1, kOp, "beta1", beta1, "must be in [0, 1)");
  Require(beta2 >= 0 && beta2 < 1, kOp, "beta2", beta2, "must be in [0, 1)");
  Require(log_every >= 1, kOp, "log_every", log_every, "must be >= 1");
  RequireTrainingFits(config, *this);
}

std::int64_t TinyLmTrainOptions::Steps(const TinyLmConfig& config) const {
  const std::int64_t per_step = batch * config.train_length;
  return tokens / per_step + (tokens % per_step != 0 ? 1 : 0);
}

std::int64_t TinyLmTrainOptions::WarmupSteps(const TinyLmConfig& config) const {
  return std::llround(warmup * static_cast<double>(Steps(config)));
}

std::vector<std::int64_t> TinyLmBatchOffsets(std::int64_t corpus_bytes, std::int64_t length, std::int64_t batch,
                                             std::int64_t seed, std::int64_t step) {
  Require(length >= 1, kOp, "length", length, "must be >= 1");
  Require(corpus_bytes >= length + 1, kOp, "text", Verbatim{std::to_string(corpus_bytes) + " bytes"},
          "must hold at least one window of train_length + 1 = " + std::to_string(length + 1) +
              " bytes (inputs and the next byte as target)");
  Require(batch >= 1, kOp, "batch", batch, "must be >= 1");
  Require(seed >= 0, kOp, "seed", seed, "must be >= 0");
  Require(step >= 0, kOp, "step", step, "must be >= 0");
  // Offsets 0..range-1. x % range is uniform up to range / 2^64 (< 1e-12 for
  // any corpus that fits in memory): no rejection loop, no hidden state.
  const auto range = static_cast<std::uint64_t>(corpus_bytes - length);
  const std::uint64_t step_key = SplitMix64(SplitMix64(SplitMix64(static_cast<std::uint64_t>(seed) ^ kBatchSalt)) +
                                            static_cast<std::uint64_t>(step));
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(batch));
  for (std::int64_t r = 0; r < batch; ++r) {
    offsets[r] = static_cast<std::int64_t>(SplitMix64(step_key + static_cast<std::uint64_t>(r)) % range);
  }
  return offsets;
}

std::vector<std::uint8_t> TinyLmTrainingBytes(const TinyLmConfig& config, const TinyLmTrainOptions& options,
                                              std::span<const std::uint8_t> corpus) {
  options.Validate(config);
  const std::int64_t length = config.train_length, steps = options.Steps(config);
  const auto corpus_bytes = static_cast<std::int64_t>(corpus.size());
  std::vector<std::uint8_t> bytes;
  bytes.reserve(static_cast<std::size_t>(steps * options.batch * (length + 1)));
  for (std::int64_t step = 0; step < steps; ++step) {
    const std::vector<std::uint8_t> rows =
        GatherRows(corpus, TinyLmBatchOffsets(corpus_bytes, length, options.batch, options.seed, step), length + 1);
    bytes.insert(bytes.end(), rows.begin(), rows.end());
  }
  return bytes;
}

double TinyLmTrainStepFlops(const TinyLmConfig& config, std::int64_t batch, std::int64_t length) {
  const auto d = static_cast<double>(config.d_model), f = static_cast<double>(config.ffn_hidden);
  const auto layers = static_cast<double>(config.layers), t = static_cast<double>(length);
  const double weights = layers * (4 * d * d + 2 * d * f) + static_cast<double>(TinyLmConfig::kVocab) * d;
  const double forward =
      2 * static_cast<double>(batch) * t * weights + layers * static_cast<double>(batch) * 2 * d * t * (t + 1);
  return 3 * forward;
}

std::uint64_t TinyLmStepPositionSeed(std::int64_t seed, std::int64_t step) {
  constexpr std::uint64_t kPositionSalt = 0x706f736974696f6eULL;  // "position"
  return SplitMix64(SplitMix64(static_cast<std::uint64_t>(seed) ^ kPositionSalt) + static_cast<std::uint64_t>(step));
}

TinyLmTrainResult TrainTinyLm(const TinyLmConfig& config, const TinyLmTrainOptions& options,
                              std::span<const std::uint8_t> corpus,
                              const std::function<void(const TinyLmTrainProgress&)>& progress) {
  options.Validate(config);
  const std::int64_t length = config.train_length;
  const auto corpus_bytes = static_cast<std::int64_t>(corpus.size());
  TinyLmBatchOffsets(corpus_bytes, length, 1, options.seed, 0);  // the corpus check, before any work
  return TrainTinyLm(
      config, options,
      [&](std::int64_t step) {
        return TinyLmBatch{
            .tokens = GatherRows(corpus, TinyLmBatchOffsets(corpus_bytes, length, options.batch, options.seed, step),
                                 length + 1)};
      },
      progress);
}

TinyLmTrainResult TrainTinyLm(const TinyLmConfig& config, const TinyLmTrainOptions& options,
                              const TinyLmBatchSource& batches,
                              const std::function<void(const TinyLmTrainProgress&)>& progress) {
  options.Validate(config);
  const std::int64_t length = config.train_length, steps = options.Steps(config);
  const std::int64_t step_tokens = options.batch * length;

  TinyLmTrainResult result;
  result.params = InitTinyLm(config, static_cast<std::uint64_t>(options.seed));
  const std::vector<TinyLmTensor*> params = TinyLmTensorList(config, result.params);
  std::vector<AdamWTensor> tensors;
  tensors.reserve(params.size());
  for (const TinyLmTensor* t : params) {
    tensors.push_back({.size = static_cast<std::int64_t>(t->values.size()), .weight_decay = t->decays});
  }
  AdamW adamw({.lr = options.lr, .beta1 = options.beta1, .beta2 = options.beta2, .weight_decay = options.weight_decay},
              tensors);
  const LrSchedule schedule{
      .peak = options.lr, .min_lr = options.min_lr, .warmup = options.WarmupSteps(config), .total = steps};

  TinyLmParams grads;
  // The last kFinalLossSteps losses, step s at s % kFinalLossSteps: nothing
  // kept grows with the number of steps (a budget of 1e11 bytes is 5e7 steps).
  std::array<double, kFinalLossSteps> last_losses{};
  const auto start = std::chrono::steady_clock::now();
  const auto seconds_since_start = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  double losses_since_log = 0.0;  // the batch losses of the steps since the last log entry
  std::int64_t steps_since_log = 0;
  for (std::int64_t step = 1; step <= steps; ++step) {
    const TinyLmBatch batch = batches(step - 1);
    // Randomized positions: one ordered subset of [0, M) a step, shared by
    // its sequences (as the authors' implementation draws one a batch).
    const std::vector<std::int64_t> positions =
        config.position_range > 0
            ? RandomizedPositions(config.position_range, length, TinyLmStepPositionSeed(options.seed, step - 1))
            : std::vector<std::int64_t>();
    const double loss = TinyLmLoss(config, result.params, batch.tokens, options.batch, length, &grads, batch.scored,
                                   positions, batch.targets)
                            .loss;
    Require(std::isfinite(loss), kOp, "step", step,
            "the loss is " + FormatValue(loss) + " (diverged; try a lower lr or a grad_clip)");
    std::vector<TinyLmTensor*> grad_tensors = TinyLmTensorList(config, grads);
    std::vector<std::span<float>> grad_spans;
    std::vector<AdamWParam> updates;
    grad_spans.reserve(params.size());
    updates.reserve(params.size());
    for (std::size_t i = 0; i < params.size(); ++i) {
      grad_spans.emplace_back(grad_tensors[i]->values);
      updates.push_back({.param = params[i]->values, .grad = grad_tensors[i]->values});
    }
    for (const TinyLmTensor* g : grad_tensors) {  // before ClipGradNorm, to name the tensor
      for (std::size_t e = 0; e < g->values.size(); ++e) {
        if (!std::isfinite(g->values[e])) {
          ThrowError(kOp, "step", std::to_string(step),
                     "the gradient of " + g->name + "[" + std::to_string(e) + "] is " + FormatValue(g->values[e]) +
                         " (diverged; try a lower lr)");
        }
      }
    }
    const double norm = ClipGradNorm(grad_spans, options.grad_clip);
    const double lr = LearningRate(schedule, step);
    adamw.Step(updates, lr);
    last_losses[static_cast<std::size_t>(step % kFinalLossSteps)] = loss;
    const std::int64_t tokens = step * step_tokens;
    losses_since_log += loss;
    ++steps_since_log;
    if (step % options.log_every == 0 || step == steps) {
      result.log.push_back({.step = step,
                            .tokens = tokens,
                            .loss = loss,
                            .mean_loss = losses_since_log / static_cast<double>(steps_since_log),
                            .lr = lr,
                            .grad_norm = norm});
      losses_since_log = 0.0;
      steps_since_log = 0;
    }
    if (progress) {
      const double seconds = seconds_since_start();
      progress({.step = step,
                .steps = steps,
                .tokens = tokens,
                .loss = loss,
                .tokens_per_s = seconds > 0 ? static_cast<double>(tokens) / seconds : 0.0});
    }
  }
  result.steps = steps;
  result.tokens = steps * step_tokens;
  result.seconds = seconds_since_start();
  result.tokens_per_s = result.seconds > 0 ? static_cast<double>(result.tokens) / result.seconds : 0.0;
  const std::int64_t tail = std::min(kFinalLossSteps, steps);
  for (std::int64_t s = steps - tail + 1; s <= steps; ++s) {
    result.final_loss += last_losses[static_cast<std::size_t>(s % kFinalLossSteps)];
  }
  result.final_loss /= static_cast<double>(tail);
  return result;
}

}  // namespace posenc
