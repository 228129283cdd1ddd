// Complex order (Wang et al., ICLR 2020, "Encoding word order in complex
// embeddings"; FreedomIntelligence/complex-order): the input row of word j
// at position t is, per complex dimension c < D = d/2,
//   f(j, t)_c = r_jc e^{i (w_jc t + theta_jc)}
// laid out as its real parts [0, D) then its imaginary parts [D, d):
//   x_c = r cos(w t + theta),  x_{D+c} = r sin(w t + theta)
// Amplitude r, frequency w and initial phase theta are trained per word
// (complex_amplitude / complex_frequency / complex_phase.weight [256, D]).
// So f(j, t + k) = e^{i w_j k} f(j, t): a shift is a per-word rotation that
// depends on k alone, the paper's relative-order property. What is not
// kept: the paper's complex-valued layers (the blocks here are the real
// model of every scheme, fed the real and imaginary parts) — so the
// token_embd matrix is the output projection only.
//
// Init as the authors' nn.Embedding: r ~ Normal(0, 0.02) (this model's
// embedding scale), w ~ Normal(0, 1) (nn.Embedding's default), theta ~
// U(0, 2 pi). None decays. Any position runs: the phase is defined at every
// t. The kernel runs it as NoPE (word order lives in the input).
#include <cmath>
#include <numbers>

#include "posenc/error.h"
#include "train/scheme_trainer.h"
#include "train/tensor_init.h"

namespace posenc::tiny_lm {
namespace {

enum ComplexTensor : std::size_t { kAmplitude, kFrequency, kPhase };

class ComplexOrderTrainer final : public SchemeTrainer {
 public:
  using SchemeTrainer::SchemeTrainer;

  std::vector<SchemeTensor> Tensors(std::int64_t layer) const override {
    if (layer != kModelWide) return {};
    const std::vector<std::int64_t> shape{TinyLmConfig::kVocab, config().d_model / 2};
    return {{.name = "complex_amplitude.weight",
             .shape = shape,
             .init = [](TinyLmTensor& t, std::uint64_t seed) { FillNormal(t, seed, 0.02); }},
            {.name = "complex_frequency.weight",
             .shape = shape,
             .init = [](TinyLmTensor& t, std::uint64_t seed) { FillNormal(t, seed, 1.0); }},
            {.name = "complex_phase.weight", .shape = shape, .init = [](TinyLmTensor& t, std::uint64_t seed) {
               FillUniform(t, seed, 0.0, 2 * std::numbers::pi);
             }}};
  }

  std::vector<double> InputEmbedding(const TinyLmParams& params, std::span<const std::uint8_t> inputs,
                                     std::span<const std::int64_t> positions) const override {
    const std::int64_t d = config().d_model, half = d / 2;
    std::vector<double> x(inputs.size() * static_cast<std::size_t>(d));
    for (std::size_t n = 0; n < inputs.size(); ++n) {
      const Word w = WordAt(params, inputs[n]);
      const auto t = static_cast<double>(positions[n % positions.size()]);
      for (std::int64_t c = 0; c < half; ++c) {
        const double phase = w.frequency[c] * t + w.phase[c];
        x[n * d + c] = w.amplitude[c] * std::cos(phase);
        x[n * d + half + c] = w.amplitude[c] * std::sin(phase);
      }
    }
    return x;
  }

  // dr = dre cos + dim sin; dphase = r (dim cos - dre sin); dw = t dphase; dtheta = dphase.
  void InputEmbeddingBackward(const TinyLmParams& params, std::span<const std::uint8_t> inputs,
                              std::span<const std::int64_t> positions, std::span<const double> dx,
                              TinyLmParams& grads) const override {
    const std::int64_t d = config().d_model, half = d / 2;
    std::vector<double> da(grads.scheme[kAmplitude].values.size(), 0.0), df(da.size(), 0.0), dp(da.size(), 0.0);
    for (std::size_t n = 0; n < inputs.size(); ++n) {
      const Word w = WordAt(params, inputs[n]);
      const auto t = static_cast<double>(positions[n % positions.size()]);
      const std::size_t row = inputs[n] * static_cast<std::size_t>(half);
      for (std::int64_t c = 0; c < half; ++c) {
        const double phase = w.frequency[c] * t + w.phase[c];
        const double re = dx[n * d + c], im = dx[n * d + half + c];
        const double cos = std::cos(phase), sin = std::sin(phase);
        const double dphase = w.amplitude[c] * (im * cos - re * sin);
        da[row + c] += re * cos + im * sin;
        df[row + c] += t * dphase;
        dp[row + c] += dphase;
      }
    }
    for (std::size_t e = 0; e < da.size(); ++e) {
      grads.scheme[kAmplitude].values[e] += static_cast<float>(da[e]);
      grads.scheme[kFrequency].values[e] += static_cast<float>(df[e]);
      grads.scheme[kPhase].values[e] += static_cast<float>(dp[e]);
    }
  }

  std::optional<PositionEncoding> KernelEncoding(const TinyLmParams& /*params*/,
                                                 std::int64_t /*layer*/) const override {
    return NoPositionEncoding{};  // word order is in the input, not in attention
  }

 private:
  struct Word {
    const float* amplitude;
    const float* frequency;
    const float* phase;
  };
  Word WordAt(const TinyLmParams& params, std::uint8_t token) const {
    const std::size_t row = token * static_cast<std::size_t>(config().d_model / 2);
    return {params.scheme[kAmplitude].values.data() + row, params.scheme[kFrequency].values.data() + row,
            params.scheme[kPhase].values.data() + row};
  }
};

}  // namespace

std::unique_ptr<SchemeTrainer> MakeSchemeTrainer(const ComplexOrderScheme& /*scheme*/, const TinyLmConfig& config) {
  Require(config.d_model % 2 == 0, "tiny_lm", "d_model", config.d_model,
          "must be even for complex-order (a complex dimension is a real and an imaginary part)");
  return std::make_unique<ComplexOrderTrainer>(config);
}

}  // namespace posenc::tiny_lm
