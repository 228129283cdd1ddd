// Attention with positional encodings as composable policies.
//
// One flash-style CPU kernel (tiles, online softmax, never an n x n matrix)
// takes every positional scheme as a policy: NoPE, RoPE (any
// frequency table), ReRoPE and Leaky ReRoPE, ALiBi, T5 bucket bias, Shaw's
// relative keys and values, URPE's Toeplitz-weighted probabilities; masks
// (causal, sliding window, the Λ shape of sinks + window) skip whole tiles;
// log-n query scaling, learned per-head sink logits, logit softcap and the
// attention factor of YaRN/LongRoPE compose with any of them.
//
// Shapes (strides allowed, head_dim contiguous; f32, f16 or bf16):
//   q   [batch, q_len,  q_heads,  head_dim]
//   k   [batch, kv_len, kv_heads, head_dim]   q_heads a multiple of kv_heads (GQA/MQA)
//   v   [batch, kv_len, kv_heads, v_dim]
//   out [batch, q_len,  q_heads,  v_dim]
// Positions are absolute token positions (a KV cache holds keys 0..kv_len-1
// and decodes queries at offset kv_len - q_len, say). Masks and relative
// encodings read positions, never indices.
#pragma once

#include <cstdint>
#include <optional>
#include <variant>
#include <vector>

#include "posenc/alibi.h"
#include "posenc/rope_frequencies.h"
#include "posenc/rope_spec.h"
#include "posenc/shaw_relative.h"
#include "posenc/t5_bias.h"
#include "posenc/tensor.h"
#include "posenc/token_positions.h"

