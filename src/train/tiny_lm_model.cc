// The tiny model's float32 loss and gradients: the forward pass keeps each
// block's activations, the backward pass walks them in reverse.
//
// Forward (rows n = b*T + t, N = B*T; token t at position p_t, t unless
// the pass has randomized positions):
//   x [N, d]    = token_embd[input] * EmbeddingScale + positions[p_t]
//                 (or the scheme's own InputEmbedding)
//   block l:    attn_in = RmsNorm(x) (+ the scheme's layer positions)
//               qkv [N, 3d] = attn_in Wqkv^T (RoPE on q, k)
//               att [N, d] = Attention(qkv)  x += att Wo^T
//               ffn_in = RmsNorm(x)          up [N, F] = ffn_in Wup^T
//               act = Gelu(up)               x += act Wdown^T
//   xf = RmsNorm(x), logits [N, 256] = xf token_embd^T, loss = mean CE.
//
// An evaluation may hand every layer's attention to posenc::Attention
// instead (a RoPE model under a context-extension method): q, k, v are then
// the unrotated columns of qkv, and the options carry the rotation.
#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/logit_range.h"
#include "posenc/attention.h"
#include "posenc/error.h"
#include "posenc/rope_frequencies.h"
#include "train/scheme_trainer.h"
#include "train/tiny_lm_internal.h"

namespace posenc {
namespace {

using tiny_lm::AttentionShape;

// How many predictions the loss averages: every one (rows) when `scored` is
// empty, else its non-zero entries, at least one.
std::int64_t CountScored(std::span<const std::uint8_t> scored, std::int64_t rows) {
  if (scored.empty()) return rows;
  Require(static_cast<std::int64_t>(scored.size()) == rows, tiny_lm::kOp, "scored.size()", scored.size(),
          "must be batch * length = " + std::to_string(rows) + " (one flag a prediction) or 0 (every prediction)");
  const auto count =
      static_cast<std::int64_t>(std::count_if(scored.begin(), scored.end(), [](std::uint8_t f) { return f != 0; }));
  Require(count > 0, tiny_lm::kOp, "scored", Verbatim{"all 0"}, "must mark at least one prediction");
  return count;
}

// What the backward pass needs of one block (the forward's intermediates).
struct BlockActivations {
  std::vector<float> x_in;         // [N, d] residual stream entering the block
  std::vector<float> attn_rms;     // [N] 1 / rms
  std::vector<float> attn_in;      // [N, d]
  std::vector<float> qkv;          // [N, 3d], q and k rotated (RoPE)
  tiny_lm::FloatLayerTerms terms;  // the scheme's terms of the layer, float64 and float32
  std::vector<float> att;          // [N, d]
  std::vector<float> x_mid;        // [N, d] after the attention residual
  std::vector<float> ffn_rms;      // [N]
  std::vector<float> ffn_in;       // [N, d]
  std::vector<float> up;           // [N, F]
  std::vector<float> act;          // [N, F]
};

// The per-call state: shapes, the scheme, the activations. The scheme's
// terms cover the positions 0..E-1 (E = shape.Extent()); the rows read
// them at their tokens' positions.
struct Pass {
  const TinyLmConfig& config;
  const TinyLmParams& params;
  std::int64_t batch, length, rows, d, ffn;
  AttentionShape shape;
  std::int64_t extent;
  std::vector<std::int64_t> position;  // [T]: p_t
  TokenPositions row_positions;        // every row's position, [B T] (the kernels' per-token positions)
  std::unique_ptr<tiny_lm::SchemeTrainer> scheme;
  std::optional<RopeSpec> rotation;                  // the model's own rotation of q and k
  RopeFrequencies rope;                              // its table, when the model's attention runs
  const tiny_lm::KernelAttention& kernel;            // empty: the model's own attention
  std::vector<std::vector<double>> layer_positions;  // [L][E, d] added to each attention input, or empty

