// FLOATER (Liu et al., ICML 2020, "Learning to Encode Position for
// Transformer with Continuous Dynamical Model"; xuanqing94/FLOATER): a
// position term per layer l, p_l(t) [d], added to the layer's attention
// input, from one shared dynamics
//   dp/dt = h(t, p) = W2 tanh(W1 p + u t + b1) + b2,   p_l(0) trained per layer
// at t_i = dt i. Every layer's state is integrated together, once per pass:
// `substeps` fixed RK4 steps between two positions (rk4.h), and the
// backward goes through the unrolled steps (the exact gradient of the
// discrete solution; no adjoint ODE). Any position can be evaluated: past
// the training length the solver integrates further.
//
// The authors keep the sinusoidal input encoding on beside FLOATER (their
// dynamics model a correction of it); here FLOATER is alone, so that the
// zoo compares it as one scheme against the others (with the sinusoid the
// row would mix two schemes).
//
// Tensors (none decays): floater_in.weight [hidden, d] Normal(0, 1/sqrt d),
// floater_time.weight [hidden] Normal(0, 1), floater_in.bias [hidden]
// Normal(0, 1), floater_out.weight [d, hidden] Normal(0, 0.02),
// floater_out.bias [d] 0, and per layer blk.N.attn_floater_p0.weight [d]
// Normal(0, 0.02). The kernel runs it as NoPE (the positions are in the
// layer's input).
#include <algorithm>
#include <cmath>
#include <string>

#include "posenc/error.h"
#include "train/scheme_trainer.h"
#include "train/schemes/rk4.h"
#include "train/tensor_init.h"
#include "train/tiny_lm_internal.h"

namespace posenc::tiny_lm {
namespace {

enum FloaterTensor : std::size_t { kIn, kTime, kInBias, kOut, kOutBias };

// h(t, p) on every layer's row of the state [L, d], float64. Each matrix is
// kept in both layouts so that every loop is an axpy over contiguous
// memory (the compiler vectorizes those; reductions it would not):
// in_ [hidden][d] and in_t_ [d][hidden], out_ [d][hidden] and out_t_
// [hidden][d]. The parameter gradients accumulate in the transposed
// layouts and are turned back at the end (Grads::In, Grads::Out).
class Dynamics {
 public:
  Dynamics(const TinyLmParams& params, std::int64_t d, std::int64_t hidden) : d_(d), hidden_(hidden) {
    const std::vector<TinyLmTensor>& t = params.scheme;
    in_.assign(t[kIn].values.begin(), t[kIn].values.end());
    out_.assign(t[kOut].values.begin(), t[kOut].values.end());
    in_t_.resize(in_.size());
    out_t_.resize(out_.size());
    for (std::int64_t o = 0; o < hidden; ++o) {
      for (std::int64_t c = 0; c < d; ++c) {
        in_t_[c * hidden + o] = in_[o * d + c];
        out_t_[o * d + c] = out_[c * hidden + o];
      }
    }
    time_.assign(t[kTime].values.begin(), t[kTime].values.end());
    in_bias_.assign(t[kInBias].values.begin(), t[kInBias].values.end());
    out_bias_.assign(t[kOutBias].values.begin(), t[kOutBias].values.end());
  }

  // tanh(W1 y + u t + b1) of one row y [d] into a [hidden].
  void Hidden(double t, const double* y, double* a) const {
    for (std::int64_t o = 0; o < hidden_; ++o) a[o] = in_bias_[o] + time_[o] * t;
    for (std::int64_t c = 0; c < d_; ++c) {
      const double* w = in_t_.data() + c * hidden_;
      const double yc = y[c];
      for (std::int64_t o = 0; o < hidden_; ++o) a[o] += w[o] * yc;
    }
    for (std::int64_t o = 0; o < hidden_; ++o) a[o] = std::tanh(a[o]);
  }

  // out = h(t, y), row by row.
  void operator()(double t, const std::vector<double>& y, std::vector<double>& out) const {
    std::vector<double> a(static_cast<std::size_t>(hidden_));
    for (std::size_t row = 0; row < y.size() / static_cast<std::size_t>(d_); ++row) {
      Hidden(t, y.data() + row * d_, a.data());
      double* f = out.data() + row * d_;
      for (std::int64_t c = 0; c < d_; ++c) f[c] = out_bias_[c];
      for (std::int64_t o = 0; o < hidden_; ++o) {
        const double* w = out_t_.data() + o * d_;
        const double ao = a[o];
        for (std::int64_t c = 0; c < d_; ++c) f[c] += w[c] * ao;
      }
    }
  }

