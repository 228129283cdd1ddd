// Training the tiny byte-level model (tiny_lm.h) on a corpus, for "train
// short, test long": every scheme is trained at one length L = train_length
// with the same data, init seed, optimizer and budget, then evaluated at
// 1x..16x L (tiny_lm_eval.h) from a checkpoint (tiny_lm_checkpoint.h).
//
// One step s = 1..S (S = ceil(tokens / (batch * L))):
//
//   rows   = batch windows of L + 1 corpus bytes (TinyLmBatchOffsets)
//   loss   = TinyLmLoss(config, params, rows, batch, L, &grads)
//   norm   = ClipGradNorm(grads, grad_clip)
//   AdamW.Step(params, grads, LearningRate({lr, min_lr, warmup, S}, s))
//
// Weight decay (TinyLmTensor::decays) follows nanoGPT for the model's own
// tensors (decay the matrices, not the norm gains), and no scheme's tensor
// is decayed (learned position_embd, Shaw's attn_rel_k / attn_rel_v, T5's
// attn_rel_b, KERPLE's r1 and r2, FIRE's MLP): they are what the study
// compares, and decaying them would put a pull towards "no position
// information" on exactly the learned schemes (T5 itself was trained with
// Adafactor and no weight decay). The token embedding (tied to the output)
// is decayed, as nanoGPT does.
//
// Everything is a pure function of (config, options, corpus): the init is
// InitTinyLm(config, seed), the batches are counters through SplitMix64,
// and TinyLmLoss, ClipGradNorm and AdamW are bitwise identical for any
// thread count, so the trained parameters are too.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "posenc/tiny_lm.h"

namespace posenc {

struct TinyLmTrainOptions {
  std::int64_t tokens = 0;  // the budget in predicted bytes, > 0; the last step may pass it by < one batch
  std::int64_t batch = 16;  // sequences per step
  std::int64_t seed = 0;    // >= 0: the init (InitTinyLm) and the batches
  double lr = 2e-3;         // the peak learning rate
  double min_lr = 2e-4;     // where the cosine ends, in [0, lr]
  double warmup = 0.05;     // the share of the steps with a linear warmup, in [0, 1]
  double weight_decay = 0.1;
  double grad_clip = 1.0;  // global L2 norm (ClipGradNorm); +infinity: never clip
  double beta1 = 0.9;
  double beta2 = 0.95;
  std::int64_t log_every = 1;  // a log entry every this many steps (and the last)