  Pass(const TinyLmConfig& c, const TinyLmParams& p, std::int64_t b, std::int64_t t,
       std::span<const std::int64_t> positions, const tiny_lm::KernelAttention& k)
      : config(c), params(p), batch(b), length(t), rows(b * t), d(c.d_model), ffn(c.ffn_hidden),
        shape{.batch = b, .length = t, .heads = c.heads, .head_dim = c.HeadDim(), .positions = positions},
        extent(shape.Extent()), position(static_cast<std::size_t>(t)), scheme(tiny_lm::MakeSchemeTrainer(c)),
        rotation(scheme->Rotation()), kernel(k), layer_positions(scheme->LayerInputPositions(p, extent)) {
    for (std::int64_t i = 0; i < t; ++i) position[i] = shape.Position(i);
    row_positions = RowPositions();
    if (rotation && !kernel) rope = ComputeRopeFrequencies(*rotation, extent);
  }

  // The position of row n's token.
  std::int64_t PositionOfRow(std::int64_t n) const { return position[n % length]; }

  // Every row's position, once a pass: Offset(0) for 0..T-1, else ids.
  TokenPositions RowPositions() const {
    if (shape.positions.empty()) return TokenPositions::Offset(0);
    std::vector<std::int64_t> ids(static_cast<std::size_t>(rows));
    for (std::int64_t n = 0; n < rows; ++n) ids[n] = PositionOfRow(n);
    return TokenPositions::Ids(std::move(ids));
  }

  std::vector<float> Floats(std::int64_t width) const {
    return std::vector<float>(static_cast<std::size_t>(rows * width));
  }

  // posenc::Attention over the q, k, v columns of qkv [B, T, 3d] (views
  // [B, T, H, hd] with a row stride of 3d) into att [B, T, H, hd].
  void KernelAttention(std::int64_t l, std::span<const float> qkv, std::span<float> att) const {
    const std::int64_t hd = shape.head_dim;
    const std::array<std::int64_t, 4> view_shape{batch, length, shape.heads, hd};
    const std::array<std::int64_t, 4> strides{length * 3 * d, 3 * d, hd, 1};
    AttentionInputs in;
    in.q = ConstTensorView{qkv.data(), DType::kF32, view_shape, strides};
    in.k = ConstTensorView{qkv.data() + d, DType::kF32, view_shape, strides};
    in.v = ConstTensorView{qkv.data() + 2 * d, DType::kF32, view_shape, strides};
    in.out = TensorView::Contiguous(att.data(), DType::kF32, view_shape);
    if (!shape.positions.empty()) {
      in.q_positions = row_positions;
      in.k_positions = row_positions;
    }
    Attention(in, kernel(l));
  }

  // The model's own attention of layer l over qkv (q and k rotated in place
  // for RoPE); the scheme's terms are kept in a for the backward.
  void OwnAttention(std::int64_t l, BlockActivations& a) const {
    if (rotation) {
      tiny_lm::RotateQueriesKeys(*rotation, rope, a.qkv, batch, length, shape.heads, row_positions,
                                 RopeDirection::kForward);
    }
    a.terms = tiny_lm::FloatLayerTerms(scheme->Layer(params, l, extent));
    tiny_lm::AttentionForward(shape, a.terms.View(), a.qkv, a.att);
  }

