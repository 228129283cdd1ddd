// A tiny decoder-only byte-level language model with every positional scheme:
// its loss and gradients, for "train short, test long" (Press et al. 2022).
//
// The model (pre-norm, no biases, d = d_model, hd = d / heads, F = ffn_hidden):
//   x = token_embd[token] (+ the position's sinusoid or learned row)
//       (sinusoidal: token_embd[token] * sqrt(d) + sinusoid, Vaswani et al.'s
//       embedding scale, so that the unit-amplitude sinusoid does not drown
//       embeddings initialised at 0.02)
//   per block:  x += attn_output( Attention( attn_qkv( RmsNorm(x) ) ) )
//               x += ffn_down( GeluTanh( ffn_up( RmsNorm(x) ) ) )
//   logits = RmsNorm(x) token_embd^T      (output projection tied to the
//                                          token embedding, as GPT-2)
// Attention is causal, one softmax per (sequence, head) over keys j <= i,
// scores q_i.k_j / sqrt(hd) plus the scheme's terms (position_scheme.h):
//   nope        nothing
//   sinusoidal  Vaswani et al.'s sinusoid added to the input (interleaved)
//   learned     a trained row per position added to the input
//   shaw        Shaw et al. 2018, relative keys and values: a^K, a^V per
//               clipped distance j - i in [-clip, clip], one table per
//               layer shared by the heads (ShawRelativeSpec layout)
//   t5          T5's causal buckets of i - j, a learned bias per (bucket,
//               head), one table shared by every layer (as in T5)
//   alibi       -slope_h (i - j), AlibiSlopes' fixed slopes
//   rope        q and k rotated by RoPE, half-split pairs
//   kerple      KERPLE-log (Chi et al. 2022): -r1_h log(1 + r2_h (i - j)),
//               per layer and head, r = softplus(raw) > 0 (the paper clamps
//               r >= 0.01 after each step instead; softplus keeps the loss
//               smooth and needs nothing from the optimizer)
//   fire        FIRE (Li et al. 2024): a per-layer MLP of the distance,
//               log-scaled and divided by the query's own log position
//
// The MLP is GELU (tanh approximation) as in GPT-2 and in the models of the
// ALiBi and KERPLE papers: two matrices, one activation.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/position_scheme.h"
#include "posenc/rope_spec.h"

namespace posenc {

// What a learned table does past its train_length rows (evaluation only).
enum class LearnedPastTable {
  kError,         // an error naming the position and the table size
  kHierarchical,  // Su's hierarchical decomposition (learned_table.h), to train_length^2
};
std::string_view LearnedPastTableName(LearnedPastTable policy);  // "error" / "hierarchical"
LearnedPastTable ParseLearnedPastTable(std::string_view name);

struct TinyLmConfig {
  static constexpr std::int64_t kVocab = 256;  // bytes
  std::int64_t d_model = 128;
  std::int64_t layers = 4;
  std::int64_t heads = 4;
  std::int64_t ffn_hidden = 512;
  std::int64_t train_length = 128;
  // Randomized positions (Ruoss et al. 2023): 0, the tokens of a pass sit at
  // positions 0..T-1; M > 0, every pass (training and evaluation) puts them
  // at an ordered random subset of [0, M) (RandomizedPositions), so that a
  // model trained at length L has seen the distances and positions of
  // lengths up to M. M >= train_length.
  std::int64_t position_range = 0;
  PositionScheme scheme = RopeScheme{};
  double norm_eps = 1e-5;
  // Not a hyperparameter (never stored): what an evaluation does past a
  // learned table.
  LearnedPastTable learned_past_table = LearnedPastTable::kError;

  std::int64_t HeadDim() const { return d_model / heads; }
  // Positions a training pass reaches: 0..PositionExtent()-1 (what a
  // learned table has rows for).
  std::int64_t PositionExtent() const { return std::max(train_length, position_range); }