  // Throws posenc::Error "[train] parameter = value: rule" for the first
  // field that breaks its rule, the config's own rules (train_length >= 2,
  // ...) first, then batch * train_length within one TinyLmLoss call, then
  // the peak memory of training (EstimateTinyLmTrainMemory) within this
  // machine's physical memory: a model or a batch too large for the machine
  // is an error naming the estimate and the limit before anything is
  // allocated, not a bad_alloc after minutes of work.
  void Validate(const TinyLmConfig& config) const;
  // ceil(tokens / (batch * train_length)).
  std::int64_t Steps(const TinyLmConfig& config) const;
  // round(warmup * Steps).
  std::int64_t WarmupSteps(const TinyLmConfig& config) const;
};

// The peak memory of TrainTinyLm in bytes, by part, counted from the
// buffers the code keeps (P = TinyLmParameterCount, N = batch *
// train_length rows, d, F, H, L as in tiny_lm.h):
//   model        5 P floats: the parameters, their gradients, AdamW's two
//                moments, and the next step's zeroed gradients while the
//                last ones are freed
//   activations  per row: L (8d + 2F + 2) floats kept for the backward pass
//                (tiny_lm_model.cc's BlockActivations), 256 logits and their
//                gradient, the residual stream and its gradients, one block's
//                backward temporaries (2F + 5d); the scheme's float64
//                partials per (sequence, head) of its biases and tables
//   log          one TinyLmTrainLogEntry every log_every steps (nothing
//                else grows with the number of steps)
struct TinyLmTrainMemory {
  double model = 0, activations = 0, log = 0;
  double Total() const { return model + activations + log; }
};
TinyLmTrainMemory EstimateTinyLmTrainMemory(const TinyLmConfig& config, const TinyLmTrainOptions& options);

// The start of each row of step `step` (0-based): `batch` offsets in
// [0, corpus_bytes - (length + 1)], row r's a pure function of (seed, step,
// r), uniform over the range. Throws posenc::Error naming the corpus when it
// is shorter than one window of length + 1 bytes.
std::vector<std::int64_t> TinyLmBatchOffsets(std::int64_t corpus_bytes, std::int64_t length, std::int64_t batch,
                                             std::int64_t seed, std::int64_t step);

// Every byte TrainTinyLm(config, options, corpus) reads, in its order: the
// rows of each step (batch windows of train_length + 1 bytes, at
// TinyLmBatchOffsets), concatenated; options.Steps(config) * batch *
// (train_length + 1) bytes. The data a baseline fitted on "the bytes the model
// saw" is fitted on. Throws posenc::Error as TrainTinyLm does for the options
// and a corpus shorter than one window.
std::vector<std::uint8_t> TinyLmTrainingBytes(const TinyLmConfig& config, const TinyLmTrainOptions& options,
                                              std::span<const std::uint8_t> corpus);

// The seed of step `step`'s (0-based) randomized positions when
// config.position_range > 0 (RandomizedPositions): a pure function of
// (seed, step), apart from the batches' stream.
std::uint64_t TinyLmStepPositionSeed(std::int64_t seed, std::int64_t step);

struct TinyLmTrainLogEntry {
  std::int64_t step = 0;    // 1-based
  std::int64_t tokens = 0;  // predicted bytes so far
  double loss = 0.0;        // this step's batch loss (nats per byte), before the update
  // The mean batch loss of the steps since the previous entry (this one
  // included): the learning curve without one batch's noise.
  double mean_loss = 0.0;
  double lr = 0.0;
  double grad_norm = 0.0;  // before clipping
};

struct TinyLmTrainProgress {
  std::int64_t step = 0, steps = 0;
  std::int64_t tokens = 0;  // so far
  double loss = 0.0;        // this step's
  double tokens_per_s = 0.0;
};

struct TinyLmTrainResult {
  TinyLmParams params;
  std::vector<TinyLmTrainLogEntry> log;  // every log_every steps, and the last
  std::int64_t steps = 0;
  std::int64_t tokens = 0;  // steps * batch * train_length
  double final_loss = 0.0;  // the mean batch loss of the last min(10, steps) steps
  double seconds = 0.0;
  double tokens_per_s = 0.0;
};

// The model FLOPs of one training step on `batch` sequences of `length`
// (the MFU convention: what the model needs, not what an implementation
// recomputes), 2 flops a multiply-add:
//
//   forward  = 2 N P  +  layers * batch * 2 d length (length + 1)
//   step     = 3 * forward        (the backward pass: dX and dW of every
//                                  product, twice the forward's)
//
// with N = batch * length predicted bytes and P = layers (3d^2 + d^2 + 2 d F)
// + 256 d the weights in matrix products (qkv, output, up, down, and the
// tied output projection). The second term is causal attention: per layer,
// sequence and head, q.k over the length (length + 1) / 2 pairs of j <= i and
// as many p v products, hd wide each. Scheme-specific work (the rotation,
// the biases, Shaw's relative products), the norms, GELU and the softmax
// are not counted.
double TinyLmTrainStepFlops(const TinyLmConfig& config, std::int64_t batch, std::int64_t length);

// One step's sequences: tokens [batch, train_length + 1] (inputs and the
// next byte), and which predictions the loss scores ([batch, train_length],
// TinyLmLoss's `scored`; empty: every one).
struct TinyLmBatch {
  std::vector<std::uint8_t> tokens;
  std::vector<std::uint8_t> scored;
  std::vector<std::uint8_t> targets;  // empty: the next bytes (TinyLmLoss's targets)
};
// The batch of step `step` (0-based), a pure function of the step (and of
// what the source was made from: a seed, a corpus), so that training stays
// a pure function of its inputs.
using TinyLmBatchSource = std::function<TinyLmBatch(std::int64_t step)>;

// Trains from InitTinyLm(config, options.seed) on the batches of `batches`
// (a task's sequences, tiny_lm_tasks.h). Throws posenc::Error for bad
// options (Validate), a batch of another size, and a non-finite loss or
// gradient ("[train] step = 17: ..." naming the step and the first bad
// element).
TinyLmTrainResult TrainTinyLm(const TinyLmConfig& config, const TinyLmTrainOptions& options,
                              const TinyLmBatchSource& batches,
                              const std::function<void(const TinyLmTrainProgress&)>& progress = {});

// Trains from InitTinyLm(config, options.seed) on windows of `corpus`.
// `progress` (may be empty) is called after every step, on the calling
// thread. Throws posenc::Error for bad options (Validate), a corpus shorter
// than one window, and a non-finite loss or gradient ("[train] step = 17:
// ..." naming the step and the first bad element).
TinyLmTrainResult TrainTinyLm(const TinyLmConfig& config, const TinyLmTrainOptions& options,
                              std::span<const std::uint8_t> corpus,
                              const std::function<void(const TinyLmTrainProgress&)>& progress = {});

}  // namespace posenc