  // The parameters' gradients: in_t [d][hidden], out_t [hidden][d] (the
  // transposed layouts), the vectors as they are.
  struct Grads {
    std::int64_t d, hidden;
    std::vector<double> in_t, time, in_bias, out_t, out_bias;
    std::vector<double> In() const {  // [hidden, d]
      std::vector<double> v(in_t.size());
      for (std::int64_t o = 0; o < hidden; ++o) {
        for (std::int64_t c = 0; c < d; ++c) v[o * d + c] = in_t[c * hidden + o];
      }
      return v;
    }
    std::vector<double> Out() const {  // [d, hidden]
      std::vector<double> v(out_t.size());
      for (std::int64_t o = 0; o < hidden; ++o) {
        for (std::int64_t c = 0; c < d; ++c) v[c * hidden + o] = out_t[o * d + c];
      }
      return v;
    }
  };
  Grads ZeroGrads() const {
    const auto n = static_cast<std::size_t>(d_ * hidden_);
    return {d_,
            hidden_,
            std::vector<double>(n),
            std::vector<double>(static_cast<std::size_t>(hidden_)),
            std::vector<double>(static_cast<std::size_t>(hidden_)),
            std::vector<double>(n),
            std::vector<double>(static_cast<std::size_t>(d_))};
  }

  // gy = (dh/dy)^T g at (t, y), row by row; the parameters' share into grads.
  void Vjp(double t, const std::vector<double>& y, const std::vector<double>& g, std::vector<double>& gy,
           Grads& grads) const {
    std::vector<double> a(static_cast<std::size_t>(hidden_)), dz(a.size());
    for (std::size_t row = 0; row < y.size() / static_cast<std::size_t>(d_); ++row) {
      const double* yr = y.data() + row * d_;
      const double* gr = g.data() + row * d_;
      Hidden(t, yr, a.data());
      for (std::int64_t c = 0; c < d_; ++c) grads.out_bias[c] += gr[c];
      std::fill(dz.begin(), dz.end(), 0.0);
      for (std::int64_t c = 0; c < d_; ++c) {  // dz = W2^T g (then times tanh')
        const double* w = out_.data() + c * hidden_;
        const double gc = gr[c];
        for (std::int64_t o = 0; o < hidden_; ++o) dz[o] += w[o] * gc;
      }
      for (std::int64_t o = 0; o < hidden_; ++o) {
        double* dw = grads.out_t.data() + o * d_;
        const double ao = a[o];
        for (std::int64_t c = 0; c < d_; ++c) dw[c] += gr[c] * ao;
        dz[o] *= 1.0 - ao * ao;
        grads.time[o] += dz[o] * t;
        grads.in_bias[o] += dz[o];
      }
      double* gyr = gy.data() + row * d_;
      std::fill(gyr, gyr + d_, 0.0);
      for (std::int64_t o = 0; o < hidden_; ++o) {  // gy = W1^T dz
        const double* w = in_.data() + o * d_;
        const double dzo = dz[o];
        for (std::int64_t c = 0; c < d_; ++c) gyr[c] += w[c] * dzo;
      }
      for (std::int64_t c = 0; c < d_; ++c) {  // dW1 += dz y^T
        double* dw = grads.in_t.data() + c * hidden_;
        const double yc = yr[c];
        for (std::int64_t o = 0; o < hidden_; ++o) dw[o] += dz[o] * yc;
      }
    }
  }

 private:
  std::int64_t d_, hidden_;
  std::vector<double> in_, in_t_, out_, out_t_, time_, in_bias_, out_bias_;
};

class FloaterTrainer final : public SchemeTrainer {
 public:
  FloaterTrainer(const FloaterScheme& scheme, const TinyLmConfig& config) : SchemeTrainer(config), scheme_(scheme) {
    RequireInRange(scheme.hidden, 1, kMaxWidth, "floater_hidden", "");
    RequireInRange(scheme.substeps, 1, 1000, "floater_substeps", " (RK4 steps between two positions)");
    Require(std::isfinite(scheme.dt) && scheme.dt > 0, kOp, "floater_dt", scheme.dt, "must be a finite number > 0");
  }

  std::vector<SchemeTensor> Tensors(std::int64_t layer) const override {
    const std::int64_t d = config().d_model, hidden = scheme_.hidden;
    const auto normal = [](double stddev) {
      return [stddev](TinyLmTensor& t, std::uint64_t seed) { FillNormal(t, seed, stddev); };
    };
    if (layer != kModelWide) {
      return {{.name = "blk." + std::to_string(layer) + ".attn_floater_p0.weight", .shape = {d}, .init = normal(0.02)}};
    }
    return {
        {.name = "floater_in.weight", .shape = {hidden, d}, .init = normal(1.0 / std::sqrt(static_cast<double>(d)))},
        {.name = "floater_time.weight", .shape = {hidden}, .init = normal(1.0)},
        {.name = "floater_in.bias", .shape = {hidden}, .init = normal(1.0)},
        {.name = "floater_out.weight", .shape = {d, hidden}, .init = normal(0.02)},
        {.name = "floater_out.bias", .shape = {d}, .init = [](TinyLmTensor& t, std::uint64_t /*seed*/) {
           FillConstant(t, 0.0f);
         }}};
  }

