// The fused kernel's float64 reference: each positional method by its own
// definition (its logit and value below) over the one float64 attention of
// materialized_attention.h. The fast kernel is tested against this.
#include <cmath>
#include <variant>
#include <vector>

#include "attention/attention_rules.h"
#include "posenc/attention.h"
#include "posenc/rope.h"
#include "reference/element_io.h"
#include "reference/materialized_attention.h"

namespace posenc::reference {
namespace {

std::vector<double> ReadHead(const ConstTensorView& t, std::int64_t b, std::int64_t s, std::int64_t h) {
  std::vector<double> x(static_cast<std::size_t>(t.head_dim()));
  const std::int64_t offset = t.Offset(b, s, h);
  for (std::int64_t d = 0; d < t.head_dim(); ++d) x[d] = ReadElement(t, offset + d);
  return x;
}

double Dot(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0;
  for (std::size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

// q.k for a query at p and key at j under the encoding, before scaling.
struct ScoreOf {
  const std::vector<double>& q;
  const std::vector<double>& k;
  std::int64_t p, j;

  double operator()(const NoPositionEncoding&) const { return Dot(q, k); }
  double operator()(const AlibiEncoding&) const { return Dot(q, k); }
  double operator()(const T5BiasEncoding&) const { return Dot(q, k); }
  double operator()(const UrpeEncoding&) const { return Dot(q, k); }
  // Shaw: q.(k + a^K) [key term], plus k.a^K [query term, BERT relative_key_query].
  double operator()(const ShawEncoding& e) const {
    const std::int64_t row = e.spec.Row(p, j);
    const auto dim = static_cast<std::int64_t>(q.size());
    double sum = Dot(q, k);
    for (std::int64_t d = 0; d < dim; ++d) {
      const double a = e.rel_k.empty() ? 0.0 : e.rel_k[row * dim + d];
      if (e.spec.key_term) sum += q[d] * a;
      if (e.spec.query_term) sum += k[d] * a;
    }
    return sum;
  }
  double operator()(const RopeEncoding& e) const {
    return Dot(RotateHead(e.spec, e.frequencies.inv_freq, q, static_cast<double>(p)),
               RotateHead(e.spec, e.frequencies.inv_freq, k, static_cast<double>(j)));
  }
  // Su's two score matrices: RoPE within the window, the clamped (or leaky)
  // relative position beyond it.
  double operator()(const ReRopeEncoding& e) const {
    const auto rotate = [&](const std::vector<double>& x, double position) {
      return RotateHead(e.spec, e.frequencies.inv_freq, x, position);
    };
    const double w = static_cast<double>(e.window);
    if (static_cast<double>(p - j) < w)
      return Dot(rotate(q, static_cast<double>(p)), rotate(k, static_cast<double>(j)));
    if (!e.leak) return Dot(rotate(q, w), k);  // distance reads as w
    const double leak = *e.leak;               // q at p/k + w(1 - 1/k), k at j/k
    return Dot(rotate(q, static_cast<double>(p) / leak + w * (1 - 1 / leak)), rotate(k, static_cast<double>(j) / leak));
  }
  // Self-Extend as LongLM writes it: neighbour scores from the true
  // positions, grouped scores from floor(p/G) + W - floor(W/G) and floor(j/G).
  // As llama.cpp runs it: after c = floor(p/W) compressions of W positions
  // into W/G, the query's block [c W, p] keeps its positions (shifted by
  // the same amount as the query, so distances are true); the compressed
  // keys sit at floor(j/G) and the query at p - c (W - W/G).
  double operator()(const SelfExtendEncoding& e) const {
    const auto rotate = [&](const std::vector<double>& x, std::int64_t position) {
      return RotateHead(e.spec, e.frequencies.inv_freq, x, static_cast<double>(position));
    };
    const std::int64_t w = e.window, g = e.group;
    if (e.form == SelfExtendForm::kKvShift) {
      const std::int64_t compressions = p / w;
      if (j >= compressions * w) return Dot(rotate(q, p), rotate(k, j));
      return Dot(rotate(q, p - compressions * (w - w / g)), rotate(k, j / g));
    }
    if (p - j < w) return Dot(rotate(q, p), rotate(k, j));
    return Dot(rotate(q, p / g + w - w / g), rotate(k, j / g));
  }
};

// The additive bias for head h, query at p, key at j.
struct BiasOf {
  std::int64_t head, q_heads, p, j;

  double operator()(const NoPositionEncoding&) const { return 0.0; }
  double operator()(const RopeEncoding&) const { return 0.0; }
  double operator()(const ReRopeEncoding&) const { return 0.0; }
  double operator()(const SelfExtendEncoding&) const { return 0.0; }
  double operator()(const ShawEncoding&) const { return 0.0; }
  double operator()(const AlibiEncoding& e) const { return AlibiBiasAt(e.form, e.slopes[head], p, j); }
  double operator()(const T5BiasEncoding& e) const {
    return e.weights[T5RelativeBucket(e.buckets, j - p) * q_heads + head];
  }
  double operator()(const UrpeEncoding& e) const { return e.bias[T5RelativeBucket(e.buckets, j - p) * q_heads + head]; }
};

// What the encoding does to the value v [v_dim] of a key at j read by head
// h's query at p: Shaw adds a^V, URPE multiplies by its Toeplitz weight
// C_h(j - p) (so the probability is weighted, the softmax sum is not);
// nothing for the others.
struct AddValueTerm {
  std::int64_t head, q_heads, p, j;
  std::vector<double>& v;

  void operator()(const NoPositionEncoding&) const {}
  void operator()(const RopeEncoding&) const {}
  void operator()(const ReRopeEncoding&) const {}
  void operator()(const SelfExtendEncoding&) const {}
  void operator()(const AlibiEncoding&) const {}
  void operator()(const T5BiasEncoding&) const {}
  void operator()(const ShawEncoding& e) const {
    if (!e.spec.value_term) return;
    const std::int64_t row = e.spec.Row(p, j), dim = static_cast<std::int64_t>(v.size());
    for (std::int64_t d = 0; d < dim; ++d) v[d] += e.rel_v[row * dim + d];
  }
  void operator()(const UrpeEncoding& e) const {
    const double c = e.scale[T5RelativeBucket(e.buckets, j - p) * q_heads + head];
    for (double& x : v) x *= c;
  }
};

}  // namespace

void Attention(const AttentionInputs& inputs, const AttentionOptions& options) {
  ValidateAttention(inputs, options);
  AttentionInputs in = inputs;
  in.q_positions = QueryPositions(inputs);
  const std::int64_t batch = in.q.shape[0], q_len = in.q.shape[1], q_heads = in.q.shape[2], head_dim = in.q.shape[3];
  const std::int64_t kv_len = in.k.seq(), group = q_heads / in.k.heads(), v_dim = in.v.head_dim();
  const double scale = detail::SoftmaxScale(options, head_dim) * detail::AttentionFactorSquared(options.encoding);
  const auto query_position = [&](std::int64_t b, std::int64_t i) { return in.q_positions->At(b, i, q_len); };
  const auto key_position = [&](std::int64_t b, std::int64_t t) { return in.k_positions.At(b, t, kv_len); };

  MaterializedTerms terms;
  terms.logit = [&](std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t t) {
    const std::int64_t p = query_position(b, i), j = key_position(b, t);
    const auto q = ReadHead(in.q, b, i, h);
    const auto k = ReadHead(in.k, b, t, h / group);
    const double q_scale = scale * detail::LognFactor(options.logn_train_length, p);
    const double s = q_scale * std::visit(ScoreOf{q, k, p, j}, options.encoding) +
                     std::visit(BiasOf{h, q_heads, p, j}, options.encoding);
    return options.softcap > 0 ? options.softcap * std::tanh(s / options.softcap) : s;
  };
  terms.visible = [&](std::int64_t b, std::int64_t, std::int64_t i, std::int64_t t) {
    const std::int64_t keys = in.kv_lengths.empty() ? kv_len : in.kv_lengths[b];
    return t < keys && detail::KeyVisible(options.mask, query_position(b, i), key_position(b, t));
  };
  terms.add_value = [&](std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t t, double weight, double* out) {
    auto v = ReadHead(in.v, b, t, h / group);
    std::visit(AddValueTerm{h, q_heads, query_position(b, i), key_position(b, t), v}, options.encoding);
    for (std::int64_t d = 0; d < v_dim; ++d) out[d] += weight * v[d];
  };
  if (!options.sink_logits.empty()) terms.sink_logit = [&](std::int64_t h) { return options.sink_logits[h]; };

  // output [batch, q_heads, q_len, v_dim] back to out [batch, q_len, q_heads, v_dim]
  const auto output = MaterializedAttention({batch, q_heads, q_len, kv_len, v_dim}, terms).output;
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t h = 0; h < q_heads; ++h) {
      for (std::int64_t i = 0; i < q_len; ++i) {
        const double* row = output.data() + ((b * q_heads + h) * q_len + i) * v_dim;
        for (std::int64_t d = 0; d < v_dim; ++d) WriteElement(in.out, in.out.Offset(b, i, h) + d, row[d]);
      }
    }
  }
}

}  // namespace posenc::reference
