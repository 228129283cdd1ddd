// Naive float64 attention with materialized scores: the references for every
// relative position form (T5 bias, ALiBi and Shaw here; XLNet and DeBERTa in
// their own headers). None of this is reachable from attention.h. Slow and plain on purpose: fused attention kernels
// are tested against these, and these against Hugging Face.
//
// Layout (all contiguous, row-major, float64):
//   q  [batch, heads, q_len, head_dim]
//   k  [batch, heads, k_len, head_dim]
//   v  [batch, heads, k_len, value_dim]
// Query i sits at absolute position query_offset + i (default k_len - q_len:
// self-attention, or the last q_len tokens of a KV cache); key j at j.
//
// Every form returns the same three materialized tensors:
//   scores  [batch, heads, q_len, k_len]  the logits: scale * content term
//           plus the form's positional terms, before masking
//   probs   [batch, heads, q_len, k_len]  softmax over the allowed keys
//           (masked entries are exactly 0; a row with no allowed key is all 0)
//   output  [batch, heads, q_len, value_dim] = probs @ v (+ the form's value term)
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "posenc/alibi.h"
#include "posenc/shaw_relative.h"
#include "posenc/t5_bias.h"

namespace posenc {

struct RelativeAttentionShape {
  std::int64_t batch = 0;
  std::int64_t heads = 0;
  std::int64_t q_len = 0;
  std::int64_t k_len = 0;
  std::int64_t head_dim = 0;
  std::int64_t value_dim = 0;  // 0 = head_dim

  std::int64_t ValueDim() const { return value_dim == 0 ? head_dim : value_dim; }
  // Throws posenc::Error "[op] ..." naming the first extent that is not > 0.
  void Validate(std::string_view op) const;
};

enum class RelativeAttentionMask {
  kNone,    // every query sees every key (encoders)
  kCausal,  // query at position p sees keys j <= p
};

struct RelativeAttentionInputs {
  RelativeAttentionShape shape;
  std::span<const double> q;
  std::span<const double> k;
  std::span<const double> v;
  // Multiplies the content term q.k; unset = the form's own scale
  // (1/sqrt(head_dim); T5: 1; DeBERTa: 1/sqrt(head_dim * (1 + #terms))).
  std::optional<double> scale;
  RelativeAttentionMask mask = RelativeAttentionMask::kNone;
  std::optional<std::int64_t> query_offset;   // unset = k_len - q_len
  std::span<const std::uint8_t> key_padding;  // empty, or [batch, k_len]: 1 = attend, 0 = padding

  std::int64_t QueryOffset() const { return query_offset.value_or(shape.k_len - shape.q_len); }
  // Throws posenc::Error "[op] ..." unless sizes match the shape.
  void Validate(std::string_view op) const;
};

struct RelativeAttentionResult {
  std::vector<double> scores;
  std::vector<double> probs;
  std::vector<double> output;
};

namespace reference {

// No positional term: scores = scale * q.k.
RelativeAttentionResult PlainAttention(const RelativeAttentionInputs& inputs);

// scores = scale * q.k + bias, bias [heads, q_len, k_len] (shared by the
// batch) or [batch, heads, q_len, k_len].
RelativeAttentionResult BiasedAttention(const RelativeAttentionInputs& inputs, std::span<const double> bias);

// ALiBi: BiasedAttention with AlibiBias(spec, q_len, k_len, query offset)
// (BLOOM's scale 1/sqrt(head_dim) on q.k, the bias unscaled).
RelativeAttentionResult AlibiAttention(const RelativeAttentionInputs& inputs, const AlibiSpec& spec);

// T5: BiasedAttention with T5Bias; weights [num_buckets, heads]. T5 does not
// scale q.k: the default scale here is 1.
RelativeAttentionResult T5Attention(const RelativeAttentionInputs& inputs, const T5BucketSpec& spec,
                                    std::span<const double> weights);

// Shaw / BERT relative: rel_k [spec.Rows(), head_dim] (needed when key_term
// or query_term), rel_v [spec.Rows(), value_dim] (needed when value_term);
// an unused table may be empty. Default scale 1/sqrt(head_dim).
RelativeAttentionResult ShawAttention(const RelativeAttentionInputs& inputs, const ShawRelativeSpec& spec,
                                      std::span<const double> rel_k, std::span<const double> rel_v);

}  // namespace reference
}  // namespace posenc
