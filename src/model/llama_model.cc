// The Llama forward pass: batched prefill of one sequence at positions 0..n-1.
#include "posenc/llama_model.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "model/llama_weights.h"
#include "model/model_ops.h"
#include "posenc/error.h"
#include "posenc/input_file.h"
#include "posenc/rope_frequencies.h"

namespace posenc {
namespace {

constexpr const char* kOp = "llama";
// Rows of logits computed at once: [64, vocab] floats (12.6 MB for SmolLM2)
// instead of [n, vocab].
constexpr std::int64_t kLogitRows = 64;

void CheckTokens(std::span<const std::int32_t> tokens, std::int64_t vocab) {
  Require(!tokens.empty(), kOp, "tokens.size()", 0, "must be >= 1");
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    Require(tokens[i] >= 0 && tokens[i] < vocab, kOp, "tokens[" + std::to_string(i) + "]", tokens[i],
            "must be a token id in [0, vocab_size = " + std::to_string(vocab) + ")");
  }
}

}  // namespace

LlamaModel::LlamaModel(std::unique_ptr<Weights> weights) : weights_(std::move(weights)) {}
LlamaModel::LlamaModel(LlamaModel&&) noexcept = default;
LlamaModel& LlamaModel::operator=(LlamaModel&&) noexcept = default;
LlamaModel::~LlamaModel() = default;

LlamaModel LlamaModel::Load(const std::string& path) { return FromGguf(GgufFile::Open(path)); }
LlamaModel LlamaModel::FromGguf(const GgufFile& file) { return LlamaModel(LoadLlamaWeights(file)); }

const LlamaHyperparams& LlamaModel::hparams() const { return weights_->hp; }

AttentionOptions LlamaModel::DefaultAttention() const {
  AttentionOptions options;
  options.encoding = RopeEncoding{hparams().rope, ComputeRopeFrequencies(hparams().rope)};
  return options;
}

void LlamaModel::RequireActivationsFit(std::int64_t n) const {
  const LlamaHyperparams& hp = hparams();
  const std::int64_t q_dim = hp.head_count * hp.head_dim, kv_dim = hp.head_count_kv * hp.head_dim;
  // Per token: x, normed, proj (3 d), qkv, attn, gate_up, hidden (as Forward
  // allocates them), and the attention kernel's float32 copies of q, k, v.
  const double per_token = 3.0 * static_cast<double>(hp.embedding_length) + 2.0 * static_cast<double>(q_dim + kv_dim) +
                           static_cast<double>(q_dim) + 3.0 * static_cast<double>(hp.feed_forward_length) +
                           static_cast<double>(q_dim + 2 * kv_dim);
  RequireFitsInMemory(kOp, "tokens", n, "the activations of one forward pass",
                      static_cast<double>(n) * per_token + static_cast<double>(kLogitRows * hp.vocab_size),
                      sizeof(float));
}

