// Prepares an attention call (attention_plan.h) and runs the tiled kernel.
#include <algorithm>
#include <cstring>

#include "attention/attention_plan.h"
#include "attention/attention_rules.h"
#include "posenc/error.h"
#include "posenc/parallel.h"
#include "posenc/rope.h"

namespace posenc {
namespace {

// A dense float32 copy of a strided view, [batch][seq][heads][dim], into
// `out` (whose capacity is reused).
void ToDenseF32(const ConstTensorView& t, std::vector<float>& out) {
  const auto [batch, seq, heads, dim] = t.shape;
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
            for (std::int64_t d = 0; d < dim; ++d) dst[d] = BF16ToF32(static_cast<const std::uint16_t*>(t.data)[at + d]);
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
    plan.q2.clear();
    plan.k2.clear();
  }
  void Return(detail::AttentionPlan& plan) {
    q1 = std::move(plan.q1), q2 = std::move(plan.q2), k1 = std::move(plan.k1), k2 = std::move(plan.k2);
    v = std::move(plan.v);
  }
};

TensorView DenseView(std::vector<float>& data, std::array<std::int64_t, 4> shape) {
  return TensorView::Contiguous(data.data(), DType::kF32, shape);
}

void RotateInPlace(const RopeSpec& spec, const RopeFrequencies& frequencies, std::vector<float>& data,
                   std::array<std::int64_t, 4> shape, const TokenPositions& positions) {
  ApplyRope(spec, frequencies, RopeCall{{RopeOperand::InPlace(DenseView(data, shape))}, positions});
}

std::vector<std::int64_t> AllPositions(const TokenPositions& positions, std::int64_t batch, std::int64_t seq) {
  std::vector<std::int64_t> out(static_cast<std::size_t>(batch * seq));
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t s = 0; s < seq; ++s) out[b * seq + s] = positions.At(b, s, seq);
  }
  return out;
}

// q and k through the positional encoding: rotated copies for RoPE; for
// ReRoPE also the far-part copies (q at the window / leaky position, k
// unrotated / at j/k).
void EncodeQk(const AttentionInputs& in, const PositionEncoding& encoding, detail::AttentionPlan& plan) {
  const std::array<std::int64_t, 4> q_shape = in.q.shape, k_shape = in.k.shape;
  // The attention factor is folded into the softmax scale (squared), so the
  // rotations themselves use a unit factor.
  const auto unit = [](RopeFrequencies f) {
    f.attention_factor = 1.0;
    return f;
  };
  if (const auto* rope = std::get_if<RopeEncoding>(&encoding)) {
    RotateInPlace(rope->spec, unit(rope->frequencies), plan.q1, q_shape, in.q_positions);
    RotateInPlace(rope->spec, unit(rope->frequencies), plan.k1, k_shape, in.k_positions);
  } else if (const auto* rerope = std::get_if<ReRopeEncoding>(&encoding)) {
    plan.q2 = plan.q1;
    plan.k2 = plan.k1;
    RotateInPlace(rerope->spec, unit(rerope->frequencies), plan.q1, q_shape, in.q_positions);
    RotateInPlace(rerope->spec, unit(rerope->frequencies), plan.k1, k_shape, in.k_positions);
    const double w = static_cast<double>(rerope->window);
    // Every query token at one position (the window, or 1 for a constant shift).
    const auto all_at = [&](std::int64_t position) {
      return TokenPositions::Ids(std::vector<std::int64_t>(static_cast<std::size_t>(q_shape[0] * q_shape[1]), position));
    };
    if (!rerope->leak) {
      RotateInPlace(rerope->spec, unit(rerope->frequencies), plan.q2, q_shape, all_at(rerope->window));
    } else {
      // Leaky: q at p/k + w(1 - 1/k) = rotation by p with frequencies/k, then
      // a constant rotation by w(1 - 1/k) (angles in one plane add); k at j/k.
      const double leak = *rerope->leak;
      RopeFrequencies slow = unit(rerope->frequencies), shift = unit(rerope->frequencies);
      for (double& f : slow.inv_freq) f /= leak;
      for (double& f : shift.inv_freq) f *= w * (1 - 1 / leak);
      RotateInPlace(rerope->spec, slow, plan.q2, q_shape, in.q_positions);
      RotateInPlace(rerope->spec, shift, plan.q2, q_shape, all_at(1));
      RotateInPlace(rerope->spec, slow, plan.k2, k_shape, in.k_positions);
    }
  }
}

