// Causal multi-head attention of the tiny model, forward and backward,
// materialized one (sequence, head) at a time; for j <= i, with the
// distance delta = p_i - p_j of their positions (i - j unless the pass has
// randomized positions) and the scheme's terms (scheme_trainer.h):
//   s_ij = scale (q_i.k_j + u.k_j + q_i.A[r(delta)] + k_j.B[r'(delta)])
//          + bias[delta] + pair[p_i, delta]
//   p_i  = softmax_j(s_i)                             (float32, max subtracted)
//   o_i  = sum_j p_ij w(delta) (v_j + C[r''(delta)])
// scale = 1/sqrt(hd) unless the scheme sets it; A, B, C are the query, key
// and value tables (rows of the head, or shared by the heads), read through
// each table's row of the distance; u the key bias of the head; w the
// head's probability weight (URPE's Toeplitz matrix: the softmax is not
// renormalized). Absent terms are skipped (w = 1).
//
// Backward, with do_i = dL/do_i and ds_ij = p_ij (dp_ij - sum_j' p_ij' dp_ij'):
//   dp_ij = w(delta) do_i.(v_j + C[r''])     dw(delta) = sum p_ij do_i.(v_j + C[r''])
//   dq_i  = scale sum_j ds_ij (k_j + A[r])      dk_j = scale sum_i ds_ij (q_i + u + B[r'])
//   dv_j  = sum_i p_ij w(delta) do_i
//   dA[r] = scale sum ds_ij q_i    dB[r'] = scale sum ds_ij k_j    dC[r''] = sum p_ij do_i
//   du    = scale sum ds_ij k_j    dbias[delta] = sum of ds_ij    dpair[p_i, delta] = ds_ij
// A query's query-table and value-table terms are summed per row first (the
// rows its distances reach: a clipped table has few); the key table's
// k_j.B[r] are computed once a task ([rows, T]) and its gradient
// coefficients summed over the queries before the products. A task's table
// gradients are float32 sums (SIMD), its partials float64. The probabilities are
// recomputed by the same function as the forward (bit for bit the same), so
// nothing [T, T] is stored.
//
// Threads: ParallelFor over the B*H (sequence, head) tasks. A task writes
// only its own rows and columns of the outputs, and its own partials of the
// shared parameters (biases, tables, key bias), which are summed afterwards
// in task order: results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "posenc/parallel.h"
#include "train/tiny_lm_internal.h"
#include "train/tiny_lm_kernels.h"