  std::vector<std::vector<double>> LayerInputPositions(const TinyLmParams& params, std::int64_t length) const override {
    return Solve(params, length, nullptr);
  }

  void LayerInputPositionsBackward(const TinyLmParams& params, std::int64_t length,
                                   const std::vector<std::vector<double>>& dpositions,
                                   TinyLmParams& grads) const override {
    if (length == 0) return;  // no position: no gradient
    std::vector<Rk4Stages> stages;
    Solve(params, length, &stages);
    const Dynamics dynamics(params, config().d_model, scheme_.hidden);
    Dynamics::Grads g = dynamics.ZeroGrads();
    const std::int64_t d = config().d_model, layers = config().layers;
    std::vector<double> adjoint(static_cast<std::size_t>(layers * d), 0.0);
    const auto add_output = [&](std::int64_t i) {  // d loss / d p_l(t_i)
      for (std::int64_t l = 0; l < layers; ++l) {
        for (std::int64_t c = 0; c < d; ++c) adjoint[l * d + c] += dpositions[static_cast<std::size_t>(l)][i * d + c];
      }
    };
    const double h = scheme_.dt / static_cast<double>(scheme_.substeps);
    const auto vjp = [&](double t, const std::vector<double>& y, const std::vector<double>& gk,
                         std::vector<double>& gy) { dynamics.Vjp(t, y, gk, gy, g); };
    for (std::int64_t i = length - 1; i >= 1; --i) {
      add_output(i);
      for (std::int64_t s = scheme_.substeps - 1; s >= 0; --s) {
        const std::int64_t step = (i - 1) * scheme_.substeps + s;
        Rk4StepBackward(vjp, StepTime(step), h, stages[static_cast<std::size_t>(step)], adjoint);
      }
    }
    add_output(0);
    const auto add = [](TinyLmTensor& t, const std::vector<double>& v, std::size_t offset = 0) {
      for (std::size_t e = 0; e < t.values.size(); ++e) t.values[e] += static_cast<float>(v[offset + e]);
    };
    add(grads.scheme[kIn], g.In());
    add(grads.scheme[kTime], g.time);
    add(grads.scheme[kInBias], g.in_bias);
    add(grads.scheme[kOut], g.Out());
    add(grads.scheme[kOutBias], g.out_bias);
    for (std::int64_t l = 0; l < layers; ++l) {
      add(grads.blocks[static_cast<std::size_t>(l)].scheme[0], adjoint, static_cast<std::size_t>(l * d));
    }
  }

  std::optional<PositionEncoding> KernelEncoding(const TinyLmParams& /*params*/,
                                                 std::int64_t /*layer*/) const override {
    return NoPositionEncoding{};  // the positions are in the layer's input
  }

 private:
  double StepTime(std::int64_t step) const {
    return static_cast<double>(step) * scheme_.dt / static_cast<double>(scheme_.substeps);
  }

  // [L][T, d]: p_l(t_i); every RK4 step's stages into `stages` when non-null.
  std::vector<std::vector<double>> Solve(const TinyLmParams& params, std::int64_t length,
                                         std::vector<Rk4Stages>* stages) const {
    const std::int64_t d = config().d_model, layers = config().layers;
    const Dynamics dynamics(params, d, scheme_.hidden);
    std::vector<double> state;  // [L, d]
    for (const TinyLmBlock& block : params.blocks) {
      state.insert(state.end(), block.scheme[0].values.begin(), block.scheme[0].values.end());
    }
    std::vector<std::vector<double>> out(static_cast<std::size_t>(layers),
                                         std::vector<double>(static_cast<std::size_t>(length * d)));
    const auto record = [&](std::int64_t i) {
      for (std::int64_t l = 0; l < layers; ++l) {
        std::copy_n(state.begin() + l * d, d, out[static_cast<std::size_t>(l)].begin() + i * d);
      }
    };
    if (length == 0) return out;  // no position, not even p_l(0), to record
    record(0);
    const double h = scheme_.dt / static_cast<double>(scheme_.substeps);
    if (stages) stages->resize(static_cast<std::size_t>(std::max<std::int64_t>(length - 1, 0) * scheme_.substeps));
    for (std::int64_t i = 1; i < length; ++i) {
      for (std::int64_t s = 0; s < scheme_.substeps; ++s) {
        const std::int64_t step = (i - 1) * scheme_.substeps + s;
        Rk4Step(dynamics, StepTime(step), h, state, stages ? &(*stages)[static_cast<std::size_t>(step)] : nullptr);
      }
      record(i);
    }
    return out;
  }

  FloaterScheme scheme_;
};

}  // namespace

std::unique_ptr<SchemeTrainer> MakeSchemeTrainer(const FloaterScheme& scheme, const TinyLmConfig& config) {
  return std::make_unique<FloaterTrainer>(scheme, config);
}

}  // namespace posenc::tiny_lm
