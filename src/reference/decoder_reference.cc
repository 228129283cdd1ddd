// The decoder's forward as written (decoder_model.h), its features switched as
// decoder_features.h says, in float64
// (attention through the float64 reference, which takes its q, k, v in
// float32).
#include <cmath>
#include <numbers>
#include <string>

#include "model/decoder_weights.h"
#include "posenc/error.h"
#include "posenc/decoder_model.h"

namespace posenc::reference {
namespace {

using Matrix = std::vector<double>;  // row-major

// y [n, rows] = x [n, cols] W^T with W [rows, cols] (ggml order {cols, rows}).
Matrix Linear(const Matrix& x, const std::vector<float>& w, std::int64_t rows, std::int64_t cols) {
  const auto n = static_cast<std::int64_t>(x.size()) / cols;
  Matrix y(n * rows, 0.0);
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::int64_t r = 0; r < rows; ++r) {
      double sum = 0;
      for (std::int64_t c = 0; c < cols; ++c) sum += x[i * cols + c] * w[r * cols + c];
      y[i * rows + r] = sum;
    }
  }
  return y;
}

Matrix RmsNorm(const Matrix& x, const std::vector<float>& weight, double eps) {
  const auto d = static_cast<std::int64_t>(weight.size());
  Matrix y(x.size());
  for (std::size_t i = 0; i < x.size() / d; ++i) {
    double mean_sq = 0;
    for (std::int64_t j = 0; j < d; ++j) mean_sq += x[i * d + j] * x[i * d + j] / static_cast<double>(d);
    for (std::int64_t j = 0; j < d; ++j) y[i * d + j] = x[i * d + j] / std::sqrt(mean_sq + eps) * weight[j];
  }
  return y;
}

// x [n, bias.size()] += bias on every row.
void AddBias(Matrix& x, const std::vector<float>& bias) {
  for (std::size_t i = 0; i < x.size(); ++i) x[i] += bias[i % bias.size()];
}

// Rows [first, first + count) of a [rows, cols] matrix (ggml order {cols,
// rows}; cols 1 for a vector): one part of a fused tensor.
std::vector<float> RowsOf(const std::vector<float>& w, std::int64_t cols, std::int64_t first, std::int64_t count) {
  return {w.begin() + first * cols, w.begin() + (first + count) * cols};
}

// The MLP gate's act(g) (decoder_features.h).
double Gate(GateActivation activation, double g) {
  if (activation == GateActivation::kSilu) return g / (1 + std::exp(-g));
  return 0.5 * g * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (g + 0.044715 * g * g * g)));  // kGeluTanh
}

}  // namespace