  // x [N, d] -> x after block l; a keeps its intermediates.
  void BlockForward(std::int64_t l, std::vector<float>& x, BlockActivations& a) const {
    const TinyLmBlock& block = params.blocks[static_cast<std::size_t>(l)];
    std::vector<float> delta = Floats(d);
    a.x_in = x;
    a.attn_rms = Floats(1);
    a.attn_in = Floats(d);
    a.qkv = Floats(3 * d);
    a.att = Floats(d);
    tiny_lm::RmsNormForward(x, block.attn_norm.values, config.norm_eps, a.attn_in, a.attn_rms);
    if (!layer_positions.empty()) {
      const std::vector<double>& p = layer_positions[static_cast<std::size_t>(l)];
      for (std::int64_t n = 0; n < rows; ++n) {
        for (std::int64_t c = 0; c < d; ++c) a.attn_in[n * d + c] += static_cast<float>(p[PositionOfRow(n) * d + c]);
      }
    }
    tiny_lm::LinearForward(a.attn_in, rows, block.attn_qkv, a.qkv);
    if (kernel) {
      KernelAttention(l, a.qkv, a.att);
    } else {
      OwnAttention(l, a);
    }
    tiny_lm::LinearForward(a.att, rows, block.attn_output, delta);
    for (std::size_t e = 0; e < x.size(); ++e) x[e] += delta[e];
    a.x_mid = x;
    a.ffn_rms = Floats(1);
    a.ffn_in = Floats(d);
    a.up = Floats(ffn);
    a.act = Floats(ffn);
    tiny_lm::RmsNormForward(x, block.ffn_norm.values, config.norm_eps, a.ffn_in, a.ffn_rms);
    tiny_lm::LinearForward(a.ffn_in, rows, block.ffn_up, a.up);
    tiny_lm::GeluForward(a.up, a.act);
    tiny_lm::LinearForward(a.act, rows, block.ffn_down, delta);
    for (std::size_t e = 0; e < x.size(); ++e) x[e] += delta[e];
  }

  // dx: d loss / d (block l's output) on entry, / d (its input) on return.
  // Writes block l's parameter gradients and the scheme's part of them;
  // d loss / d its layer input positions into dlayer[l] (when it has them).
  void BlockBackward(std::int64_t l, const BlockActivations& a, std::vector<float>& dx, TinyLmParams& grads,
                     std::vector<std::vector<double>>& dlayer) const {
    const TinyLmBlock& block = params.blocks[static_cast<std::size_t>(l)];
    TinyLmBlock& g = grads.blocks[static_cast<std::size_t>(l)];
    std::vector<float> dact = Floats(ffn), dup = Floats(ffn), din = Floats(d);
    tiny_lm::LinearBackward(a.act, dx, rows, block.ffn_down, dact, g.ffn_down.values);
    tiny_lm::GeluBackward(a.up, dact, dup);
    tiny_lm::LinearBackward(a.ffn_in, dup, rows, block.ffn_up, din, g.ffn_up.values);
    tiny_lm::RmsNormBackward(a.x_mid, block.ffn_norm.values, a.ffn_rms, din, dx, g.ffn_norm.values);

    std::vector<float> datt = Floats(d);
    tiny_lm::LinearBackward(a.att, dx, rows, block.attn_output, datt, g.attn_output.values);
    tiny_lm::AttentionGrads ag = tiny_lm::AttentionBackward(shape, a.terms.View(), a.qkv, datt);
    if (rotation) {
      tiny_lm::RotateQueriesKeys(*rotation, rope, ag.dqkv, batch, length, shape.heads, row_positions,
                                 RopeDirection::kBackward);
    }
    tiny_lm::LinearBackward(a.attn_in, ag.dqkv, rows, block.attn_qkv, din, g.attn_qkv.values);
    if (!layer_positions.empty()) {  // the batch's rows at p_t, in row order
      std::vector<double>& dp = dlayer[static_cast<std::size_t>(l)];
      dp.assign(static_cast<std::size_t>(extent * d), 0.0);
      for (std::int64_t n = 0; n < rows; ++n) {
        for (std::int64_t c = 0; c < d; ++c) dp[PositionOfRow(n) * d + c] += din[n * d + c];
      }
    }
    tiny_lm::RmsNormBackward(a.x_in, block.attn_norm.values, a.attn_rms, din, dx, g.attn_norm.values);
    scheme->LayerBackward(params, l, extent,
                          {.distance_bias = std::move(ag.dbias),
                           .pair_bias = std::move(ag.dpair),
                           .query_table = std::move(ag.dquery_table),
                           .key_table = std::move(ag.dkey_table),
                           .value_table = std::move(ag.dvalue_table),
                           .key_bias = std::move(ag.dkey_bias),
                           .probability_weight = std::move(ag.dprobability_weight)},
                          grads);
  }
};

}  // namespace

TinyLmLossResult TinyLmLoss(const TinyLmConfig& config, const TinyLmParams& params,
                            std::span<const std::uint8_t> tokens, std::int64_t batch, std::int64_t length,
                            TinyLmParams* grads, std::span<const std::uint8_t> scored,
                            std::span<const std::int64_t> positions, std::span<const std::uint8_t> targets) {
  return tiny_lm::Loss(config, params, tokens, batch, length, grads, {}, scored, positions, targets);
}

namespace tiny_lm {

TinyLmLossResult Loss(const TinyLmConfig& config, const TinyLmParams& params, std::span<const std::uint8_t> tokens,
                      std::int64_t batch, std::int64_t length, TinyLmParams* grads,
                      const KernelAttention& kernel_attention, std::span<const std::uint8_t> scored,
                      std::span<const std::int64_t> positions, std::span<const std::uint8_t> given_targets) {
  ValidateLossCall(config, params, tokens, batch, length, positions, grads != nullptr);
  Require(given_targets.empty() || static_cast<std::int64_t>(given_targets.size()) == batch * length, kOp,
          "targets.size()", given_targets.size(),
          "must be batch * length = " + std::to_string(batch * length) + " or 0 (the next bytes)");
  const std::int64_t scored_count = CountScored(scored, batch * length);
  Require(grads != &params, kOp, "grads", Verbatim{"&params"},
          "must be another TinyLmParams (the params are read while the gradients are written)");
  Require(grads == nullptr || !kernel_attention, kOp, "grads", Verbatim{"non-null"},
          "must be null with posenc::Attention's options: that attention has no backward here (evaluation only)");
  const Pass pass(config, params, batch, length, positions, kernel_attention);
  const std::int64_t n_rows = pass.rows, d = pass.d, vocab = TinyLmConfig::kVocab;
  std::vector<std::uint8_t> inputs(static_cast<std::size_t>(n_rows)), targets(inputs.size());
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t t = 0; t < length; ++t) {
      inputs[b * length + t] = tokens[b * (length + 1) + t];
      targets[b * length + t] =
          given_targets.empty() ? tokens[b * (length + 1) + t + 1] : given_targets[b * length + t];
    }
  }

