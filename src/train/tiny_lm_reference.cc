// The tiny model's loss in float64, one sequence at a time, each piece a
// function written as its formula reads. It shares with the float32 path
// only the library's encodings (sinusoid, learned table, ALiBi slopes, T5
// buckets, Shaw rows, RoPE rotation) and the call's checks; the tests take
// its finite differences as the true gradients.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "posenc/alibi.h"
#include "posenc/rope.h"
#include "posenc/rope_frequencies.h"
#include "posenc/shaw_relative.h"
#include "posenc/t5_bias.h"
#include "train/tiny_lm_internal.h"

namespace posenc::reference {
namespace {

using Matrix = std::vector<std::vector<double>>;  // [rows][cols]

// y = x W^T, W [out, in] row-major.
Matrix Linear(const Matrix& x, const TinyLmTensor& w) {
  const std::int64_t out = w.shape[0], in = w.shape[1];
  Matrix y(x.size(), std::vector<double>(static_cast<std::size_t>(out), 0.0));
  for (std::size_t t = 0; t < x.size(); ++t) {
    for (std::int64_t o = 0; o < out; ++o) {
      for (std::int64_t i = 0; i < in; ++i) y[t][o] += w.values[o * in + i] * x[t][i];
    }
  }
  return y;
}

// y = x / sqrt(mean(x^2) + eps) * gain, per row.
Matrix RmsNorm(const Matrix& x, const TinyLmTensor& gain, double eps) {
  Matrix y = x;
  for (std::vector<double>& row : y) {
    double mean_square = 0.0;
    for (const double v : row) mean_square += v * v / static_cast<double>(row.size());
    const double inv_rms = 1.0 / std::sqrt(mean_square + eps);
    for (std::size_t c = 0; c < row.size(); ++c) row[c] *= inv_rms * gain.values[c];
  }
  return y;
}

double Gelu(double u) {
  return 0.5 * u * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (u + 0.044715 * u * u * u)));
}

Matrix Add(Matrix a, const Matrix& b) {
  for (std::size_t t = 0; t < a.size(); ++t) {
    for (std::size_t c = 0; c < a[t].size(); ++c) a[t][c] += b[t][c];
  }
  return a;
}

// The scheme's bias of head h for query i and key j (ALiBi, T5, KERPLE).
double PairBias(const TinyLmConfig& config, const TinyLmParams& params, std::int64_t layer, std::int64_t h,
                std::int64_t i, std::int64_t j) {
  switch (config.scheme) {
    case PositionScheme::kAlibi: {
      const double slope = AlibiSlopes(AlibiSpec{.heads = config.heads})[h];
      return AlibiBiasAt(AlibiForm::kDistance, slope, i, j);
    }
    case PositionScheme::kT5: {
      const T5BucketSpec spec{
          .num_buckets = config.t5_buckets, .max_distance = config.t5_max_distance, .direction = T5Direction::kCausal};
      return params.attn_rel_b.values[T5RelativeBucket(spec, j - i) * config.heads + h];  // [buckets, heads]
    }
    case PositionScheme::kKerple: {
      const TinyLmBlock& block = params.blocks[static_cast<std::size_t>(layer)];
      const double r1 = tiny_lm::Softplus(block.attn_kerple_r1.values[h]);
      const double r2 = tiny_lm::Softplus(block.attn_kerple_r2.values[h]);
      return -r1 * std::log(1.0 + r2 * static_cast<double>(std::abs(i - j)));
    }
    default: return 0.0;
  }
}

// Head h's slice [T][hd] of column block `part` (0 q, 1 k, 2 v) of qkv.
Matrix HeadSlice(const Matrix& qkv, std::int64_t part, std::int64_t h, std::int64_t d, std::int64_t hd) {
  Matrix out;
  for (const std::vector<double>& row : qkv) {
    const auto begin = row.begin() + part * d + h * hd;
    out.emplace_back(begin, begin + hd);
  }
  return out;
}

double Dot(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0.0;
  for (std::size_t e = 0; e < a.size(); ++e) sum += a[e] * b[e];
  return sum;
}

