#include "posenc/adamw.h"

#include <cmath>
#include <numbers>
#include <optional>
#include <string>
#include <string_view>

#include "posenc/error.h"
#include "posenc/parallel.h"

namespace posenc {
namespace {

constexpr const char* kAdamW = "adamw";
constexpr const char* kSchedule = "lr_schedule";
constexpr const char* kClip = "clip_grad_norm";

// Elements a thread takes at least: an update is ~20 flops an element, so
// tensors below this size are not worth waking workers for.
constexpr std::int64_t kMinChunk = 1 << 14;

std::string Indexed(std::string_view name, std::size_t i) { return std::string(name) + "[" + std::to_string(i) + "]"; }

// Where the first non-finite element of grads is (tensor, element), if any:
// tensor after tensor, each in element order.
struct Location {
  std::size_t tensor = 0, element = 0;
};
std::optional<Location> FirstNonFinite(std::span<const std::span<const float>> grads) {
  for (std::size_t i = 0; i < grads.size(); ++i) {
    for (std::size_t j = 0; j < grads[i].size(); ++j) {
      if (!std::isfinite(grads[i][j])) return Location{.tensor = i, .element = j};
    }
  }
  return std::nullopt;
}

// One tensor's update (the formula in adamw.h), elements [begin, end).
struct Update {
  double decay;         // 1 - lr * wd
  double beta1, beta2;  // the options'
  double step_size;     // lr / (1 - beta1^t)
  double bias2_sqrt;    // sqrt(1 - beta2^t)
  double eps;
  float* param;
  const float* grad;
  float* m;
  float* v;

