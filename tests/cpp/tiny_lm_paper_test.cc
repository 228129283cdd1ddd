// The tiny model's float32 loss (TinyLmLoss) against a float64 model
// written here from the papers, sharing no code with the library: the
// outside oracle beside LossConsistentWithFloat64Reference (whose reference
// shares the schemes' forward terms). The positional terms as published:
// Vaswani et al. 2017, 3.4-3.5 (the token embedding times sqrt(d_model),
// PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i + 1) = cos(...)); Press
// et al. 2022 (the bias -m_h (i - j), the slopes of their get_slopes:
// 2^(-8 h / n) for n a power of 2, else those of the power below and every
// other one of twice it); Su et al. 2021 with GPT-NeoX's half-split pairs
// (dimension i with i + hd/2, angle pos * theta^(-2i/hd)). The rest is the
// model's definition (include/posenc/tiny_lm.h): RMSNorm, a fused qkv,
// softmax(q k^T / sqrt(hd)) v causal, a tanh-GELU MLP, residuals, the
// output tied to the token embedding, the mean cross-entropy.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numbers>
#include <string>
#include <vector>

#include "posenc/tiny_lm.h"
#include "tiny_lm_test_util.h"

namespace posenc {
namespace {

using Rows = std::vector<std::vector<double>>;  // [T][width]

Rows Zeros(std::int64_t rows, std::int64_t cols) {
  return Rows(static_cast<std::size_t>(rows), std::vector<double>(static_cast<std::size_t>(cols), 0.0));
}

// x W^T for W [out, in].
Rows Times(const Rows& x, const TinyLmTensor& w) {
  const std::int64_t out = w.shape[0], in = w.shape[1];
  Rows y = Zeros(static_cast<std::int64_t>(x.size()), out);
  for (std::size_t t = 0; t < x.size(); ++t) {
    for (std::int64_t o = 0; o < out; ++o) {
      for (std::int64_t i = 0; i < in; ++i) y[t][o] += static_cast<double>(w.values[o * in + i]) * x[t][i];
    }
  }
  return y;
}

Rows RmsNorm(const Rows& x, const TinyLmTensor& gain, double eps) {
  Rows y = x;
  for (std::vector<double>& row : y) {
    double squares = 0;
    for (const double v : row) squares += v * v;
    const double inv = 1 / std::sqrt(squares / static_cast<double>(row.size()) + eps);
    for (std::size_t i = 0; i < row.size(); ++i) row[i] *= inv * gain.values[i];
  }
  return y;
}

// Press et al.'s get_slopes (their repository's attention_with_linear_biases).
std::vector<double> PressSlopes(std::int64_t n) {
  const auto power_of_2 = [](std::int64_t m) {
    std::vector<double> s;
    for (std::int64_t h = 1; h <= m; ++h) s.push_back(std::pow(2.0, -8.0 * static_cast<double>(h) / m));
    return s;
  };
  std::int64_t closest = 1;
  while (closest * 2 <= n) closest *= 2;
  std::vector<double> slopes = power_of_2(closest);
  const std::vector<double> twice = power_of_2(2 * closest);
  for (std::int64_t i = 0; static_cast<std::int64_t>(slopes.size()) < n; i += 2) slopes.push_back(twice[i]);
  return slopes;
}

// Rotates the head at columns [offset, offset + hd) of row `row` by position p, half-split pairs.
void Rotate(std::vector<double>& row, std::int64_t offset, std::int64_t hd, double p, double theta) {
  for (std::int64_t i = 0; i < hd / 2; ++i) {
    const double angle = p * std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(hd));
    double &a = row[offset + i], &b = row[offset + i + hd / 2];
    const double a0 = a, b0 = b;
    a = a0 * std::cos(angle) - b0 * std::sin(angle);
    b = a0 * std::sin(angle) + b0 * std::cos(angle);
  }
}

// The mean loss over the sequence's predictions, and each position's.
std::vector<double> PaperLosses(const TinyLmConfig& config, const TinyLmParams& params, const std::uint8_t* sequence,
                                std::int64_t length) {
  const std::int64_t d = config.d_model, heads = config.heads, hd = config.HeadDim();
  const bool sinusoid = std::holds_alternative<SinusoidalScheme>(config.scheme);
  const bool alibi = std::holds_alternative<AlibiScheme>(config.scheme);
  const auto* rope = std::get_if<RopeScheme>(&config.scheme);
  const std::vector<double> slopes = PressSlopes(heads);
  Rows x = Zeros(length, d);
  for (std::int64_t t = 0; t < length; ++t) {
    for (std::int64_t c = 0; c < d; ++c) {
      x[t][c] = params.token_embd.values[sequence[t] * d + c] * (sinusoid ? std::sqrt(static_cast<double>(d)) : 1.0);
      if (sinusoid) {
        const double angle = static_cast<double>(t) / std::pow(10000.0, static_cast<double>(c - c % 2) / d);
        x[t][c] += c % 2 == 0 ? std::sin(angle) : std::cos(angle);
      }
    }
  }
  for (const TinyLmBlock& block : params.blocks) {
    Rows qkv = Times(RmsNorm(x, block.attn_norm, config.norm_eps), block.attn_qkv);
    if (rope) {
      for (std::int64_t t = 0; t < length; ++t) {
        for (std::int64_t h = 0; h < heads; ++h) {
          Rotate(qkv[t], h * hd, hd, static_cast<double>(t), rope->theta);
          Rotate(qkv[t], d + h * hd, hd, static_cast<double>(t), rope->theta);
        }
      }
    }
    Rows attended = Zeros(length, d);
    for (std::int64_t h = 0; h < heads; ++h) {
      for (std::int64_t i = 0; i < length; ++i) {
        std::vector<double> logits(static_cast<std::size_t>(i + 1));
        double top = -INFINITY, total = 0;
        for (std::int64_t j = 0; j <= i; ++j) {
          double dot = 0;
          for (std::int64_t e = 0; e < hd; ++e) dot += qkv[i][h * hd + e] * qkv[j][d + h * hd + e];
          logits[j] = dot / std::sqrt(static_cast<double>(hd)) - (alibi ? slopes[h] * static_cast<double>(i - j) : 0);
          top = std::max(top, logits[j]);
        }
        for (double& l : logits) total += (l = std::exp(l - top));
        for (std::int64_t j = 0; j <= i; ++j) {
          for (std::int64_t e = 0; e < hd; ++e)
            attended[i][h * hd + e] += logits[j] / total * qkv[j][2 * d + h * hd + e];
        }
      }
    }
    const Rows projected = Times(attended, block.attn_output);
    for (std::int64_t t = 0; t < length; ++t) {
      for (std::int64_t c = 0; c < d; ++c) x[t][c] += projected[t][c];
    }
    Rows up = Times(RmsNorm(x, block.ffn_norm, config.norm_eps), block.ffn_up);
    for (std::vector<double>& row : up) {
      for (double& u : row) {
        u = 0.5 * u * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (u + 0.044715 * u * u * u)));
      }
    }
    const Rows down = Times(up, block.ffn_down);
    for (std::int64_t t = 0; t < length; ++t) {
      for (std::int64_t c = 0; c < d; ++c) x[t][c] += down[t][c];
    }
  }
  const Rows logits = Times(RmsNorm(x, params.output_norm, config.norm_eps), params.token_embd);
  std::vector<double> losses;
  for (std::int64_t t = 0; t < length; ++t) {
    double top = -INFINITY, total = 0;
    for (const double l : logits[t]) top = std::max(top, l);
    for (const double l : logits[t]) total += std::exp(l - top);
    losses.push_back(std::log(total) + top - logits[t][sequence[t + 1]]);
  }
  return losses;
}