// Causal multi-head attention of layer `layer` over one sequence: qkv [T][3d] -> [T][d].
Matrix Attention(const TinyLmConfig& config, const TinyLmParams& params, std::int64_t layer, const Matrix& qkv) {
  const std::int64_t length = static_cast<std::int64_t>(qkv.size()), d = config.d_model, hd = config.HeadDim();
  const TinyLmBlock& block = params.blocks[static_cast<std::size_t>(layer)];
  const bool shaw = config.scheme == PositionScheme::kShaw;
  const ShawRelativeSpec shaw_spec{.max_distance = config.shaw_clip, .distance = RelativeDistance::kKeyMinusQuery};
  const auto table_row = [&](const TinyLmTensor& table, std::int64_t i, std::int64_t j) {
    const std::int64_t r = shaw_spec.Row(i, j);
    return std::vector<double>(table.values.begin() + r * hd, table.values.begin() + (r + 1) * hd);
  };
  Matrix out(static_cast<std::size_t>(length), std::vector<double>(static_cast<std::size_t>(d), 0.0));
  for (std::int64_t h = 0; h < config.heads; ++h) {
    Matrix q = HeadSlice(qkv, 0, h, d, hd), k = HeadSlice(qkv, 1, h, d, hd), v = HeadSlice(qkv, 2, h, d, hd);
    if (config.scheme == PositionScheme::kRope) {
      const RopeSpec spec = TinyLmRopeSpec(config);
      const std::vector<double> inv_freq = ComputeRopeFrequencies(spec, length).inv_freq;
      for (std::int64_t t = 0; t < length; ++t) {
        q[t] = RotateHead(spec, inv_freq, q[t], static_cast<double>(t));
        k[t] = RotateHead(spec, inv_freq, k[t], static_cast<double>(t));
      }
    }
    for (std::int64_t i = 0; i < length; ++i) {
      std::vector<double> scores(static_cast<std::size_t>(i + 1));
      for (std::int64_t j = 0; j <= i; ++j) {
        double content = Dot(q[i], k[j]);
        if (shaw) content += Dot(q[i], table_row(block.attn_rel_k, i, j));
        scores[j] = content / std::sqrt(static_cast<double>(hd)) + PairBias(config, params, layer, h, i, j);
      }
      const double max = *std::max_element(scores.begin(), scores.end());
      double sum = 0.0;
      for (double& s : scores) sum += (s = std::exp(s - max));
      for (std::int64_t j = 0; j <= i; ++j) {
        const double p = scores[j] / sum;
        std::vector<double> value = v[j];
        if (shaw) {
          const std::vector<double> a_v = table_row(block.attn_rel_v, i, j);
          for (std::int64_t e = 0; e < hd; ++e) value[e] += a_v[e];
        }
        for (std::int64_t e = 0; e < hd; ++e) out[i][h * hd + e] += p * value[e];
      }
    }
  }
  return out;
}

// x + attention(RmsNorm(x)), then + mlp(RmsNorm(.)).
Matrix Block(const TinyLmConfig& config, const TinyLmParams& params, std::int64_t layer, const Matrix& x) {
  const TinyLmBlock& block = params.blocks[static_cast<std::size_t>(layer)];
  const Matrix qkv = Linear(RmsNorm(x, block.attn_norm, config.norm_eps), block.attn_qkv);
  const Matrix mid = Add(x, Linear(Attention(config, params, layer, qkv), block.attn_output));
  Matrix hidden = Linear(RmsNorm(mid, block.ffn_norm, config.norm_eps), block.ffn_up);
  for (std::vector<double>& row : hidden) {
    for (double& u : row) u = Gelu(u);
  }
  return Add(mid, Linear(hidden, block.ffn_down));
}

// token_embd rows of the inputs times the embedding scale, plus the
// positions (sinusoid, learned).
Matrix Embed(const TinyLmConfig& config, const TinyLmParams& params, std::span<const std::uint8_t> inputs) {
  const std::int64_t length = static_cast<std::int64_t>(inputs.size()), d = config.d_model;
  const std::vector<double> positions = tiny_lm::InputPositions(config, params, length);
  const double scale = tiny_lm::EmbeddingScale(config);
  Matrix x;
  for (std::int64_t t = 0; t < length; ++t) {
    std::vector<double> row(static_cast<std::size_t>(d));
    for (std::int64_t c = 0; c < d; ++c) {
      row[c] = scale * params.token_embd.values[inputs[t] * d + c] + (positions.empty() ? 0.0 : positions[t * d + c]);
    }
    x.push_back(std::move(row));
  }
  return x;
}

// -log softmax(logits)[target] at each position of one sequence [length + 1].
std::vector<double> SequenceLosses(const TinyLmConfig& config, const TinyLmParams& params,
                                   std::span<const std::uint8_t> sequence) {
  const std::span<const std::uint8_t> inputs = sequence.first(sequence.size() - 1);
  Matrix x = Embed(config, params, inputs);
  for (std::int64_t l = 0; l < config.layers; ++l) x = Block(config, params, l, x);
  const Matrix logits = Linear(RmsNorm(x, params.output_norm, config.norm_eps), params.token_embd);  // tied
  std::vector<double> losses;
  for (std::size_t t = 0; t < logits.size(); ++t) {
    const double max = *std::max_element(logits[t].begin(), logits[t].end());
    double sum = 0.0;
    for (const double l : logits[t]) sum += std::exp(l - max);
    losses.push_back(max + std::log(sum) - logits[t][sequence[t + 1]]);
  }
  return losses;
}

}  // namespace

TinyLmLossResult TinyLmLoss(const TinyLmConfig& config, const TinyLmParams& params,
                            std::span<const std::uint8_t> tokens, std::int64_t batch, std::int64_t length) {
  tiny_lm::ValidateLossCall(config, params, tokens, batch, length, false);
  TinyLmLossResult result;
  result.position_loss.assign(static_cast<std::size_t>(length), 0.0);
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::vector<double> losses = SequenceLosses(config, params, tokens.subspan(b * (length + 1), length + 1));
    for (std::int64_t t = 0; t < length; ++t) result.position_loss[t] += losses[t] / static_cast<double>(batch);
  }
  for (const double l : result.position_loss) result.loss += l / static_cast<double>(length);
  return result;
}

}  // namespace posenc::reference