  // Embedding (+ positions), or the scheme's own input embedding, then the
  // blocks. Evaluation keeps one block's activations at a time.
  const std::vector<double> own_input = pass.scheme->InputEmbedding(params, inputs, pass.position);
  const std::vector<double> input_positions = pass.scheme->InputPositions(params, pass.extent);
  const auto scale = static_cast<float>(pass.scheme->EmbeddingScale());
  std::vector<float> x = pass.Floats(d);
  if (!own_input.empty()) {
    std::copy(own_input.begin(), own_input.end(), x.begin());
  } else {
    for (std::int64_t n = 0; n < n_rows; ++n) {
      const float* e = params.token_embd.values.data() + inputs[n] * d;
      const double* p = input_positions.empty() ? nullptr : input_positions.data() + pass.PositionOfRow(n) * d;
      for (std::int64_t c = 0; c < d; ++c) x[n * d + c] = scale * e[c] + (p ? static_cast<float>(p[c]) : 0.0f);
    }
  }
  std::vector<BlockActivations> acts(grads ? static_cast<std::size_t>(config.layers) : 1);
  for (std::int64_t l = 0; l < config.layers; ++l) pass.BlockForward(l, x, acts[grads ? l : 0]);

  std::vector<float> final_rms = pass.Floats(1), xf = pass.Floats(d), logits = pass.Floats(vocab);
  tiny_lm::RmsNormForward(x, params.output_norm.values, config.norm_eps, xf, final_rms);
  tiny_lm::LinearForward(xf, n_rows, params.token_embd, logits);
  // Evaluation refuses logits no log-softmax resolves (logit_range.h): a
  // 1e20 embedding scored a loss of exactly 0. (Training keeps its own
  // rule, a loss or gradient that is not finite, which names the step.)
  if (grads == nullptr) {
    const auto size = static_cast<std::int64_t>(logits.size());
    if (const std::int64_t i = detail::FirstOutOfRange(logits.data(), size, detail::kLogitLimit); i < size) {
      const std::int64_t row = i / vocab;
      ThrowError(kOp,
                 "logits[sequence " + std::to_string(row / length) + " of the batch, position " +
                     std::to_string(pass.PositionOfRow(row)) + ", byte " + std::to_string(i % vocab) + "]",
                 FormatValue(logits[i]), detail::LogitRangeRule());
    }
  }
  std::vector<double> row_loss(static_cast<std::size_t>(n_rows));
  std::vector<float> dlogits = grads ? pass.Floats(vocab) : std::vector<float>();
  TinyLmLossResult result;
  result.prediction.resize(static_cast<std::size_t>(n_rows));
  tiny_lm::CrossEntropy(logits, targets, scored, 1.0f / static_cast<float>(scored_count), row_loss, result.prediction,
                        dlogits);

