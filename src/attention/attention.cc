// Prepares an attention call (attention_plan.h) and runs the tiled kernel:
// dense float32 copies, positions, the encoding lowered by its own rules
// (encodings/), the scale folded into q.
#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "attention/attention_plan.h"
#include "attention/attention_rules.h"
#include "attention/lowering/encoding_lowering.h"
#include "posenc/error.h"
#include "posenc/parallel.h"

namespace posenc {
namespace {

// A dense float32 copy of a strided view, [batch][seq][heads][dim], into
// `out` (whose capacity is reused).
void ToDenseF32(const ConstTensorView& t, std::vector<float>& out) {
  const std::int64_t batch = t.shape[0], seq = t.shape[1], heads = t.shape[2], dim = t.shape[3];
  out.resize(static_cast<std::size_t>(batch * seq * heads * dim));
  ParallelFor(batch * seq, 16, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t token = begin; token < end; ++token) {
      const std::int64_t b = token / seq, s = token % seq;
      for (std::int64_t h = 0; h < heads; ++h) {
        float* dst = out.data() + ((token * heads) + h) * dim;
        const std::int64_t at = t.Offset(b, s, h);
        switch (t.dtype) {
          case DType::kF32: std::memcpy(dst, static_cast<const float*>(t.data) + at, dim * sizeof(float)); break;
          case DType::kF16:
            for (std::int64_t d = 0; d < dim; ++d) dst[d] = F16ToF32(static_cast<const std::uint16_t*>(t.data)[at + d]);
            break;
          case DType::kBF16:
            for (std::int64_t d = 0; d < dim; ++d)
              dst[d] = BF16ToF32(static_cast<const std::uint16_t*>(t.data)[at + d]);
            break;
        }
      }
    }
  });
}

// The float32 copies of q, k and v are kept per thread between calls: on
// this class of machine faulting in fresh pages costs more than the copies.
struct RecycledBuffers {
  std::vector<float> q1, q2, k1, k2, v;
  void Lend(detail::AttentionPlan& plan) {
    plan.q1 = std::move(q1), plan.q2 = std::move(q2), plan.k1 = std::move(k1), plan.k2 = std::move(k2);
    plan.v = std::move(v);
  }
  void Return(detail::AttentionPlan& plan) {
    q1 = std::move(plan.q1), q2 = std::move(plan.q2), k1 = std::move(plan.k1), k2 = std::move(plan.k2);
    v = std::move(plan.v);
  }
};

std::vector<std::int64_t> AllPositions(const TokenPositions& positions, std::int64_t batch, std::int64_t seq) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(batch * seq));
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t s = 0; s < seq; ++s) out[b * seq + s] = positions.At(b, s, seq);
  }
  return out;
}

}  // namespace

namespace detail {

bool PrepareAttentionPlan(const AttentionInputs& inputs, const AttentionOptions& options, AttentionPlan& plan) {
  ValidateAttention(inputs, options);
  // A plan reused for another call (a model's layers, decode steps) starts
  // from the defaults: what one encoding sets (ReRoPE's window and far
  // copies, a bias, Shaw's rows) must not reach a call with another. Only
  // the dense copies' buffers are carried over, for their capacity.
  AttentionPlan fresh{};
  for (auto [to, from] :
       {std::pair{&fresh.q1, &plan.q1}, std::pair{&fresh.q2, &plan.q2}, std::pair{&fresh.k1, &plan.k1},
        std::pair{&fresh.k2, &plan.k2}, std::pair{&fresh.v, &plan.v}}) {
    *to = std::move(*from);
    to->clear();
  }
  plan = std::move(fresh);
  AttentionInputs in = inputs;
  in.q_positions = QueryPositions(inputs);  // the encodings' lowering reads *in.q_positions
  const std::int64_t batch = in.q.shape[0], q_len = in.q.shape[1], q_heads = in.q.shape[2], head_dim = in.q.shape[3];
  plan.batch = batch;
  plan.q_len = q_len;
  plan.kv_len = in.k.seq();
  plan.q_heads = q_heads;
  plan.kv_heads = in.k.heads();
  plan.group = q_heads / plan.kv_heads;
  plan.head_dim = head_dim;
  plan.v_dim = in.v.head_dim();
  plan.out = in.out;
  plan.mask = options.mask;
  if (batch * q_len * q_heads == 0) return false;

  ToDenseF32(in.q, plan.q1);
  ToDenseF32(in.k, plan.k1);
  ToDenseF32(in.v, plan.v);
  plan.q_positions = AllPositions(*in.q_positions, batch, q_len);
  plan.k_positions = AllPositions(in.k_positions, batch, plan.kv_len);
  for (std::int64_t b = 0; b < batch && plan.keys_consecutive; ++b) {
    for (std::int64_t s = 1; s < plan.kv_len; ++s) {
      if (plan.k_positions[b * plan.kv_len + s] != plan.k_positions[b * plan.kv_len + s - 1] + 1) {
        plan.keys_consecutive = false;
        break;
      }
    }
  }
  plan.kv_valid = in.kv_lengths.empty() ? std::vector<std::int64_t>(batch, plan.kv_len) : in.kv_lengths;

  // The softmax scale, the attention factor squared and log-n, per query
  // token; folded into q once the encoding is lowered.
  const double scale = SoftmaxScale(options, head_dim) * AttentionFactorSquared(options.encoding);
  plan.q_factor.resize(static_cast<std::size_t>(batch * q_len));
  for (std::int64_t token = 0; token < batch * q_len; ++token) {
    plan.q_factor[token] = static_cast<float>(scale * LognFactor(options.logn_train_length, plan.q_positions[token]));
  }
  std::visit([&](const auto& encoding) { LowerEncoding(encoding, in, plan); }, options.encoding);
  for (std::vector<float>* q : {&plan.q1, &plan.q2}) {
    if (q->empty()) continue;
    ParallelFor(batch * q_len, 16, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t token = begin; token < end; ++token) {
        float* row = q->data() + token * q_heads * head_dim;
        for (std::int64_t i = 0; i < q_heads * head_dim; ++i) row[i] *= plan.q_factor[token];
      }
    });
  }
  plan.softcap = static_cast<float>(options.softcap);
  plan.sink_logits.assign(options.sink_logits.begin(), options.sink_logits.end());
  return true;
}

}  // namespace detail

void Attention(const AttentionInputs& inputs, const AttentionOptions& options) {
  static thread_local RecycledBuffers recycled;
  detail::AttentionPlan plan{};
  recycled.Lend(plan);
  try {
    if (detail::PrepareAttentionPlan(inputs, options, plan)) detail::RunAttentionPlan(plan);
  } catch (...) {
    recycled.Return(plan);
    throw;
  }
  recycled.Return(plan);
}

}  // namespace posenc
