// Internal pieces of the tiny language model (include/posenc/tiny_lm.h): the
// checks both losses share and the float32 steps of the forward and
// backward passes (the schemes' parts: scheme_trainer.h).
//
// Shapes: B batch, T length, N = B*T rows (row n = b*T + t), d = d_model,
// H heads, hd = d/H, F = ffn_hidden, L layers, V = 256.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "posenc/attention.h"
#include "posenc/rope.h"
#include "posenc/tiny_lm.h"
#include "train/scheme_trainer.h"

namespace posenc::tiny_lm {

inline constexpr const char* kOp = "tiny_lm";

// Layer l's attention as posenc::Attention's options.
using KernelAttention = std::function<AttentionOptions(std::int64_t layer)>;

// TinyLmLoss (tiny_lm_model.cc), and for evaluation through the attention
// kernel (a context-extension method, or the scheme's own lowering): with
// kernel_attention set (and grads null) every layer's attention is
// posenc::Attention under kernel_attention(layer), q and k unrotated.
TinyLmLossResult Loss(const TinyLmConfig& config, const TinyLmParams& params, std::span<const std::uint8_t> tokens,
                      std::int64_t batch, std::int64_t length, TinyLmParams* grads,
                      const KernelAttention& kernel_attention, std::span<const std::uint8_t> scored = {},
                      std::span<const std::int64_t> positions = {}, std::span<const std::uint8_t> targets = {});

// The scheme's own attention of every layer as posenc::Attention's
// options (causal), or an empty function where the kernel has no form of
// the scheme (SchemeTrainer::KernelEncoding).
KernelAttention SchemeKernelAttention(const TinyLmConfig& config, const TinyLmParams& params);

// Throws posenc::Error unless the config, the params, the tokens, the
// length and the positions (empty, or [length] strictly increasing from
// >= 0) fit, the scheme's rules included (tiny_lm_config.cc). `gradients`:
// a training call.
void ValidateLossCall(const TinyLmConfig& config, const TinyLmParams& params, std::span<const std::uint8_t> tokens,
                      std::int64_t batch, std::int64_t length, std::span<const std::int64_t> positions, bool gradients);

// The positions of an evaluation call of `length` tokens whose first
// sequence is number `first`: empty (0..T-1) for a model without
// randomized positions, else an ordered random subset of [0,
// position_range), a pure function of (length, first), as in training.
// Throws posenc::Error when length > position_range.
std::vector<std::int64_t> EvaluationPositions(const TinyLmConfig& config, std::int64_t length, std::int64_t first);

// Throws posenc::Error "[tiny_lm] name = value: must be in [low, high]why".
void RequireInRange(std::int64_t value, std::int64_t low, std::int64_t high, const char* name, const char* why);

// Far above any tiny model, low enough that a typo is refused before it
// allocates gigabytes.
inline constexpr std::int64_t kMaxWidth = std::int64_t{1} << 16;
inline constexpr std::int64_t kMaxLength = std::int64_t{1} << 20;

// RoPE by `spec` on the q and k columns of qkv [N, 3d], in place, each row
// at its position (`positions`, [B T]): kForward rotates, kBackward maps
// gradients back.
void RotateQueriesKeys(const RopeSpec& spec, const RopeFrequencies& frequencies, std::span<float> qkv,
                       std::int64_t batch, std::int64_t length, std::int64_t heads, const TokenPositions& positions,
                       RopeDirection direction);

// ----------------------------------------------------- tiny_lm_attention.cc

struct AttentionShape {
  std::int64_t batch = 0, length = 0, heads = 0, head_dim = 0;
  // The tokens' positions [T], shared by the batch, strictly increasing
  // (randomized positions); empty: 0..T-1.
  std::span<const std::int64_t> positions;
  std::int64_t d() const { return heads * head_dim; }
  std::int64_t Position(std::int64_t t) const { return positions.empty() ? t : positions[t]; }
  // The terms indexed by a distance or a position cover 0..Extent()-1.
  std::int64_t Extent() const { return positions.empty() ? length : positions.back() + 1; }
};

// A relative table, float32 (scheme_trainer.h's RelativeTableTerm).
struct AttentionTable {
  std::span<const float> values;  // [H, rows, hd] when per_head, else [rows, hd]; empty: none
  bool per_head = false;
  std::int64_t rows = 0;
  std::span<const std::int64_t> row_of_distance;  // [E], E = AttentionShape::Extent()

