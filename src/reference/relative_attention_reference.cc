// The materialized float64 references of the relative position forms: each
// form is its logit (and value term) over the one float64 attention of
// materialized_attention.h. Readable on purpose.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>

#include "posenc/deberta_relative.h"
#include "posenc/error.h"
#include "posenc/relative_attention.h"
#include "posenc/shaw_relative.h"
#include "posenc/xlnet_relative.h"
#include "reference/materialized_attention.h"

namespace posenc {

void RelativeAttentionShape::Validate(std::string_view op) const {
  Require(batch > 0, op, "shape.batch", batch, "must be > 0");
  Require(heads > 0, op, "shape.heads", heads, "must be > 0");
  Require(q_len > 0, op, "shape.q_len", q_len, "must be > 0");
  Require(k_len > 0, op, "shape.k_len", k_len, "must be > 0");
  Require(head_dim > 0, op, "shape.head_dim", head_dim, "must be > 0");
  Require(value_dim >= 0, op, "shape.value_dim", value_dim, "must not be negative (0 = head_dim)");
}

namespace {

void RequireSize(std::string_view op, std::string_view name, std::size_t size, std::int64_t expected,
                 const std::string& layout) {
  Require(static_cast<std::int64_t>(size) == expected, op, std::string(name) + ".size()", size,
          "must equal " + layout + " = " + std::to_string(expected));
}

}  // namespace

void RelativeAttentionInputs::Validate(std::string_view op) const {
  shape.Validate(op);
  const auto& s = shape;
  RequireSize(op, "q", q.size(), s.batch * s.heads * s.q_len * s.head_dim, "batch * heads * q_len * head_dim");
  RequireSize(op, "k", k.size(), s.batch * s.heads * s.k_len * s.head_dim, "batch * heads * k_len * head_dim");
  RequireSize(op, "v", v.size(), s.batch * s.heads * s.k_len * s.ValueDim(), "batch * heads * k_len * value_dim");
  if (scale) Require(std::isfinite(*scale), op, "scale", *scale, "must be finite");
  Require(QueryOffset() >= 0, op, "query_offset", QueryOffset(),
          "must not be negative (unset means k_len - q_len, which needs q_len <= k_len)");
  Require(mask == RelativeAttentionMask::kNone || mask == RelativeAttentionMask::kCausal, op, "mask",
          static_cast<int>(mask), "must be kNone or kCausal");
  if (!key_padding.empty()) {
    RequireSize(op, "key_padding", key_padding.size(), s.batch * s.k_len, "batch * k_len");
  }
}

namespace reference {
namespace {

double Dot(const double* a, const double* b, std::int64_t n) {
  double sum = 0;
  for (std::int64_t d = 0; d < n; ++d) sum += a[d] * b[d];
  return sum;
}

// Index helpers for [batch, heads, len, dim] arrays.
struct Indexer {
  const RelativeAttentionShape& s;
  const double* Q(std::span<const double> q, std::int64_t b, std::int64_t h, std::int64_t i) const {
    return q.data() + ((b * s.heads + h) * s.q_len + i) * s.head_dim;
  }
  const double* K(std::span<const double> k, std::int64_t b, std::int64_t h, std::int64_t j) const {
    return k.data() + ((b * s.heads + h) * s.k_len + j) * s.head_dim;
  }
  const double* V(std::span<const double> v, std::int64_t b, std::int64_t h, std::int64_t j) const {
    return v.data() + ((b * s.heads + h) * s.k_len + j) * s.ValueDim();
  }
};

// The relative forms over the one float64 attention: `logit` is the full
// logit of (b, h, i, j); value_extra(b, h, i, j, p, out) adds p times a
// form's value term for one key; visibility is the mask and key padding.
using LogitFn = std::function<double(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j)>;
using ValueFn =
    std::function<void(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j, double p, double* out)>;

RelativeAttentionResult Attend(const RelativeAttentionInputs& in, const LogitFn& logit,
                               const ValueFn& value_extra = {}) {
  const RelativeAttentionShape& s = in.shape;
  const Indexer at{s};
  const std::int64_t offset = in.QueryOffset();
  const std::int64_t value_dim = s.ValueDim();
  MaterializedTerms terms;
  terms.logit = logit;
  terms.visible = [&](std::int64_t b, std::int64_t, std::int64_t i, std::int64_t j) {
    if (in.mask == RelativeAttentionMask::kCausal && j > offset + i) return false;
    return in.key_padding.empty() || in.key_padding[b * s.k_len + j] != 0;
  };
  terms.add_value = [&](std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j, double p, double* out) {
    const double* v = at.V(in.v, b, h, j);
    for (std::int64_t d = 0; d < value_dim; ++d) out[d] += p * v[d];
    if (value_extra) value_extra(b, h, i, j, p, out);
  };
  return MaterializedAttention({s.batch, s.heads, s.q_len, s.k_len, value_dim}, terms);
}

double ContentScale(const RelativeAttentionInputs& in, double form_default) { return in.scale.value_or(form_default); }

}  // namespace

RelativeAttentionResult PlainAttention(const RelativeAttentionInputs& inputs) {
  inputs.Validate("attention");
  const Indexer at{inputs.shape};
  const double scale = ContentScale(inputs, 1.0 / std::sqrt(static_cast<double>(inputs.shape.head_dim)));
  return Attend(inputs, [&](std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) {
    return scale * Dot(at.Q(inputs.q, b, h, i), at.K(inputs.k, b, h, j), inputs.shape.head_dim);
  });
}

namespace {

RelativeAttentionResult BiasedWithScale(const RelativeAttentionInputs& inputs, std::span<const double> bias,
                                        double scale, std::string_view op) {
  inputs.Validate(op);
  const RelativeAttentionShape& s = inputs.shape;
  const Indexer at{s};
  const std::int64_t per_batch = s.heads * s.q_len * s.k_len;
  const bool batched = static_cast<std::int64_t>(bias.size()) == s.batch * per_batch && s.batch > 1;
  Require(batched || static_cast<std::int64_t>(bias.size()) == per_batch, op, "bias.size()", bias.size(),
          "must equal heads * q_len * k_len = " + std::to_string(per_batch) +
              " or batch * heads * q_len * k_len = " + std::to_string(s.batch * per_batch));
  return Attend(inputs, [&](std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) {
    const double content = scale * Dot(at.Q(inputs.q, b, h, i), at.K(inputs.k, b, h, j), s.head_dim);
    return content + bias[(batched ? b * per_batch : 0) + (h * s.q_len + i) * s.k_len + j];
  });
}

}  // namespace

RelativeAttentionResult BiasedAttention(const RelativeAttentionInputs& inputs, std::span<const double> bias) {
  inputs.shape.Validate("attention");
  return BiasedWithScale(
      inputs, bias, ContentScale(inputs, 1.0 / std::sqrt(static_cast<double>(inputs.shape.head_dim))), "attention");
}

RelativeAttentionResult AlibiAttention(const RelativeAttentionInputs& inputs, const AlibiSpec& spec) {
  inputs.Validate("alibi");
  Require(spec.heads == inputs.shape.heads, "alibi", "spec.heads", spec.heads,
          "must equal shape.heads = " + std::to_string(inputs.shape.heads) +
              " (for a tensor-parallel shard, slice AlibiSlopes and use BiasedAttention)");
  const auto& s = inputs.shape;
  const std::vector<double> bias = AlibiBias(spec, s.q_len, s.k_len, inputs.QueryOffset());
  return BiasedWithScale(inputs, bias, ContentScale(inputs, 1.0 / std::sqrt(static_cast<double>(s.head_dim))), "alibi");
}

RelativeAttentionResult T5Attention(const RelativeAttentionInputs& inputs, const T5BucketSpec& spec,
                                    std::span<const double> weights) {
  inputs.Validate("t5_bias");
  const auto& s = inputs.shape;
  const std::vector<double> bias = T5Bias(spec, weights, s.heads, s.q_len, s.k_len, inputs.QueryOffset());
  return BiasedWithScale(inputs, bias, ContentScale(inputs, 1.0), "t5_bias");
}

RelativeAttentionResult ShawAttention(const RelativeAttentionInputs& inputs, const ShawRelativeSpec& spec,
                                      std::span<const double> rel_k, std::span<const double> rel_v) {
  inputs.Validate("shaw");
  spec.Validate();
  const RelativeAttentionShape& s = inputs.shape;
  const Indexer at{s};
  if (spec.key_term || spec.query_term) {
    RequireSize("shaw", "rel_k", rel_k.size(), spec.Rows() * s.head_dim, "(2 max_distance + 1) * head_dim");
  }
  if (spec.value_term) {
    RequireSize("shaw", "rel_v", rel_v.size(), spec.Rows() * s.ValueDim(), "(2 max_distance + 1) * value_dim");
  }
  const double scale = ContentScale(inputs, 1.0 / std::sqrt(static_cast<double>(s.head_dim)));
  const std::int64_t offset = inputs.QueryOffset();
  return Attend(
      inputs,
      [&](std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) {
        const double* q = at.Q(inputs.q, b, h, i);
        const double* k = at.K(inputs.k, b, h, j);
        const double* a = rel_k.empty() ? nullptr : rel_k.data() + spec.Row(offset + i, j) * s.head_dim;
        double logit = Dot(q, k, s.head_dim);
        if (spec.key_term) logit += Dot(q, a, s.head_dim);
        if (spec.query_term) logit += Dot(k, a, s.head_dim);
        return scale * logit;
      },
      spec.value_term ? ValueFn([&](std::int64_t, std::int64_t, std::int64_t i, std::int64_t j, double p, double* out) {
        const double* a = rel_v.data() + spec.Row(offset + i, j) * s.ValueDim();
        for (std::int64_t d = 0; d < s.ValueDim(); ++d) out[d] += p * a[d];
      })
                      : ValueFn{});
}

RelativeAttentionResult XLNetAttention(const RelativeAttentionInputs& inputs, const XLNetRelativeInputs& rel) {
  inputs.Validate("xlnet");
  const RelativeAttentionShape& s = inputs.shape;
  const Indexer at{s};
  Require(inputs.QueryOffset() == s.k_len - s.q_len, "xlnet", "query_offset", inputs.QueryOffset(),
          "must be k_len - q_len = " + std::to_string(s.k_len - s.q_len) + " (the memory length)");
  const std::int64_t rows = s.q_len + s.k_len;
  RequireSize("xlnet", "rel_k", rel.rel_k.size(), s.batch * s.heads * rows * s.head_dim,
              "batch * heads * (q_len + k_len) * head_dim");
  RequireSize("xlnet", "r_w_bias", rel.r_w_bias.size(), s.heads * s.head_dim, "heads * head_dim");
  RequireSize("xlnet", "r_r_bias", rel.r_r_bias.size(), s.heads * s.head_dim, "heads * head_dim");
  const bool segments = !rel.r_s_bias.empty() || !rel.seg_embed.empty() || !rel.segment_differs.empty();
  if (segments) {
    RequireSize("xlnet", "r_s_bias", rel.r_s_bias.size(), s.heads * s.head_dim, "heads * head_dim");
    RequireSize("xlnet", "seg_embed", rel.seg_embed.size(), 2 * s.heads * s.head_dim, "2 * heads * head_dim");
    RequireSize("xlnet", "segment_differs", rel.segment_differs.size(), s.batch * s.q_len * s.k_len,
                "batch * q_len * k_len");
  }
  const double scale = ContentScale(inputs, 1.0 / std::sqrt(static_cast<double>(s.head_dim)));
  const std::int64_t mem_len = s.k_len - s.q_len;
  return Attend(inputs, [&](std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) {
    const double* q = at.Q(inputs.q, b, h, i);
    const double* u = rel.r_w_bias.data() + h * s.head_dim;
    const double* v = rel.r_r_bias.data() + h * s.head_dim;
    const double* k = at.K(inputs.k, b, h, j);
    const std::int64_t distance = mem_len + i - j;  // in [-q_len + 1, k_len - 1]
    const double* r = rel.rel_k.data() + ((b * s.heads + h) * rows + (s.k_len - distance)) * s.head_dim;
    double logit = 0;
    for (std::int64_t d = 0; d < s.head_dim; ++d) logit += (q[d] + u[d]) * k[d] + (q[d] + v[d]) * r[d];
    if (segments) {
      const std::uint8_t differs = rel.segment_differs[(b * s.q_len + i) * s.k_len + j];
      const double* sb = rel.r_s_bias.data() + h * s.head_dim;
      const double* seg = rel.seg_embed.data() + ((differs ? 1 : 0) * s.heads + h) * s.head_dim;
      for (std::int64_t d = 0; d < s.head_dim; ++d) logit += (q[d] + sb[d]) * seg[d];
    }
    return scale * logit;
  });
}

RelativeAttentionResult DebertaAttention(const RelativeAttentionInputs& inputs, const DebertaRelativeSpec& spec,
                                         std::span<const double> pos_key, std::span<const double> pos_query) {
  inputs.Validate("deberta");
  spec.Validate();
  const RelativeAttentionShape& s = inputs.shape;
  const Indexer at{s};
  const std::int64_t span = spec.Span();
  if (spec.c2p)
    RequireSize("deberta", "pos_key", pos_key.size(), s.heads * 2 * span * s.head_dim, "heads * 2 span * head_dim");
  if (spec.p2c) {
    RequireSize("deberta", "pos_query", pos_query.size(), s.heads * 2 * span * s.head_dim, "heads * 2 span * head_dim");
  }
  const double scale = ContentScale(inputs, spec.Scale(s.head_dim));
  const std::int64_t offset = inputs.QueryOffset();
  const auto bucket = [&](std::int64_t d) {
    return spec.position_buckets > 0 ? DebertaLogBucket(d, spec.position_buckets, spec.max_relative_positions) : d;
  };
  const auto clamp_index = [&](std::int64_t x) { return std::clamp<std::int64_t>(x + span, 0, 2 * span - 1); };
  return Attend(inputs, [&](std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) {
    const double* q = at.Q(inputs.q, b, h, i);
    const double* k = at.K(inputs.k, b, h, j);
    const std::int64_t qpos = offset + i;
    double logit = Dot(q, k, s.head_dim);
    if (spec.c2p) {
      const double* kr = pos_key.data() + (h * 2 * span + clamp_index(bucket(qpos - j))) * s.head_dim;
      logit += Dot(q, kr, s.head_dim);
    }
    if (spec.p2c) {
      const double* qr = pos_query.data() + (h * 2 * span + clamp_index(-bucket(j - qpos))) * s.head_dim;
      logit += Dot(k, qr, s.head_dim);
    }
    return scale * logit;
  });
}

}  // namespace reference
}  // namespace posenc