void LlamaModel::Forward(std::span<const std::int32_t> tokens, const AttentionOptions& attention,
                         const LogitsSink& sink, const LayerProgress& progress) const {
  const Weights& w = *weights_;
  const LlamaHyperparams& hp = w.hp;
  CheckTokens(tokens, hp.vocab_size);
  const auto n = static_cast<std::int64_t>(tokens.size());
  RequireActivationsFit(n);
  const std::int64_t d = hp.embedding_length, ffn = hp.feed_forward_length, hd = hp.head_dim;
  const std::int64_t q_dim = hp.head_count * hd, kv_dim = hp.head_count_kv * hd, qkv_dim = q_dim + 2 * kv_dim;

  std::vector<float> x(n * d), normed(n * d), qkv(n * qkv_dim), attn(n * q_dim), proj(n * d);
  std::vector<float> gate_up(n * 2 * ffn), hidden(n * ffn);
  model::GatherRows(w.token_embd, d, tokens, x);

  // Views into qkv [n, q | k | v]: each token's row holds its q heads, then
  // its k heads, then its v heads.
  const std::array<std::int64_t, 4> qkv_strides{n * qkv_dim, qkv_dim, hd, 1};
  AttentionInputs in;
  in.q = ConstTensorView{qkv.data(), DType::kF32, {1, n, hp.head_count, hd}, qkv_strides};
  in.k = ConstTensorView{qkv.data() + q_dim, DType::kF32, {1, n, hp.head_count_kv, hd}, qkv_strides};
  in.v = ConstTensorView{qkv.data() + q_dim + kv_dim, DType::kF32, {1, n, hp.head_count_kv, hd}, qkv_strides};
  in.out = TensorView::Contiguous(attn.data(), DType::kF32, {1, n, hp.head_count, hd});

  for (const LlamaLayerWeights& layer : w.layers) {
    model::RmsNorm(x, layer.attn_norm, hp.rms_norm_eps, normed);
    MatMul(normed, n, layer.qkv, qkv);
    Attention(in, attention);
    MatMul(attn, n, layer.attn_output, proj);
    model::AddInPlace(x, proj);

    model::RmsNorm(x, layer.ffn_norm, hp.rms_norm_eps, normed);
    MatMul(normed, n, layer.gate_up, gate_up);
    model::SwiGlu(gate_up, ffn, hidden);
    MatMul(hidden, n, layer.down, proj);
    model::AddInPlace(x, proj);
    if (progress) progress(&layer - w.layers.data() + 1, hp.block_count);
  }

  model::RmsNorm(x, w.output_norm, hp.rms_norm_eps, normed);
  std::vector<float> logits(std::min(n, kLogitRows) * hp.vocab_size);
  for (std::int64_t row = 0; row < n; row += kLogitRows) {
    const std::int64_t rows = std::min(kLogitRows, n - row);
    const std::span<float> block(logits.data(), rows * hp.vocab_size);
    MatMul(std::span<const float>(normed).subspan(row * d, rows * d), rows, w.output, block);
    sink(row, rows, block);
  }
}

std::vector<float> LlamaModel::Logits(std::span<const std::int32_t> tokens, const AttentionOptions& attention) const {
  const std::int64_t vocab = hparams().vocab_size;
  std::vector<float> out(tokens.size() * vocab);
  Forward(tokens, attention, [&](std::int64_t row, std::int64_t, std::span<const float> logits) {
    std::copy(logits.begin(), logits.end(), out.begin() + row * vocab);
  });
  return out;
}

std::vector<double> LlamaModel::NextTokenNll(std::span<const std::int32_t> tokens, const AttentionOptions& attention,
                                             const LayerProgress& progress) const {
  const std::int64_t vocab = hparams().vocab_size;
  const auto n = static_cast<std::int64_t>(tokens.size());
  std::vector<double> nll(n - (n > 0 ? 1 : 0));
  Forward(
      tokens, attention,
      [&](std::int64_t row, std::int64_t rows, std::span<const float> logits) {
        // Row i predicts tokens[i + 1]; the last row predicts nothing.
        std::vector<std::int32_t> targets(rows, -1);
        std::vector<double> block(rows);
        for (std::int64_t r = 0; r < rows && row + r + 1 < n; ++r) targets[r] = tokens[row + r + 1];
        model::NegativeLogLikelihood(logits, vocab, targets, block);
        for (std::int64_t r = 0; r < rows && row + r + 1 < n; ++r) nll[row + r] = block[r];
      },
      progress);
  return nll;
}

double LlamaModel::ForwardFlops(std::int64_t n) const {
  Require(n >= 0, kOp, "tokens", n, "must be >= 0 (the number of tokens in the forward pass)");
  const LlamaHyperparams& hp = hparams();
  const double d = hp.embedding_length, hd = hp.head_dim, ffn = hp.feed_forward_length;
  const double q_dim = hp.head_count * hd, kv_dim = hp.head_count_kv * hd;
  const double tokens = static_cast<double>(n);
  const double linear_per_token = d * (q_dim + 2 * kv_dim) + q_dim * d + 3 * d * ffn;
  const double pairs = tokens * (tokens + 1) / 2;                         // causal (query, key) pairs
  const double attention_per_layer = 2 * 2 * pairs * hp.head_count * hd;  // q.k and p.v
  return hp.block_count * (2 * tokens * linear_per_token + attention_per_layer) +
         2 * tokens * d * static_cast<double>(hp.vocab_size);
}

}  // namespace posenc