  bool empty() const { return values.empty(); }
  // Floats a (sequence, head) task reads of it: one head's rows.
  std::int64_t HeadSize(std::int64_t head_dim) const { return rows * head_dim; }
};

// One layer's positional terms, float32 (scheme_trainer.h's LayerTerms).
struct AttentionTerms {
  float scale = 0;                       // 0: 1 / sqrt(hd)
  std::span<const float> distance_bias;  // [H, E] or empty, E = AttentionShape::Extent()
  std::span<const float> pair_bias;      // [H, E, E] (h, query position, distance) or empty
  AttentionTable query_table, key_table, value_table;
  std::span<const float> key_bias;            // [H, hd] or empty
  std::span<const float> probability_weight;  // [H, E] or empty
};

// A layer's terms (scheme_trainer.h's LayerTerms, float64) with their
// float32 copies, and the attention's view of them (valid while this lives).
struct FloatLayerTerms {
  FloatLayerTerms() = default;
  explicit FloatLayerTerms(LayerTerms terms);
  AttentionTerms View() const;

  LayerTerms terms;
  std::vector<float> distance_bias, pair_bias, query_table, key_table, value_table, key_bias, probability_weight;
};

// qkv [N, 3d] (q and k already rotated for RoPE) -> out [N, d], heads side
// by side. Parallel over (b, h); each row's softmax in a fixed order.
void AttentionForward(const AttentionShape& shape, const AttentionTerms& terms, std::span<const float> qkv,
                      std::span<float> out);

struct AttentionGrads {
  std::vector<float> dqkv;  // [N, 3d]
  // d loss / d each term, float64, the terms' shapes; empty where a term is.
  std::vector<double> dbias, dpair, dquery_table, dkey_table, dvalue_table, dkey_bias, dprobability_weight;
};

// Given dout [N, d], the gradients of qkv and of the terms. Parameter
// partials are kept per (b, h) and summed in (b, h) order afterwards.
AttentionGrads AttentionBackward(const AttentionShape& shape, const AttentionTerms& terms, std::span<const float> qkv,
                                 std::span<const float> dout);

// ----------------------------------------------------------- tiny_lm_ops.cc

// y [rows, out] = x [rows, in] W^T, W = w [out, in], through MatMul.
void LinearForward(std::span<const float> x, std::int64_t rows, const TinyLmTensor& w, std::span<float> y);
// dx [rows, in] = dy W (overwritten) and dw [out, in] = dy^T x (overwritten),
// both through MatMul with explicitly transposed operands.
void LinearBackward(std::span<const float> x, std::span<const float> dy, std::int64_t rows, const TinyLmTensor& w,
                    std::span<float> dx, std::span<float> dw);

// y = x / rms(x) * gain per row of [rows, d]; inv_rms [rows] kept for the backward.
void RmsNormForward(std::span<const float> x, std::span<const float> gain, double eps, std::span<float> y,
                    std::span<float> inv_rms);
// dx += d loss / dx (accumulated into the residual gradient); dgain overwritten.
void RmsNormBackward(std::span<const float> x, std::span<const float> gain, std::span<const float> inv_rms,
                     std::span<const float> dy, std::span<float> dx, std::span<float> dgain);

// GELU, tanh approximation, element-wise.
void GeluForward(std::span<const float> u, std::span<float> a);
void GeluBackward(std::span<const float> u, std::span<const float> da, std::span<float> du);

// Per row of logits [rows, V]: row_loss = logsumexp - logit[target]
// (float64) and argmax = the first largest logit; with dlogits non-empty,
// dlogits = (softmax - onehot) * scale for the rows `scored` marks (every
// row when it is empty) and 0 for the others.
void CrossEntropy(std::span<const float> logits, std::span<const std::uint8_t> targets,
                  std::span<const std::uint8_t> scored, float scale, std::span<double> row_loss,
                  std::span<std::uint8_t> argmax, std::span<float> dlogits);

}  // namespace posenc::tiny_lm