class TinyLmPaperScheme : public ::testing::TestWithParam<PositionScheme> {};

TEST_P(TinyLmPaperScheme, LossMatchesAModelWrittenFromThePapers) {
  for (const testing::TinyShape& shape : testing::kTinyGrid) {
    const TinyLmConfig config = testing::TinyConfig(GetParam(), shape);
    const TinyLmParams params = testing::RandomTinyParams(config, 7);
    const std::vector<std::uint8_t> tokens = testing::RandomBytes(shape.batch, shape.length, 11);
    const TinyLmLossResult fast = TinyLmLoss(config, params, tokens, shape.batch, shape.length);
    double sum = 0;
    for (std::int64_t b = 0; b < shape.batch; ++b) {
      const std::vector<double> losses = PaperLosses(config, params, &tokens[b * (shape.length + 1)], shape.length);
      for (std::int64_t t = 0; t < shape.length; ++t) {
        EXPECT_NEAR(fast.token_loss[b * shape.length + t], losses[t], 1e-5 * losses[t]) << b << ", " << t;
        sum += losses[t];
      }
    }
    EXPECT_NEAR(fast.loss, sum / static_cast<double>(shape.batch * shape.length), 1e-5 * fast.loss);
  }
}

TEST(TinyLmPaper, PressSlopesAreTheirs) {
  // get_slopes(8) = 1/2, 1/4, ..., 1/256; get_slopes(3) = 2^-4, 2^-8, then 2^-2 from get_slopes(4).
  EXPECT_EQ(PressSlopes(8).front(), 0.5);
  EXPECT_EQ(PressSlopes(8).back(), 1.0 / 256);
  EXPECT_EQ(PressSlopes(3), (std::vector<double>{1.0 / 16, 1.0 / 256, 0.25}));
}

INSTANTIATE_TEST_SUITE_P(Schemes, TinyLmPaperScheme,
                         ::testing::Values(PositionScheme{NopeScheme{}}, PositionScheme{SinusoidalScheme{}},
                                           PositionScheme{AlibiScheme{}}, PositionScheme{RopeScheme{}},
                                           PositionScheme{RopeScheme{.theta = 500.0}}),
                         [](const ::testing::TestParamInfo<PositionScheme>& info) {
                           return std::string(PositionSchemeName(info.param)) + std::to_string(info.index);
                         });

}  // namespace
}  // namespace posenc
