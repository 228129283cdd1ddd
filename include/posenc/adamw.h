// The optimizer of posenc's training engine: AdamW, its learning-rate
// schedule and global gradient-norm clipping, on float32 tensors.
//
// A training step is, in this order (the order torch users write):
//
//   norm = ClipGradNorm(grads, max_norm);          // all tensors at once
//   adamw.Step(params_and_grads, LearningRate(schedule, step));
//
// AdamW (Loshchilov & Hutter 2019, "Decoupled Weight Decay Regularization")
// exactly as torch.optim.AdamW (amsgrad=False, maximize=False) computes it.
// For each element of a tensor, with t its tensor's step count after the
// increment, lr this step's learning rate and wd 0 for an excluded tensor:
//
//   t     += 1
//   p     *= 1 - lr * wd                      decoupled: not part of the gradient
//   m      = beta1 * m + (1 - beta1) * g
//   v      = beta2 * v + (1 - beta2) * g^2
//   p     -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
//
// m and v are float32, as torch keeps them. Each element's new m, v and p are
// computed in double from the float32 values and each rounded to float32
// once; torch rounds after every float32 operation, so the two agree to a few
// units in the last place, not bitwise (tests/cpp/adamw_test.cc holds them to
// 1e-6 relative against numbers from torch, tests/data/make_adamw_oracle.py;
// measured: at most 4.3e-7). Every element is updated from its own values only, so results are
// bitwise identical for any thread count.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace posenc {

struct AdamWOptions {
  // The learning rate Step(params) uses; Step(params, lr) overrides it per
  // step (a schedule). Required: 0 is refused.
  double lr = 0.0;
  double beta1 = 0.9;
  // 0.95, not torch's default 0.999: GPT-3, Chinchilla, Llama, nanoGPT and
  // llm.c train language models with 0.95. v then averages the squared
  // gradient over ~20 steps instead of ~1000, so after a gradient spike the
  // step size recovers within a few dozen steps instead of staying small (or,
  // when v lags a sudden rise, blowing up: the loss spikes of long runs).
  // Set 0.999 to get torch's default.
  double beta2 = 0.95;
  double eps = 1e-8;
  // 0.1 as GPT-3, Llama and nanoGPT (torch's default is 0.01). Multiplied by
  // lr, as torch does: the decay per step follows the schedule.
  double weight_decay = 0.1;

  // Throws posenc::Error naming the first field that breaks its rule: lr > 0
  // and finite, beta1 and beta2 in [0, 1), eps > 0 and finite, weight_decay
  // >= 0 and finite.
  void Validate() const;
};

// One parameter tensor as the optimizer is told about it, once.
struct AdamWTensor {
  std::int64_t size = 0;  // elements, > 0
  // false: no weight decay for this tensor (torch: a parameter group with
  // weight_decay = 0). The caller decides; the usual choice excludes every
  // tensor that is not a matrix: norm scales, biases, position tables.
  bool weight_decay = true;
};

// One tensor's parameters and this step's gradient, in the order the tensors
// were given to the constructor. An empty grad means "no gradient this step"
// (torch: p.grad is None): the tensor is skipped entirely, its step count,
// m and v unchanged and no weight decay applied.
struct AdamWParam {
  std::span<float> param;
  std::span<const float> grad;
};

class AdamW {
 public:
  // Validates the options and every tensor's size (posenc::Error). m and v
  // start at zero, every step count at 0.
  AdamW(const AdamWOptions& options, const std::vector<AdamWTensor>& tensors);

  // One update of every tensor, with options().lr.
  void Step(std::span<const AdamWParam> params);
  // One update with learning rate lr (>= 0 and finite: a warmup starts at 0).
  // Checks everything first, and changes nothing when a check fails: the
  // count of params, each param's size, each grad's size (its tensor's or
  // 0), and that every gradient element is finite (a NaN or infinity would
  // enter m and v for good; the error names the first, as grads[i][j]).
  void Step(std::span<const AdamWParam> params, double lr);

  const AdamWOptions& options() const { return options_; }
  std::int64_t num_tensors() const { return static_cast<std::int64_t>(state_.size()); }
  const AdamWTensor& tensor(std::int64_t i) const;
  // Tensor i's state: updates applied so far (torch's state['step']), first
  // and second moments (exp_avg, exp_avg_sq).
  std::int64_t steps(std::int64_t i) const;
  std::span<const float> m(std::int64_t i) const;
  std::span<const float> v(std::int64_t i) const;

 private:
  struct State {
    AdamWTensor tensor;
    std::int64_t steps = 0;
    std::vector<float> m;
    std::vector<float> v;
  };
  const State& At(std::int64_t i) const;

  AdamWOptions options_;
  std::vector<State> state_;
};

// Linear warmup, then cosine decay (nanoGPT's get_lr, as GPT-3 and Llama
// train). For step s, W = warmup, T = total:
//
//   s <  W:        peak * s / W
//   W <= s < T:    min_lr + (peak - min_lr) * (1 + cos(pi * (s - W) / (T - W))) / 2
//   s >= T:        min_lr
//
// so lr(0) = 0, lr(W) = peak, lr(T) = min_lr, with no jump where the pieces
// meet. Number steps as AdamW counts them, from 1 for the first update: the
// first update then gets peak / W (step 0 is "before any update", lr 0). With
// W = 0 there is no warmup: lr(0) = peak.
struct LrSchedule {
  double peak = 0.0;        // > 0 and finite
  double min_lr = 0.0;      // in [0, peak]
  std::int64_t warmup = 0;  // in [0, total]
  std::int64_t total = 0;   // >= 1: the step at which the decay reaches min_lr

  // Throws posenc::Error naming the first field that breaks its rule.
  void Validate() const;
};

// The schedule at step (>= 0). Validates the schedule and the step.
double LearningRate(const LrSchedule& schedule, std::int64_t step);

// Global L2 gradient clipping, as torch.nn.utils.clip_grad_norm_ (norm_type
// 2, error_if_nonfinite=True):
//
//   norm = sqrt(sum over all tensors and elements of g^2)
//   coef = max_norm / (norm + 1e-6)
//   if coef < 1: every g *= coef
//
// The sum is accumulated in double, tensor after tensor, each in element
// order, on the calling thread: the norm does not depend on the thread
// count. As in torch, a norm within 1e-6 below max_norm is still scaled (by a
// coefficient just under 1). Empty spans (no gradient this step) add nothing.
// Returns the norm before clipping.
//
// max_norm = +infinity never clips: the norm and its check alone.
// Throws posenc::Error, leaving the gradients unchanged, when max_norm is not
// > 0 (NaN included), and when the norm is NaN or infinite ("grad norm = nan":
// the message names the first non-finite element, as grads[i][j]): training
// must stop rather than carry a NaN into the weights.
double ClipGradNorm(std::span<const std::span<float>> grads, double max_norm);

}  // namespace posenc