std::vector<double> DecoderLogits(const GgufFile& file, std::span<const std::int32_t> tokens,
                                  const AttentionOptions& attention) {
  const DecoderHyperparams hp = DecoderHyperparamsOf(file);
  const auto n = static_cast<std::int64_t>(tokens.size());
  const std::int64_t d = hp.embedding_length, ffn = hp.feed_forward_length, hd = hp.head_dim;
  const std::int64_t q_dim = hp.head_count * hd, kv_dim = hp.head_count_kv * hd;
  Require(n >= 1, "llama", "tokens.size()", n, "must be >= 1");
  const AttentionOptions local_attention = LocalLayerAttention(hp);

  const std::vector<float> embd = ReadDecoderTensor(file, "token_embd.weight", {d, hp.vocab_size});
  Matrix x(n * d);
  for (std::int64_t i = 0; i < n; ++i) {
    Require(tokens[i] >= 0 && tokens[i] < hp.vocab_size, "llama", "tokens[" + std::to_string(i) + "]", tokens[i],
            "must be a token id in [0, vocab_size)");
    for (std::int64_t j = 0; j < d; ++j) x[i * d + j] = embd[tokens[i] * d + j];
  }
  for (double& value : x) value *= static_cast<double>(hp.embedding_scale);

  for (std::int64_t l = 0; l < hp.block_count; ++l) {
    const auto tensor = [&](const std::string& name, const std::vector<std::int64_t>& shape) {
      return ReadDecoderTensor(file, "blk." + std::to_string(l) + "." + name, shape);
    };
    // q, k, v (kind ".weight") and their biases (".bias"): their own
    // tensors, or rows q | k | v of attn_qkv (fused_qkv).
    const auto projection = [&](const std::string& role, std::int64_t first, std::int64_t rows,
                                const std::string& kind) {
      const std::int64_t cols = kind == ".weight" ? d : 1;
      const auto shape = [&](std::int64_t r) { return cols == 1 ? std::vector{r} : std::vector{d, r}; };
      if (!hp.fused_qkv) return tensor(role + kind, shape(rows));
      return RowsOf(tensor("attn_qkv" + kind, shape(q_dim + 2 * kv_dim)), cols, first, rows);
    };
    const Matrix a = RmsNorm(x, tensor("attn_norm.weight", {d}), hp.rms_norm_eps);
    Matrix q = Linear(a, projection("attn_q", 0, q_dim, ".weight"), q_dim, d);
    Matrix k = Linear(a, projection("attn_k", q_dim, kv_dim, ".weight"), kv_dim, d);
    Matrix v = Linear(a, projection("attn_v", q_dim + kv_dim, kv_dim, ".weight"), kv_dim, d);
    if (hp.qkv_bias) {
      AddBias(q, projection("attn_q", 0, q_dim, ".bias"));
      AddBias(k, projection("attn_k", q_dim, kv_dim, ".bias"));
      AddBias(v, projection("attn_v", q_dim + kv_dim, kv_dim, ".bias"));
    }
    if (hp.qk_norm) {  // each head's head_dim values as one row
      q = RmsNorm(q, tensor("attn_q_norm.weight", {hd}), hp.rms_norm_eps);
      k = RmsNorm(k, tensor("attn_k_norm.weight", {hd}), hp.rms_norm_eps);
    }
    // Scaled by 1/sqrt(query_pre_attn_scalar) in all: q times sqrt(head_dim / it).
    for (double& value : q) value *= hp.QueryFactor();
    std::vector<float> q32(q.begin(), q.end()), k32(k.begin(), k.end()), v32(v.begin(), v.end());
    std::vector<float> out32(n * q_dim);
    AttentionInputs in;
    in.q = ConstTensorView::Contiguous(q32.data(), DType::kF32, {1, n, hp.head_count, hd});
    in.k = ConstTensorView::Contiguous(k32.data(), DType::kF32, {1, n, hp.head_count_kv, hd});
    in.v = ConstTensorView::Contiguous(v32.data(), DType::kF32, {1, n, hp.head_count_kv, hd});
    in.out = TensorView::Contiguous(out32.data(), DType::kF32, {1, n, hp.head_count, hd});
    reference::Attention(in, hp.IsLocalLayer(l) ? local_attention : attention);
    Matrix o = Linear(Matrix(out32.begin(), out32.end()), tensor("attn_output.weight", {q_dim, d}), d, q_dim);
    if (hp.post_norms) o = RmsNorm(o, tensor("post_attention_norm.weight", {d}), hp.rms_norm_eps);
    for (std::int64_t i = 0; i < n * d; ++i) x[i] += o[i];

    const Matrix f = RmsNorm(x, tensor("ffn_norm.weight", {d}), hp.rms_norm_eps);
    // gate and up: their own tensors, or rows gate | up of ffn_up (fused_gate_up).
    const std::vector<float> w_gate = hp.fused_gate_up ? RowsOf(tensor("ffn_up.weight", {d, 2 * ffn}), d, 0, ffn)
                                                       : tensor("ffn_gate.weight", {d, ffn});
    const std::vector<float> w_up = hp.fused_gate_up ? RowsOf(tensor("ffn_up.weight", {d, 2 * ffn}), d, ffn, ffn)
                                                     : tensor("ffn_up.weight", {d, ffn});
    const Matrix gate = Linear(f, w_gate, ffn, d);
    Matrix up = Linear(f, w_up, ffn, d);
    for (std::int64_t i = 0; i < n * ffn; ++i) up[i] *= Gate(hp.activation, gate[i]);
    Matrix down = Linear(up, tensor("ffn_down.weight", {ffn, d}), d, ffn);
    if (hp.post_norms) down = RmsNorm(down, tensor("post_ffw_norm.weight", {d}), hp.rms_norm_eps);
    for (std::int64_t i = 0; i < n * d; ++i) x[i] += down[i];
  }

  const Matrix out = RmsNorm(x, ReadDecoderTensor(file, "output_norm.weight", {d}), hp.rms_norm_eps);
  return Linear(out, hp.tied_output ? embd : ReadDecoderTensor(file, "output.weight", {d, hp.vocab_size}),
                hp.vocab_size, d);
}

}  // namespace posenc::reference