namespace posenc::tiny_lm {
namespace {

float Dot(const float* a, const float* b, std::int64_t n) {
  float sum = 0.0f;
  for (std::int64_t e = 0; e < n; ++e) sum += a[e] * b[e];
  return sum;
}

void Axpy(float w, const float* x, float* y, std::int64_t n) {
  for (std::int64_t e = 0; e < n; ++e) y[e] += w * x[e];
}

// The rows a query reaches through a table: [low[r], high[r]] over the
// distances 0..r, r its reach p_i - p_0 (prefix minimum and maximum of
// the row map; its distances are among them).
struct RowSpan {
  std::vector<std::int64_t> low, high;
  RowSpan(const AttentionTable& table, std::int64_t extent) {
    if (table.empty()) return;
    low.resize(static_cast<std::size_t>(extent));
    high.resize(low.size());
    for (std::int64_t delta = 0; delta < extent; ++delta) {
      const std::int64_t r = table.row_of_distance[delta];
      low[delta] = delta == 0 ? r : std::min(low[delta - 1], r);
      high[delta] = delta == 0 ? r : std::max(high[delta - 1], r);
    }
  }
  std::int64_t Count(std::int64_t reach) const { return low.empty() ? 0 : high[reach] - low[reach] + 1; }
};

// What every task shares: the terms, the tokens' positions and the tables'
// row spans.
struct Layer {
  const AttentionShape& shape;
  const AttentionTerms& terms;
  std::int64_t extent;
  std::vector<std::int64_t> position;  // [T]
  RowSpan query_rows, value_rows;
  float scale;
  Layer(const AttentionShape& s, const AttentionTerms& t)
      : shape(s), terms(t), extent(s.Extent()), position(static_cast<std::size_t>(s.length)),
        query_rows(t.query_table, extent), value_rows(t.value_table, extent),
        scale(t.scale != 0 ? t.scale : 1.0f / std::sqrt(static_cast<float>(s.head_dim))) {
    for (std::int64_t i = 0; i < s.length; ++i) position[i] = s.Position(i);
  }
  // The farthest distance query i reaches.
  std::int64_t Reach(std::int64_t i) const { return position[i] - position[0]; }
};

// Scratch of one thread: [T] rows, a table's rows, [T, hd] keys and values
// and their gradients.
struct Scratch {
  std::vector<float> p, dp, scaled, weighted, key_bias, dkey_bias, q_rel, ds_mass, mass, do_rel;
  std::vector<float> keys, values, dkeys, dvalues;
  // Key table: k_j.B[r] and the backward's coefficients, both [rows, T].
  std::vector<float> key_rel, dkey_rel;
  // The tables' gradients of one task, float32 [rows, hd].
  std::vector<float> dquery_table, dkey_table, dvalue_table;
  explicit Scratch(const Layer& layer)
      : p(Size(layer.shape.length)), dp(p.size()), scaled(p.size()), weighted(p.size()), key_bias(p.size()),
        dkey_bias(p.size()), q_rel(Size(layer.terms.query_table.rows)), ds_mass(q_rel.size()),
        mass(Size(layer.terms.value_table.rows)), do_rel(mass.size()),
        keys(Size(layer.shape.length * layer.shape.head_dim)), values(keys.size()), dkeys(keys.size()),
        dvalues(keys.size()), key_rel(Size(layer.terms.key_table.rows * layer.shape.length)), dkey_rel(key_rel.size()),
        dquery_table(Size(layer.terms.query_table.HeadSize(layer.shape.head_dim))),
        dkey_table(Size(layer.terms.key_table.HeadSize(layer.shape.head_dim))),
        dvalue_table(Size(layer.terms.value_table.HeadSize(layer.shape.head_dim))) {}
  static std::size_t Size(std::int64_t n) { return static_cast<std::size_t>(n); }
};

// One (sequence b, head h) of qkv [N, 3d].
class HeadTask {
 public:
  HeadTask(const Layer& layer, const float* qkv, std::int64_t b, std::int64_t h, Scratch& scratch)
      : layer_(layer), terms_(layer.terms), qkv_(qkv), b_(b), h_(h), hd_(layer.shape.head_dim), s_(scratch) {
    const std::int64_t d = layer.shape.d(), length = layer.shape.length;
    for (std::int64_t t = 0; t < length; ++t) {
      std::copy(Q(t) + d, Q(t) + d + hd_, s_.keys.data() + t * hd_);
      std::copy(Q(t) + 2 * d, Q(t) + 2 * d + hd_, s_.values.data() + t * hd_);
      if (!terms_.key_bias.empty()) s_.key_bias[t] = Dot(KeyBias(), K(t), hd_);
    }
    const AttentionTable& kt = terms_.key_table;
    for (std::int64_t r = 0; r < (kt.empty() ? 0 : kt.rows); ++r) {
      DotRows(TableRow(kt, r), K(0), hd_, length, hd_, s_.key_rel.data() + r * length);  // k_j.B[r]
    }
  }

  std::int64_t hd() const { return hd_; }
  float scale() const { return layer_.scale; }
  // Row n of the [N, *] tensors and the head's column in a [*, d] block.
  std::int64_t Row(std::int64_t t) const { return b_ * layer_.shape.length + t; }
  std::int64_t Column() const { return h_ * hd_; }
  const float* Q(std::int64_t t) const { return qkv_ + Row(t) * 3 * layer_.shape.d() + Column(); }
  // Key and value rows, contiguous: every query row reads all of them, and
  // at long lengths their rows in qkv (3d floats apart) fell out of the cache.
  const float* K(std::int64_t t) const { return s_.keys.data() + t * hd_; }
  const float* V(std::int64_t t) const { return s_.values.data() + t * hd_; }
  const float* KeyBias() const { return terms_.key_bias.data() + h_ * hd_; }
  // Row r of a table, of this head's rows when the table has one per head.
  const float* TableRow(const AttentionTable& table, std::int64_t r) const {
    return table.values.data() + ((table.per_head ? h_ * table.rows : 0) + r) * hd_;
  }
  std::int64_t RowOf(const AttentionTable& table, std::int64_t i, std::int64_t j) const {
    return table.row_of_distance[layer_.position[i] - layer_.position[j]];
  }
  // The position of token t, and a term of [H, E] read at head h's row
  // from position p_i back: term(i)[-p_j] is the term at distance p_i - p_j.
  const std::int64_t* Position() const { return layer_.position.data(); }
  const float* DistanceRow(std::span<const float> term, std::int64_t i) const {
    return term.data() + h_ * layer_.extent + layer_.position[i];
  }