  // The one field list (position_scheme.h's ConfigField): the model's
  // sizes (VisitModelFields), then the scheme's own fields. Checkpoints,
  // grid files and flags are written and read through it; the scheme's
  // name is stored beside it under the key "scheme" (it says which fields
  // follow).
  template <class Self, class Visitor>
  static void VisitModelFields(Self& self, Visitor&& visit) {
    visit(ConfigField{"train_length", "--train-len", "Training length L (bytes a sequence)"}, self.train_length);
    visit(ConfigField{"d_model", "--d-model", "Model width"}, self.d_model);
    visit(ConfigField{"layers", "--layers", "Blocks"}, self.layers);
    visit(ConfigField{"heads", "--heads", "Attention heads"}, self.heads);
    visit(ConfigField{"ffn_hidden", "--ffn", "MLP hidden width"}, self.ffn_hidden);
    visit(ConfigField{"norm_eps", "", "RMSNorm epsilon"}, self.norm_eps);
    visit(ConfigField{"position_range", "--position-range",
                      "Randomized positions (Ruoss et al. 2023): every pass at an ordered random subset of [0, M); "
                      "0: positions 0..T-1",
                      true},
          self.position_range);
  }
  template <class Self, class Visitor>
  static void VisitFields(Self& self, Visitor&& visit) {
    VisitModelFields(self, visit);
    VisitSchemeFields(self.scheme, visit);
  }
};

// Throws posenc::Error "[tiny_lm] parameter = value: rule" for the first
// field that breaks a rule (sizes >= 1, heads dividing d_model,
// train_length >= 2, then the scheme's own rules: an even head_dim for
// rope, the T5 bucket rules, ...).
void ValidateTinyLmConfig(const TinyLmConfig& config);

// The RoPE of a rope model: theta = its rope_theta, every dimension of a
// head rotated, half-split pairs (i, i + hd/2), as GPT-NeoX and Llama in
// HF. Throws posenc::Error for a model of another scheme.
RopeSpec TinyLmRopeSpec(const TinyLmConfig& config);

// One float32 tensor, row-major, outermost dimension first (PyTorch order;
// GGUF's ne lists the same dimensions reversed).
struct TinyLmTensor {
  std::string name;  // GGUF style: "token_embd.weight", "blk.0.attn_qkv.weight"
  std::vector<std::int64_t> shape;
  std::vector<float> values;
  bool decays = false;  // AdamW's weight decay applies (matrices, not positional tables)
};

struct TinyLmBlock {
  TinyLmTensor attn_norm;            // "blk.N.attn_norm.weight"   [d]
  TinyLmTensor attn_qkv;             // "blk.N.attn_qkv.weight"    [3d, d]: q | k | v rows, head h at rows h*hd..
  TinyLmTensor attn_output;          // "blk.N.attn_output.weight" [d, d]
  std::vector<TinyLmTensor> scheme;  // the scheme's tensors of this layer (shaw: attn_rel_k, attn_rel_v; ...)
  TinyLmTensor ffn_norm;             // "blk.N.ffn_norm.weight"    [d]
  TinyLmTensor ffn_up;               // "blk.N.ffn_up.weight"      [F, d]
  TinyLmTensor ffn_down;             // "blk.N.ffn_down.weight"    [d, F]
};

// The scheme's tensors are its own (src/train/schemes/): names, shapes,
// initialization and weight decay. Their names are those of the
// checkpoints: "position_embd.weight" [train_length, d] (learned),
// "attn_rel_b.weight" [buckets, heads] (t5), "blk.N.attn_rel_k.weight"
// [2 clip + 1, hd] (shaw), "blk.N.attn_kerple_r1.weight" [heads] (kerple),
// "blk.N.attn_fire_w1.weight" (fire), ...
struct TinyLmParams {
  TinyLmTensor token_embd;           // "token_embd.weight"    [256, d], also the output projection
  std::vector<TinyLmTensor> scheme;  // the scheme's model-wide tensors
  std::vector<TinyLmBlock> blocks;
  TinyLmTensor output_norm;  // "output_norm.weight" [d]