// Shaw's terms as tables: q . a^K per query row and k . a^K per key, for
// every relative row; the kernel gathers from them by clipped distance.
void PrepareShaw(const ShawEncoding& shaw, detail::AttentionPlan& plan) {
  const std::int64_t rows = shaw.spec.Rows(), dim = plan.head_dim;
  plan.shaw = shaw.spec;
  plan.shaw_rows = rows;
  const auto dot = [&](const float* x, std::int64_t r) {
    double sum = 0;
    for (std::int64_t d = 0; d < dim; ++d) sum += x[d] * shaw.rel_k[r * dim + d];
    return static_cast<float>(sum);
  };
  if (shaw.spec.key_term) {
    const std::int64_t q_rows = plan.batch * plan.q_len * plan.q_heads;
    plan.shaw_qr.resize(static_cast<std::size_t>(q_rows * rows));
    ParallelFor(q_rows, 16, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) {
        for (std::int64_t r = 0; r < rows; ++r) plan.shaw_qr[i * rows + r] = dot(plan.q1.data() + i * dim, r);
      }
    });
  }
  if (shaw.spec.query_term) {
    plan.shaw_kr.resize(static_cast<std::size_t>(plan.batch * plan.kv_heads * rows * plan.kv_len));
    ParallelFor(plan.batch * plan.kv_heads, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t bh = begin; bh < end; ++bh) {
        const std::int64_t b = bh / plan.kv_heads, h = bh % plan.kv_heads;
        for (std::int64_t j = 0; j < plan.kv_len; ++j) {
          const float* k = plan.k1.data() + ((b * plan.kv_len + j) * plan.kv_heads + h) * dim;
          for (std::int64_t r = 0; r < rows; ++r) plan.shaw_kr[(bh * rows + r) * plan.kv_len + j] = dot(k, r);
        }
      }
    });
  }
  if (shaw.spec.value_term) plan.shaw_rel_v.assign(shaw.rel_v.begin(), shaw.rel_v.end());
}

}  // namespace

void Attention(const AttentionInputs& in, const AttentionOptions& options) {
  ValidateAttention(in, options);
  detail::AttentionPlan plan{};
  const auto [batch, q_len, q_heads, head_dim] = in.q.shape;
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
  if (batch * q_len * q_heads == 0) return;

  static thread_local RecycledBuffers recycled;
  recycled.Lend(plan);
  ToDenseF32(in.q, plan.q1);
  ToDenseF32(in.k, plan.k1);
  ToDenseF32(in.v, plan.v);
  EncodeQk(in, options.encoding, plan);
  if (const auto* rerope = std::get_if<ReRopeEncoding>(&options.encoding)) plan.rerope_window = rerope->window;
  plan.q_positions = AllPositions(in.q_positions, batch, q_len);
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

  // Fold the softmax scale, the attention factor squared and log-n into q.
  const double scale = detail::SoftmaxScale(options, head_dim) * detail::AttentionFactorSquared(options.encoding);
  plan.q_factor.resize(static_cast<std::size_t>(batch * q_len));
  for (std::int64_t token = 0; token < batch * q_len; ++token) {
    plan.q_factor[token] =
        static_cast<float>(scale * detail::LognFactor(options.logn_train_length, plan.q_positions[token]));
  }
  for (std::vector<float>* q : {&plan.q1, &plan.q2}) {
    if (q->empty()) continue;
    ParallelFor(batch * q_len, 16, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t token = begin; token < end; ++token) {
        float* row = q->data() + token * q_heads * head_dim;
        for (std::int64_t i = 0; i < q_heads * head_dim; ++i) row[i] *= plan.q_factor[token];
      }
    });
  }
  if (const auto* shaw = std::get_if<ShawEncoding>(&options.encoding)) PrepareShaw(*shaw, plan);

  if (const auto* alibi = std::get_if<AlibiEncoding>(&options.encoding)) {
    plan.bias = alibi->form == AlibiForm::kDistance ? detail::BiasKind::kAlibiDistance
                                                    : detail::BiasKind::kAlibiKeyPosition;
    plan.slopes.assign(alibi->slopes.begin(), alibi->slopes.end());
  } else if (const auto* t5 = std::get_if<T5BiasEncoding>(&options.encoding)) {
    // Bias by relative position over the span the call can produce.
    const auto [q_min, q_max] = std::minmax_element(plan.q_positions.begin(), plan.q_positions.end());
    const auto [k_min, k_max] = std::minmax_element(plan.k_positions.begin(), plan.k_positions.end());
    plan.bias = detail::BiasKind::kRelativeTable;
    plan.relative_min = plan.kv_len ? *k_min - *q_max : 0;
    plan.relative_span = (plan.kv_len ? *k_max - *q_min - plan.relative_min + 1 : 1) + plan.kRelativePadding;
    plan.relative_table.resize(static_cast<std::size_t>(q_heads * plan.relative_span));
    for (std::int64_t r = 0; r < plan.relative_span; ++r) {
      const std::int64_t bucket = T5RelativeBucket(t5->buckets, plan.relative_min + r);
      for (std::int64_t h = 0; h < q_heads; ++h) {
        plan.relative_table[h * plan.relative_span + r] = static_cast<float>(t5->weights[bucket * q_heads + h]);
      }
    }
  }
  plan.softcap = static_cast<float>(options.softcap);
  plan.sink_logits.assign(options.sink_logits.begin(), options.sink_logits.end());
  detail::RunAttentionPlan(plan);
  recycled.Return(plan);
}

}  // namespace posenc