  // p[0..i]: row i's probabilities; s_.q_rel[r - low] = q_i.A[r] over the
  // rows row i reaches.
  void RowProbabilities(std::int64_t i, float* p) {
    const float* q = Q(i);
    const AttentionTable& qt = terms_.query_table;
    const AttentionTable& kt = terms_.key_table;
    const std::int64_t length = layer_.shape.length, extent = layer_.extent, reach = layer_.Reach(i);
    const std::int64_t* pos = Position();
    const std::int64_t low = qt.empty() ? 0 : layer_.query_rows.low[reach];
    if (!qt.empty()) DotRows(q, TableRow(qt, low), hd_, layer_.query_rows.Count(reach), hd_, s_.q_rel.data());
    const float* bias = terms_.distance_bias.empty() ? nullptr : DistanceRow(terms_.distance_bias, i);
    const float* pair =
        terms_.pair_bias.empty() ? nullptr : terms_.pair_bias.data() + (h_ * extent + pos[i]) * extent + pos[i];
    DotRows(q, K(0), hd_, i + 1, hd_, p);
    float max = -std::numeric_limits<float>::infinity();
    for (std::int64_t j = 0; j <= i; ++j) {
      float s = p[j];
      if (!terms_.key_bias.empty()) s += s_.key_bias[j];
      if (!qt.empty()) s += s_.q_rel[RowOf(qt, i, j) - low];
      if (!kt.empty()) s += s_.key_rel[RowOf(kt, i, j) * length + j];
      s *= scale();
      if (bias != nullptr) s += *(bias - pos[j]);  // bias_h[p_i - p_j]
      if (pair != nullptr) s += *(pair - pos[j]);  // pair_h[p_i, p_i - p_j]
      p[j] = s;
      max = std::max(max, s);
    }
    float sum = 0.0f;
    for (std::int64_t j = 0; j <= i; ++j) {
      p[j] = std::exp(p[j] - max);
      sum += p[j];
    }
    const float inv = 1.0f / sum;
    for (std::int64_t j = 0; j <= i; ++j) p[j] *= inv;
  }

  // The weights row i reads its values with: p itself, or p_ij w_h(p_i - p_j)
  // (URPE) in s_.weighted.
  const float* ValueWeights(std::int64_t i, const float* p) const {
    if (terms_.probability_weight.empty()) return p;
    const float* w = DistanceRow(terms_.probability_weight, i);
    for (std::int64_t j = 0; j <= i; ++j) s_.weighted[j] = p[j] * *(w - Position()[j]);
    return s_.weighted.data();
  }

  // mass[r - low] = sum of w[j] over the keys j <= i whose distance reads
  // row r of `table` (low: the first row row i reaches); returns low.
  std::int64_t RowSums(const AttentionTable& table, const RowSpan& span, std::int64_t i, const float* w,
                       float* mass) const {
    const std::int64_t reach = layer_.Reach(i), low = span.low[reach];
    std::fill(mass, mass + span.Count(reach), 0.0f);
    for (std::int64_t j = 0; j <= i; ++j) mass[RowOf(table, i, j) - low] += w[j];
    return low;
  }