  result.position_loss.assign(static_cast<std::size_t>(length), 0.0);
  for (std::int64_t t = 0; t < length; ++t) {
    for (std::int64_t b = 0; b < batch; ++b) result.position_loss[t] += row_loss[b * length + t];
    result.position_loss[t] /= static_cast<double>(batch);
  }
  if (scored.empty()) {
    for (const double l : result.position_loss) result.loss += l;
    result.loss /= static_cast<double>(length);
  } else {
    for (std::int64_t n = 0; n < n_rows; ++n) result.loss += scored[n] != 0 ? row_loss[n] : 0.0;
    result.loss /= static_cast<double>(scored_count);
  }
  result.token_loss = std::move(row_loss);
  if (grads == nullptr) return result;

  // Backward. The output projection is the token embedding: its gradient
  // is the logits' part plus the input rows' part, added in row order.
  TinyLmParams& g = *grads;
  g = ZeroTinyLmParams(config);
  std::vector<float> dxf = pass.Floats(d), dx = pass.Floats(d);
  tiny_lm::LinearBackward(xf, dlogits, n_rows, params.token_embd, dxf, g.token_embd.values);
  tiny_lm::RmsNormBackward(x, params.output_norm.values, final_rms, dxf, dx, g.output_norm.values);
  std::vector<std::vector<double>> dlayer(pass.layer_positions.size());
  for (std::int64_t l = config.layers - 1; l >= 0; --l) pass.BlockBackward(l, acts[l], dx, g, dlayer);
  if (!dlayer.empty()) pass.scheme->LayerInputPositionsBackward(params, pass.extent, dlayer, g);
  if (!own_input.empty()) {
    pass.scheme->InputEmbeddingBackward(params, inputs, pass.position, std::vector<double>(dx.begin(), dx.end()), g);
    return result;
  }
  for (std::int64_t n = 0; n < n_rows; ++n) {
    float* de = g.token_embd.values.data() + inputs[n] * d;
    for (std::int64_t c = 0; c < d; ++c) de[c] += scale * dx[n * d + c];
  }
  if (!input_positions.empty()) {
    // d loss / d positions[p] sums the batch's rows at p (in row order).
    std::vector<double> dpositions(static_cast<std::size_t>(pass.extent * d), 0.0);
    for (std::int64_t n = 0; n < n_rows; ++n) {
      for (std::int64_t c = 0; c < d; ++c) dpositions[pass.PositionOfRow(n) * d + c] += dx[n * d + c];
    }
    pass.scheme->InputPositionsBackward(params, dpositions, pass.extent, g);
  }
  return result;
}

}  // namespace tiny_lm
}  // namespace posenc
