// The tiny model's loss in float64, one sequence at a time, each piece a
// function written as its formula reads, the attention the library's one
// float64 attention (MaterializedAttention). It shares with the float32
// path the schemes' forward terms (their float64 tables: sinusoid, learned
// rows, biases, Shaw rows; the RoPE spec, rotated here by RotateHead) and
// the call's checks; the tests take its finite differences as the true
// gradients, so every scheme's backward is checked against its forward.
#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <span>
#include <numbers>
#include <numeric>
#include <vector>

#include "posenc/rope.h"
#include "posenc/rope_frequencies.h"
#include "reference/materialized_attention.h"
#include "train/scheme_trainer.h"
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

// Head h's slice [T][hd] of column block `part` (0 q, 1 k, 2 v) of qkv.
Matrix HeadSlice(const Matrix& qkv, std::int64_t part, std::int64_t h, std::int64_t d, std::int64_t hd) {
  Matrix out;
  for (const std::vector<double>& row : qkv) {
    const auto begin = row.begin() + part * d + h * hd;
    out.emplace_back(begin, begin + hd);
  }
  return out;
}

double Dot(std::span<const double> a, std::span<const double> b) {
  double sum = 0.0;
  for (std::size_t e = 0; e < a.size(); ++e) sum += a[e] * b[e];
  return sum;
}

// Row r of head h of a table, or nothing when the table is empty.
std::span<const double> TableRow(const tiny_lm::RelativeTableTerm& table, std::int64_t h, std::int64_t distance,
                                 std::int64_t hd) {
  if (table.empty()) return {};
  const std::int64_t row = (table.per_head ? h * table.rows : 0) + table.row_of_distance[distance];
  return std::span<const double>(table.values).subspan(static_cast<std::size_t>(row * hd), hd);
}

// Causal multi-head attention of layer `layer` over one sequence: qkv
// [T][3d] -> [T][d], through the library's one float64 attention
// (MaterializedAttention) given the logits, delta = p_i - p_j,
//   scale (q_i.k_j + u.k_j + q_i.A[delta] + k_j.B[delta]) + bias_h(delta) + pair_h(p_i, delta)
// and the values w(delta) (v_j + C[delta]) (scheme_trainer.h's LayerTerms),
// with q and k rotated first for RoPE (at p_i, p_j). The terms cover the
// positions 0..extent-1.
Matrix Attention(const TinyLmConfig& config, const tiny_lm::SchemeTrainer& scheme, const TinyLmParams& params,
                 std::int64_t layer, const Matrix& qkv, std::span<const std::int64_t> position, std::int64_t extent) {
  const std::int64_t length = static_cast<std::int64_t>(qkv.size()), d = config.d_model, hd = config.HeadDim();
  const std::int64_t heads = config.heads;
  const tiny_lm::LayerTerms terms = scheme.Layer(params, layer, extent);
  std::vector<Matrix> q, k, v;  // [H][T][hd]
  for (std::int64_t h = 0; h < heads; ++h) {
    q.push_back(HeadSlice(qkv, 0, h, d, hd));
    k.push_back(HeadSlice(qkv, 1, h, d, hd));
    v.push_back(HeadSlice(qkv, 2, h, d, hd));
    if (const std::optional<RopeSpec> spec = scheme.Rotation()) {
      const std::vector<double> inv_freq = ComputeRopeFrequencies(*spec, extent).inv_freq;
      for (std::int64_t t = 0; t < length; ++t) {
        q[h][t] = RotateHead(*spec, inv_freq, q[h][t], static_cast<double>(position[t]));
        k[h][t] = RotateHead(*spec, inv_freq, k[h][t], static_cast<double>(position[t]));
      }
    }
  }
  const double scale = terms.scale.value_or(1.0 / std::sqrt(static_cast<double>(hd)));
  MaterializedTerms materialized;
  materialized.logit = [&](std::int64_t, std::int64_t h, std::int64_t i, std::int64_t j) {
    if (j > i) return 0.0;  // not visible
    const std::int64_t delta = position[i] - position[j];
    double content = Dot(q[h][i], k[h][j]);
    if (!terms.key_bias.empty()) content += Dot(std::span(terms.key_bias).subspan(h * hd, hd), k[h][j]);
    if (!terms.query_table.empty()) content += Dot(q[h][i], TableRow(terms.query_table, h, delta, hd));
    if (!terms.key_table.empty()) content += Dot(k[h][j], TableRow(terms.key_table, h, delta, hd));
    double logit = content * scale;
    if (!terms.distance_bias.empty()) logit += terms.distance_bias[h * extent + delta];
    if (!terms.pair_bias.empty()) logit += terms.pair_bias[(h * extent + position[i]) * extent + delta];
    return logit;
  };
  materialized.visible = [](std::int64_t, std::int64_t, std::int64_t i, std::int64_t j) { return j <= i; };
  materialized.add_value = [&](std::int64_t, std::int64_t h, std::int64_t i, std::int64_t j, double weight,
                               double* out) {
    const std::int64_t delta = position[i] - position[j];
    const std::span<const double> c = TableRow(terms.value_table, h, delta, hd);
    if (!terms.probability_weight.empty()) weight *= terms.probability_weight[h * extent + delta];
    for (std::int64_t e = 0; e < hd; ++e) out[e] += weight * (v[h][j][e] + (c.empty() ? 0.0 : c[e]));
  };
  const RelativeAttentionResult result = MaterializedAttention(
      {.batch = 1, .heads = heads, .q_len = length, .k_len = length, .value_dim = hd}, materialized);
  Matrix out(static_cast<std::size_t>(length), std::vector<double>(static_cast<std::size_t>(d), 0.0));
  for (std::int64_t h = 0; h < heads; ++h) {
    for (std::int64_t i = 0; i < length; ++i) {
      for (std::int64_t e = 0; e < hd; ++e) out[i][h * hd + e] = result.output[(h * length + i) * hd + e];
    }
  }
  return out;
}