  void operator()(std::int64_t begin, std::int64_t end) const {
    for (std::int64_t i = begin; i < end; ++i) {
      const double g = grad[i];
      const double new_m = beta1 * m[i] + (1.0 - beta1) * g;
      const double new_v = beta2 * v[i] + (1.0 - beta2) * g * g;
      // The update uses the stored (float32) m and v, as torch's does.
      m[i] = static_cast<float>(new_m);
      v[i] = static_cast<float>(new_v);
      const double denom = std::sqrt(static_cast<double>(v[i])) / bias2_sqrt + eps;
      param[i] = static_cast<float>(param[i] * decay - step_size * m[i] / denom);
    }
  }
};

}  // namespace

void AdamWOptions::Validate() const {
  Require(std::isfinite(lr) && lr > 0.0, kAdamW, "lr", lr, "must be a finite number > 0");
  Require(beta1 >= 0.0 && beta1 < 1.0, kAdamW, "beta1", beta1, "must be in [0, 1)");
  Require(beta2 >= 0.0 && beta2 < 1.0, kAdamW, "beta2", beta2, "must be in [0, 1)");
  Require(std::isfinite(eps) && eps > 0.0, kAdamW, "eps", eps, "must be a finite number > 0");
  Require(std::isfinite(weight_decay) && weight_decay >= 0.0, kAdamW, "weight_decay", weight_decay,
          "must be a finite number >= 0");
}

AdamW::AdamW(const AdamWOptions& options, const std::vector<AdamWTensor>& tensors) : options_(options) {
  options_.Validate();
  state_.reserve(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::int64_t size = tensors[i].size;
    Require(size > 0, kAdamW, Indexed("tensors", i) + ".size", size, "must be > 0");
    state_.push_back({.tensor = tensors[i],
                      .m = std::vector<float>(static_cast<std::size_t>(size), 0.0F),
                      .v = std::vector<float>(static_cast<std::size_t>(size), 0.0F)});
  }
}

void AdamW::Step(std::span<const AdamWParam> params) { Step(params, options_.lr); }

void AdamW::Step(std::span<const AdamWParam> params, double lr) {
  // Every check before the first write: a failed step leaves the state as it was.
  Require(std::isfinite(lr) && lr >= 0.0, kAdamW, "lr", lr, "must be a finite number >= 0");
  Require(params.size() == state_.size(), kAdamW, "params.size()", params.size(),
          "must equal the number of tensors given to the constructor (" + std::to_string(state_.size()) + ")");
  std::vector<std::span<const float>> grads;
  grads.reserve(params.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto size = static_cast<std::size_t>(state_[i].tensor.size);
    Require(params[i].param.size() == size, kAdamW, Indexed("params", i) + ".param.size()", params[i].param.size(),
            "must equal the tensor's size (" + std::to_string(size) + ")");
    Require(params[i].grad.empty() || params[i].grad.size() == size, kAdamW, Indexed("params", i) + ".grad.size()",
            params[i].grad.size(), "must equal the tensor's size (" + std::to_string(size) + ") or be 0 (no gradient)");
    grads.push_back(params[i].grad);
  }
  if (const auto bad = FirstNonFinite(grads)) {
    const float g = grads[bad->tensor][bad->element];
    ThrowError(kAdamW, Indexed(Indexed("params", bad->tensor) + ".grad", bad->element), FormatValue(g),
               "gradients must be finite (a NaN or infinity would stay in m and v)");
  }

  for (std::size_t i = 0; i < params.size(); ++i) {
    if (params[i].grad.empty()) continue;
    State& state = state_[i];
    state.steps += 1;
    const auto t = static_cast<double>(state.steps);
    const double wd = state.tensor.weight_decay ? options_.weight_decay : 0.0;
    const Update update{.decay = 1.0 - lr * wd,
                        .beta1 = options_.beta1,
                        .beta2 = options_.beta2,
                        .step_size = lr / (1.0 - std::pow(options_.beta1, t)),
                        .bias2_sqrt = std::sqrt(1.0 - std::pow(options_.beta2, t)),
                        .eps = options_.eps,
                        .param = params[i].param.data(),
                        .grad = params[i].grad.data(),
                        .m = state.m.data(),
                        .v = state.v.data()};
    ParallelFor(state.tensor.size, kMinChunk, update);
  }
}

const AdamW::State& AdamW::At(std::int64_t i) const {
  Require(i >= 0 && i < num_tensors(), kAdamW, "tensor", i, "must be in [0, " + std::to_string(num_tensors()) + ")");
  return state_[static_cast<std::size_t>(i)];
}

const AdamWTensor& AdamW::tensor(std::int64_t i) const { return At(i).tensor; }
std::int64_t AdamW::steps(std::int64_t i) const { return At(i).steps; }
std::span<const float> AdamW::m(std::int64_t i) const { return At(i).m; }
std::span<const float> AdamW::v(std::int64_t i) const { return At(i).v; }

void LrSchedule::Validate() const {
  Require(std::isfinite(peak) && peak > 0.0, kSchedule, "peak", peak, "must be a finite number > 0");
  Require(min_lr >= 0.0 && min_lr <= peak, kSchedule, "min_lr", min_lr,
          "must be in [0, peak] (peak = " + FormatValue(peak) + ")");
  Require(total >= 1, kSchedule, "total", total, "must be >= 1");
  Require(warmup >= 0 && warmup <= total, kSchedule, "warmup", warmup,
          "must be in [0, total] (total = " + std::to_string(total) + ")");
}

double LearningRate(const LrSchedule& schedule, std::int64_t step) {
  schedule.Validate();
  Require(step >= 0, kSchedule, "step", step, "must be >= 0");
  const auto s = static_cast<double>(step);
  const auto w = static_cast<double>(schedule.warmup);
  if (step < schedule.warmup) return schedule.peak * s / w;
  if (step >= schedule.total) return schedule.min_lr;
  const double ratio = (s - w) / (static_cast<double>(schedule.total) - w);
  const double coeff = 0.5 * (1.0 + std::cos(std::numbers::pi * ratio));
  return schedule.min_lr + coeff * (schedule.peak - schedule.min_lr);
}

double ClipGradNorm(std::span<const std::span<float>> grads, double max_norm) {
  Require(max_norm > 0.0, kClip, "max_norm", max_norm, "must be > 0 (+inf: never clip)");
  double sum = 0.0;
  for (const auto& grad : grads) {
    for (const float g : grad) sum += static_cast<double>(g) * g;
  }
  const double norm = std::sqrt(sum);
  if (!std::isfinite(norm)) {
    const std::vector<std::span<const float>> view(grads.begin(), grads.end());
    std::string where;
    if (const auto bad = FirstNonFinite(view)) {
      where = "; the first non-finite gradient element is " + Indexed(Indexed("grads", bad->tensor), bad->element) +
              " = " + FormatValue(view[bad->tensor][bad->element]);
    }
    ThrowError(kClip, "grad norm", FormatValue(norm), "must be finite" + where);
  }
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1.0) {
    for (const auto& grad : grads) {
      ParallelFor(static_cast<std::int64_t>(grad.size()), kMinChunk, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t j = begin; j < end; ++j) grad[j] = static_cast<float>(grad[j] * coef);
      });
    }
  }
  return norm;
}

}  // namespace posenc