namespace posenc {

// Which keys a query at position p may see (key at position j):
//   causal        j <= p
//   window W > 0  p - j < W: exactly W keys up to and including the query's
//                 own position (the other conventions: see the conversions)
//   sinks S > 0   with a window, keys j < S stay visible too: the Λ-shaped
//                 mask of LM-Infinite / StreamingLLM's attention sinks
struct AttentionMask {
  bool causal = true;
  std::int64_t window = 0;  // 0: no window
  std::int64_t sinks = 0;
  void Validate() const;
};

// Window conventions: Hugging Face's sliding_window counts the current token,
// so it is W as it is; flash-attention's window_size = (left, right) is
// inclusive on both sides (W = left + 1 on causal rows).
std::int64_t WindowFromFlashAttentionLeft(std::int64_t left);
std::int64_t WindowToFlashAttentionLeft(std::int64_t window);

// No positional information in attention (NoPE, or positions added to the
// embeddings before).
struct NoPositionEncoding {};

// RoPE: q and k arrive unrotated and are rotated by their positions inside
// (once per token, before the tiles: O(n d), against the O(n^2 d) of the
// tiles). The attention factor multiplies q and k, so logits by its square.
struct RopeEncoding {
  RopeSpec spec;
  RopeFrequencies frequencies;
};

// ReRoPE (Su Jianlin 2023): relative distances d = p - j below `window` use
// RoPE as usual; distances >= window read as `window`. Leaky ReRoPE (leak =
// k > 1): beyond the window the distance grows by 1/k, i.e. reads as
// window + (d - window)/k. One pass: tiles entirely inside or outside the
// window compute one score matrix, only tiles crossing it compute both.
struct ReRopeEncoding {
  RopeSpec spec;
  RopeFrequencies frequencies;
  std::int64_t window = 0;
  std::optional<double> leak;  // none: ReRoPE; k: Leaky ReRoPE
};

// Self-Extend (Jin et al. 2024, "LLM Maybe LongLM: Self-Extend LLM Context
// Window Without Tuning", datamllab/LongLM): distances d = p - j below
// `window` (the neighbour window W) use RoPE at the true positions; beyond
// it q sits at floor(p / G) + W - floor(W / G) and k at floor(j / G), with
// G = `group`: grouped positions, shifted so that the two parts join at
// d = W. Causal only. Same single pass as ReRoPE (group = 1 is plain RoPE).
//
// kKvShift is Self-Extend as llama.cpp runs it (--grp-attn-n G
// --grp-attn-w W, examples/main and examples/passkey; llama.cpp#4886): it
// never recomputes a key's RoPE but shifts and divides the positions of the
// KV cache every W tokens, so a query at p with c = floor(p / W)
// compressions behind it sits at p - c (W - W / G), the keys of the
// compressed blocks (j < c W) at floor(j / G), and only the keys of the
// query's own block of W keep their true distances: the neighbour window is
// the block, 1 to W keys, not the last W keys, and the grouped part lacks the
// shift that joins the two parts at d = W. W must be a multiple of G, as
// llama.cpp asserts.
enum class SelfExtendForm {
  kPublished,  // Jin et al.: the last W keys exact, the grouped query at floor(p / G) + W - floor(W / G)
  kKvShift,    // llama.cpp: the query's block of W keys exact, the grouped query at p - floor(p / W) (W - W / G)
};
struct SelfExtendEncoding {
  RopeSpec spec;
  RopeFrequencies frequencies;
  std::int64_t group = 0;   // G >= 1
  std::int64_t window = 0;  // W >= 1
  SelfExtendForm form = SelfExtendForm::kPublished;
};

// ALiBi: slopes per query head (AlibiSlopes), bias by form (alibi.h).
struct AlibiEncoding {
  std::vector<double> slopes;
  AlibiForm form = AlibiForm::kDistance;
};

// T5: weights [num_buckets, q_heads] as Hugging Face's
// relative_attention_bias.weight; bucket of (key position - query position).
struct T5BiasEncoding {
  T5BucketSpec buckets;
  std::vector<double> weights;
};

// Shaw et al. / BERT relative_key(_query): learned vectors per clipped
// relative distance (shaw_relative.h), shared by all heads. rel_k
// [2K+1, head_dim] when the key or query term is on, rel_v [2K+1, v_dim]
// when the value term is. Distances beyond K share one row, so the kernel
// adds them as constants over whole runs of keys.
struct ShawEncoding {
  ShawRelativeSpec spec;
  std::vector<double> rel_k;
  std::vector<double> rel_v;
};

// URPE (Luo et al., NeurIPS 2022, "Your Transformer May Not be as Powerful
// as You Expect"): out_i = sum_j softmax_j(s_ij + B_h(j - i)) C_h(j - i) v_j,
// a relative bias B and a Toeplitz weight C per head, both by T5 buckets of
// key - query position ([num_buckets, q_heads] each, HF's layout). C
// multiplies each probability inside the online softmax, on the value side
// only: the rows are not renormalized. C = 1 is T5's bias exactly.
struct UrpeEncoding {
  T5BucketSpec buckets;
  std::vector<double> bias;   // B
  std::vector<double> scale;  // C
};

using PositionEncoding = std::variant<NoPositionEncoding, RopeEncoding, ReRopeEncoding, SelfExtendEncoding,
                                      AlibiEncoding, T5BiasEncoding, ShawEncoding, UrpeEncoding>;

struct AttentionOptions {
  PositionEncoding encoding = NoPositionEncoding{};
  AttentionMask mask;
  // Multiplies q.k; default 1/sqrt(head_dim).
  std::optional<double> softmax_scale;
  // Log-n scaling (Su; Chiang & Cholak): a query at position p is scaled by
  // max(1, ln(p + 1) / ln(train_length)): 1 up to the training length,
  // log_{L_train} of the number of tokens seen beyond it. 0: off.
  std::int64_t logn_train_length = 0;
  // Learned per-head sink logits (gpt-oss): a virtual key with this logit and
  // a zero value joins every softmax. Empty: none. Not StreamingLLM's sinks.
  std::vector<double> sink_logits;
  // Logit soft-capping (Gemma 2): s -> cap * tanh(s / cap). 0: off.
  double softcap = 0;
};

struct AttentionInputs {
  ConstTensorView q, k, v;
  TensorView out;
  // None: the q_len queries are the last q_len tokens of each row's keys,
  // at kv_len - q_len (or kv_lengths[b] - q_len) onwards — self-attention
  // when q_len == kv_len, decode after a cache otherwise. The Python
  // binding's default is this one.
  std::optional<TokenPositions> q_positions;
  TokenPositions k_positions = TokenPositions::Offset(0);
  // Valid keys per batch row (a batch of sequences of different lengths);
  // keys past it are never seen. Empty: all kv_len keys.
  std::vector<std::int64_t> kv_lengths;
};

// The query positions of a call: inputs.q_positions, or the default above
// (an Error when q_len exceeds a row's keys).
TokenPositions QueryPositions(const AttentionInputs& inputs);

// Throws posenc::Error naming the first bad argument (shapes, head counts,
// dtypes, positions, policy parameters). Both implementations call it.
void ValidateAttention(const AttentionInputs& inputs, const AttentionOptions& options);

// The fast kernel: Highway SIMD, multithreaded, bitwise-identical results
// for any thread count (each output row is reduced by one thread in a fixed
// order).
void Attention(const AttentionInputs& inputs, const AttentionOptions& options);

namespace reference {
// Float64, materialized scores, each method by its own definition (ReRoPE:
// two score matrices selected by |p - j| < window, as in bojone/rerope).
void Attention(const AttentionInputs& inputs, const AttentionOptions& options);
}  // namespace reference

}  // namespace posenc