 private:
  const Layer& layer_;
  const AttentionTerms& terms_;
  const float* qkv_;
  std::int64_t b_, h_, hd_;
  Scratch& s_;
};

// Per-task partials of one shared term, summed in task order afterwards.
struct Partials {
  std::int64_t size = 0;  // a task's floats
  std::vector<double> values;
  Partials(std::int64_t tasks, std::int64_t task_size)
      : size(task_size), values(static_cast<std::size_t>(tasks * task_size), 0.0) {}
  double* Of(std::int64_t task) { return values.data() + task * size; }
  // The sum over tasks: into head h's slice (task = b * heads + h) when
  // per head, into one block of `size` otherwise.
  std::vector<double> Sum(std::int64_t heads, bool per_head) const {
    if (size == 0) return {};
    const std::int64_t tasks = static_cast<std::int64_t>(values.size()) / size;
    std::vector<double> sum(static_cast<std::size_t>(per_head ? heads * size : size), 0.0);
    for (std::int64_t task = 0; task < tasks; ++task) {
      double* out = sum.data() + (per_head ? (task % heads) * size : 0);
      for (std::int64_t e = 0; e < size; ++e) out[e] += values[task * size + e];
    }
    return sum;
  }
};

std::vector<float> ToFloat(const std::vector<double>& values) { return {values.begin(), values.end()}; }

AttentionTable TableView(const RelativeTableTerm& term, const std::vector<float>& values) {
  return {.values = values, .per_head = term.per_head, .rows = term.rows, .row_of_distance = term.row_of_distance};
}

}  // namespace

FloatLayerTerms::FloatLayerTerms(LayerTerms layer_terms)
    : terms(std::move(layer_terms)), distance_bias(ToFloat(terms.distance_bias)), pair_bias(ToFloat(terms.pair_bias)),
      query_table(ToFloat(terms.query_table.values)), key_table(ToFloat(terms.key_table.values)),
      value_table(ToFloat(terms.value_table.values)), key_bias(ToFloat(terms.key_bias)),
      probability_weight(ToFloat(terms.probability_weight)) {}

AttentionTerms FloatLayerTerms::View() const {
  return {.scale = terms.scale ? static_cast<float>(*terms.scale) : 0.0f,
          .distance_bias = distance_bias,
          .pair_bias = pair_bias,
          .query_table = TableView(terms.query_table, query_table),
          .key_table = TableView(terms.key_table, key_table),
          .value_table = TableView(terms.value_table, value_table),
          .key_bias = key_bias,
          .probability_weight = probability_weight};
}

void AttentionForward(const AttentionShape& shape, const AttentionTerms& terms, std::span<const float> qkv,
                      std::span<float> out) {
  const Layer layer(shape, terms);
  const std::int64_t d = shape.d(), length = shape.length;
  const AttentionTable& vt = terms.value_table;
  ParallelFor(shape.batch * shape.heads, 1, [&](std::int64_t begin, std::int64_t end) {
    Scratch scratch(layer);
    for (std::int64_t task = begin; task < end; ++task) {
      HeadTask head(layer, qkv.data(), task / shape.heads, task % shape.heads, scratch);
      for (std::int64_t i = 0; i < length; ++i) {
        head.RowProbabilities(i, scratch.p.data());
        const float* weights = head.ValueWeights(i, scratch.p.data());
        float* o = out.data() + head.Row(i) * d + head.Column();
        std::fill(o, o + head.hd(), 0.0f);
        AddWeightedRows(weights, head.V(0), head.hd(), i + 1, head.hd(), o);
        if (vt.empty()) continue;
        const std::int64_t low = head.RowSums(vt, layer.value_rows, i, weights, scratch.mass.data());
        AddWeightedRows(scratch.mass.data(), head.TableRow(vt, low), head.hd(), layer.value_rows.Count(layer.Reach(i)),
                        head.hd(), o);
      }
    }
  });
}

AttentionGrads AttentionBackward(const AttentionShape& shape, const AttentionTerms& terms, std::span<const float> qkv,
                                 std::span<const float> dout) {
  const Layer layer(shape, terms);
  const std::int64_t d = shape.d(), length = shape.length, hd = shape.head_dim, tasks = shape.batch * shape.heads;
  const std::int64_t extent = layer.extent;
  const std::int64_t* pos = layer.position.data();
  const AttentionTable &qt = terms.query_table, &kt = terms.key_table, &vt = terms.value_table;
  const bool bias = !terms.distance_bias.empty(), pair = !terms.pair_bias.empty(), ub = !terms.key_bias.empty();
  const bool weighted = !terms.probability_weight.empty();
  AttentionGrads grads;
  grads.dqkv.assign(static_cast<std::size_t>(shape.batch * length * 3 * d), 0.0f);
  // dpair by (i, i - j) here, moved to (p_i, p_i - p_j) once summed.
  Partials dbias(tasks, bias ? extent : 0), dpair(tasks, pair ? length * length : 0);
  Partials dquery(tasks, qt.HeadSize(hd)), dkey(tasks, kt.HeadSize(hd)), dvalue(tasks, vt.HeadSize(hd));
  Partials dkey_bias(tasks, ub ? hd : 0), dweight(tasks, weighted ? extent : 0);
  ParallelFor(tasks, 1, [&](std::int64_t begin, std::int64_t end) {
    Scratch scratch(layer);
    std::vector<float>& p = scratch.p;
    std::vector<float>& ds = scratch.dp;  // dp, then ds in place
    for (std::int64_t task = begin; task < end; ++task) {
      HeadTask head(layer, qkv.data(), task / shape.heads, task % shape.heads, scratch);
      const auto dq_of = [&](std::int64_t t) { return grads.dqkv.data() + head.Row(t) * 3 * d + head.Column(); };
      std::fill(scratch.dkeys.begin(), scratch.dkeys.end(), 0.0f);
      std::fill(scratch.dvalues.begin(), scratch.dvalues.end(), 0.0f);
      std::fill(scratch.dkey_bias.begin(), scratch.dkey_bias.end(), 0.0f);
      for (std::vector<float>* v :
           {&scratch.dkey_rel, &scratch.dquery_table, &scratch.dkey_table, &scratch.dvalue_table}) {
        std::fill(v->begin(), v->end(), 0.0f);
      }
      for (std::int64_t i = 0; i < length; ++i) {
        head.RowProbabilities(i, p.data());
        const float* q = head.Q(i);
        const float* g = dout.data() + head.Row(i) * d + head.Column();
        DotRows(g, head.V(0), hd, i + 1, hd, ds.data());
        const std::int64_t reach = layer.Reach(i);
        std::int64_t value_low = 0;
        if (!vt.empty()) {
          value_low = layer.value_rows.low[reach];
          DotRows(g, head.TableRow(vt, value_low), hd, layer.value_rows.Count(reach), hd, scratch.do_rel.data());
          for (std::int64_t j = 0; j <= i; ++j) ds[j] += scratch.do_rel[head.RowOf(vt, i, j) - value_low];
        }
        // ds holds do_i.(v_j + C[r]); URPE: dw(delta) += p_ij that, and dp_ij = w(delta) that.
        const float* weights = head.ValueWeights(i, p.data());
        if (weighted) {
          const float* w = head.DistanceRow(terms.probability_weight, i);
          for (std::int64_t j = 0; j <= i; ++j) {
            dweight.Of(task)[pos[i] - pos[j]] += static_cast<double>(p[j]) * ds[j];
            ds[j] *= *(w - pos[j]);
          }
        }
        float expected = 0.0f;  // sum_j p_ij dp_ij
        for (std::int64_t j = 0; j <= i; ++j) expected += p[j] * ds[j];
        for (std::int64_t j = 0; j <= i; ++j) {
          ds[j] = p[j] * (ds[j] - expected);
          scratch.scaled[j] = head.scale() * ds[j];
        }
        float* dq = dq_of(i);
        AddWeightedRows(ds.data(), head.K(0), hd, i + 1, hd, dq);
        AddScaledToRows(q, scratch.scaled.data(), scratch.dkeys.data(), hd, i + 1, hd);  // dk_j
        AddScaledToRows(g, weights, scratch.dvalues.data(), hd, i + 1, hd);              // dv_j
        if (bias) {
          for (std::int64_t j = 0; j <= i; ++j) dbias.Of(task)[pos[i] - pos[j]] += ds[j];
        }
        if (pair) {
          double* row = dpair.Of(task) + i * length;
          for (std::int64_t j = 0; j <= i; ++j) row[i - j] = ds[j];
        }
        if (ub) {
          for (std::int64_t j = 0; j <= i; ++j) scratch.dkey_bias[j] += scratch.scaled[j];
        }
        if (!qt.empty()) {  // dq_i += ds_mass A (scaled below), dA[r] += scale ds_mass[r] q_i
          const std::int64_t low = head.RowSums(qt, layer.query_rows, i, ds.data(), scratch.ds_mass.data());
          const std::int64_t count = layer.query_rows.Count(reach);
          AddWeightedRows(scratch.ds_mass.data(), head.TableRow(qt, low), hd, count, hd, dq);
          for (std::int64_t r = 0; r < count; ++r) scratch.ds_mass[r] *= head.scale();
          AddScaledToRows(q, scratch.ds_mass.data(), scratch.dquery_table.data() + low * hd, hd, count, hd);
        }
        if (!kt.empty()) {  // the coefficient of k_j.B[r]: summed over the queries first
          for (std::int64_t j = 0; j <= i; ++j)
            scratch.dkey_rel[head.RowOf(kt, i, j) * length + j] += scratch.scaled[j];
        }
        if (!vt.empty()) {  // dC[r] += mass[r] do_i
          head.RowSums(vt, layer.value_rows, i, weights, scratch.mass.data());
          AddScaledToRows(g, scratch.mass.data(), scratch.dvalue_table.data() + value_low * hd, hd,
                          layer.value_rows.Count(reach), hd);
        }
        for (std::int64_t e = 0; e < hd; ++e) dq[e] *= head.scale();
      }
      for (std::int64_t r = 0; r < (kt.empty() ? 0 : kt.rows); ++r) {
        // dk_j += w_rj B[r] and dB[r] = sum_j w_rj k_j, w_rj = scale sum over the queries reading row r of ds_ij
        const float* w = scratch.dkey_rel.data() + r * length;
        AddScaledToRows(head.TableRow(kt, r), w, scratch.dkeys.data(), hd, length, hd);
        AddWeightedRows(w, head.K(0), hd, length, hd, scratch.dkey_table.data() + r * hd);
      }
      const auto keep = [&](const std::vector<float>& from, Partials& to) {
        std::copy(from.begin(), from.end(), to.Of(task));
      };
      keep(scratch.dquery_table, dquery);
      keep(scratch.dkey_table, dkey);
      keep(scratch.dvalue_table, dvalue);
      if (ub) {  // u.k_j: dk_j += scale (sum_i ds_ij) u, du = scale sum_j (sum_i ds_ij) k_j
        double* du = dkey_bias.Of(task);
        for (std::int64_t j = 0; j < length; ++j) {
          Axpy(scratch.dkey_bias[j], head.KeyBias(), scratch.dkeys.data() + j * hd, hd);
          for (std::int64_t e = 0; e < hd; ++e) du[e] += static_cast<double>(scratch.dkey_bias[j]) * head.K(j)[e];
        }
      }
      for (std::int64_t t = 0; t < length; ++t) {  // the task's own columns of dqkv, still zero
        std::copy_n(scratch.dkeys.data() + t * hd, hd, dq_of(t) + d);
        std::copy_n(scratch.dvalues.data() + t * hd, hd, dq_of(t) + 2 * d);
      }
    }
  });
  // The shared terms: partials summed in task order (b, then h).
  grads.dbias = dbias.Sum(shape.heads, true);
  grads.dpair = dpair.Sum(shape.heads, true);
  if (pair && !shape.positions.empty()) {  // (h, i, i - j) -> (h, p_i, p_i - p_j)
    std::vector<double> by_position(static_cast<std::size_t>(shape.heads * extent * extent), 0.0);
    for (std::int64_t h = 0; h < shape.heads; ++h) {
      for (std::int64_t i = 0; i < length; ++i) {
        for (std::int64_t j = 0; j <= i; ++j) {
          by_position[(h * extent + pos[i]) * extent + pos[i] - pos[j]] =
              grads.dpair[(h * length + i) * length + i - j];
        }
      }
    }
    grads.dpair = std::move(by_position);
  }
  grads.dquery_table = dquery.Sum(shape.heads, qt.per_head);
  grads.dkey_table = dkey.Sum(shape.heads, kt.per_head);
  grads.dvalue_table = dvalue.Sum(shape.heads, vt.per_head);
  grads.dkey_bias = dkey_bias.Sum(shape.heads, true);
  grads.dprobability_weight = dweight.Sum(shape.heads, true);
  return grads;
}

}  // namespace posenc::tiny_lm