// x + attention(RmsNorm(x) + layer_positions[p_t]), then + mlp(RmsNorm(.)).
// layer_positions: the layer's [extent, d] (FLOATER's p_l(t)), or empty.
Matrix Block(const TinyLmConfig& config, const tiny_lm::SchemeTrainer& scheme, const TinyLmParams& params,
             std::int64_t layer, std::span<const double> layer_positions, std::span<const std::int64_t> position,
             std::int64_t extent, const Matrix& x) {
  const TinyLmBlock& block = params.blocks[static_cast<std::size_t>(layer)];
  Matrix attn_in = RmsNorm(x, block.attn_norm, config.norm_eps);
  if (!layer_positions.empty()) {
    for (std::size_t t = 0; t < attn_in.size(); ++t) {
      const std::size_t d = attn_in[t].size();
      for (std::size_t c = 0; c < d; ++c) attn_in[t][c] += layer_positions[position[t] * d + c];
    }
  }
  const Matrix qkv = Linear(attn_in, block.attn_qkv);
  const Matrix mid = Add(x, Linear(Attention(config, scheme, params, layer, qkv, position, extent), block.attn_output));
  Matrix hidden = Linear(RmsNorm(mid, block.ffn_norm, config.norm_eps), block.ffn_up);
  for (std::vector<double>& row : hidden) {
    for (double& u : row) u = Gelu(u);
  }
  return Add(mid, Linear(hidden, block.ffn_down));
}

// token_embd rows of the inputs times the embedding scale, plus the
// positions' rows (sinusoid, learned) at p_t; or the scheme's own input
// embedding.
Matrix Embed(const TinyLmConfig& config, const tiny_lm::SchemeTrainer& scheme, const TinyLmParams& params,
             std::span<const std::uint8_t> inputs, std::span<const std::int64_t> position, std::int64_t extent) {
  const std::int64_t length = static_cast<std::int64_t>(inputs.size()), d = config.d_model;
  const std::vector<double> own = scheme.InputEmbedding(params, inputs, position);
  const std::vector<double> positions = scheme.InputPositions(params, extent);
  const double scale = scheme.EmbeddingScale();
  Matrix x;
  for (std::int64_t t = 0; t < length; ++t) {
    std::vector<double> row(static_cast<std::size_t>(d));
    for (std::int64_t c = 0; c < d; ++c) {
      row[c] = !own.empty() ? own[t * d + c]
                            : scale * params.token_embd.values[inputs[t] * d + c] +
                                  (positions.empty() ? 0.0 : positions[position[t] * d + c]);
    }
    x.push_back(std::move(row));
  }
  return x;
}

// -log softmax(logits)[target] at each position of one sequence [length + 1],
// token t at position[t].
std::vector<double> SequenceLosses(const TinyLmConfig& config, const TinyLmParams& params,
                                   std::span<const std::uint8_t> sequence, std::span<const std::int64_t> position) {
  const std::unique_ptr<tiny_lm::SchemeTrainer> scheme = tiny_lm::MakeSchemeTrainer(config);
  const std::span<const std::uint8_t> inputs = sequence.first(sequence.size() - 1);
  const std::int64_t extent = position.back() + 1;
  Matrix x = Embed(config, *scheme, params, inputs, position, extent);
  // Every layer's input positions at once (FLOATER solves its dynamics once).
  const std::vector<std::vector<double>> positions = scheme->LayerInputPositions(params, extent);
  for (std::int64_t l = 0; l < config.layers; ++l) {
    const std::span<const double> own =
        positions.empty() ? std::span<const double>() : std::span<const double>(positions[static_cast<std::size_t>(l)]);
    x = Block(config, *scheme, params, l, own, position, extent, x);
  }
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
                            std::span<const std::uint8_t> tokens, std::int64_t batch, std::int64_t length,
                            std::span<const std::int64_t> positions) {
  tiny_lm::ValidateLossCall(config, params, tokens, batch, length, positions, false);
  std::vector<std::int64_t> position(positions.begin(), positions.end());
  if (position.empty()) {
    position.resize(static_cast<std::size_t>(length));
    std::iota(position.begin(), position.end(), std::int64_t{0});
  }
  TinyLmLossResult result;
  result.position_loss.assign(static_cast<std::size_t>(length), 0.0);
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::vector<double> losses =
        SequenceLosses(config, params, tokens.subspan(b * (length + 1), length + 1), position);
    for (std::int64_t t = 0; t < length; ++t) result.position_loss[t] += losses[t] / static_cast<double>(batch);
    result.token_loss.insert(result.token_loss.end(), losses.begin(), losses.end());
  }
  for (const double l : result.position_loss) result.loss += l / static_cast<double>(length);
  return result;
}

}  // namespace posenc::reference