  // The tensor called `name`; throws posenc::Error naming it when the
  // model has none.
  TinyLmTensor& Tensor(std::string_view name);
  const TinyLmTensor& Tensor(std::string_view name) const;
};

// The config's tensors with their names and shapes, all zero.
TinyLmParams ZeroTinyLmParams(const TinyLmConfig& config);
// Deterministic on every machine: element e of a tensor depends only on
// (seed, tensor name, e) (SplitMix64 counters, Box-Muller written here), so
// two schemes with one seed share every tensor they have in common.
// Normal(0, 0.02); attn_output and ffn_down / sqrt(2 layers) (GPT-2);
// norms 1; each scheme's tensors by its own rule (position_embd 0.01 as
// GPT-2's wpe; KERPLE r1 ~ U(0, 2), r2 ~ U(0, 1), at least 0.01, the
// paper's init and clamp; FIRE as PyTorch's nn.Linear and the authors').
TinyLmParams InitTinyLm(const TinyLmConfig& config, std::uint64_t seed);
// Throws posenc::Error naming the tensor unless params has exactly the
// config's tensors (names, shapes, sizes).
void ValidateTinyLmParams(const TinyLmConfig& config, const TinyLmParams& params);
// How many parameters (float32 values) the config's model has, counted
// from the shapes without allocating them (a size check comes first).
std::int64_t TinyLmParameterCount(const TinyLmConfig& config);
// Every tensor of the config's model, in a fixed order (token_embd, the
// scheme's model-wide tensors, blocks in order, output_norm): what a
// checkpoint writes and an optimizer walks (params and grads side by side).
std::vector<TinyLmTensor*> TinyLmTensorList(const TinyLmConfig& config, TinyLmParams& params);
std::vector<const TinyLmTensor*> TinyLmTensorList(const TinyLmConfig& config, const TinyLmParams& params);

struct TinyLmLossResult {
  double loss = 0.0;                  // mean cross-entropy (natural log) over the scored predictions
  std::vector<double> position_loss;  // [length]: at each position, the mean over the batch, scored or not
  std::vector<double> token_loss;     // [batch, length]: each prediction's loss (a sliding evaluation scores some)
  // [batch, length]: each prediction's most likely byte (the first of equal
  // logits): what an exact-match task compares with its answer.
  std::vector<std::uint8_t> prediction;
};

// tokens: [batch, length + 1] bytes; inputs are tokens[b, 0..length-1] at
// positions 0..length-1, targets tokens[b, 1..length], or `targets`
// [batch, length] where given (a prediction scored against another byte
// than the next one: the tasks' previous-byte training rows,
// tiny_lm_tasks.h; the rows' last bytes are then unused). float32 throughout,
// matrix products through MatMul. `scored` [batch, length] (empty: every
// prediction) says which predictions the loss averages: 1 for a byte of an
// answer of a task (tiny_lm_tasks.h), whose other bytes are context the
// model is not asked to predict; at least one must be scored. With grads
// non-null, *grads is overwritten with d loss / d every parameter
// (ZeroTinyLmParams' layout; not &params);
// gradients need length <= train_length. Evaluation (grads null) may run
// past train_length; a learned table then needs kHierarchical. Evaluation
// throws posenc::Error for a logit that is NaN, infinite or of magnitude
// 2^16 or more, past which a log-softmax measures rounding (naming the
// sequence, the position and the byte); training keeps its own rule, a
// loss or gradient that is not finite.
// `positions` [length] puts the tokens of every sequence of the batch at
// those positions (strictly increasing, from >= 0: randomized positions,
// RandomizedPositions); empty: 0..length-1. With gradients they stay below
// config.PositionExtent().
// The loss and every gradient are bitwise identical for any thread count.
TinyLmLossResult TinyLmLoss(const TinyLmConfig& config, const TinyLmParams& params,
                            std::span<const std::uint8_t> tokens, std::int64_t batch, std::int64_t length,
                            TinyLmParams* grads = nullptr, std::span<const std::uint8_t> scored = {},
                            std::span<const std::int64_t> positions = {}, std::span<const std::uint8_t> targets = {});

namespace reference {
// The same loss in float64 (parameters read as float32, exactly), one
// sequence at a time, written as the formulas read: no MatMul, no threads.
TinyLmLossResult TinyLmLoss(const TinyLmConfig& config, const TinyLmParams& params,
                            std::span<const std::uint8_t> tokens, std::int64_t batch, std::int64_t length,
                            std::span<const std::int64_t> positions = {});
}  // namespace reference

// Randomized positions (Ruoss et al. 2023): `length` distinct positions
// drawn uniformly from [0, range), in increasing order; a pure function of
// (range, length, seed). Throws posenc::Error unless 1 <= length <= range
// <= 2^20.
std::vector<std::int64_t> RandomizedPositions(std::int64_t range, std::int64_t length, std::uint64_t seed);

}  // namespace posenc
