// Causal multi-head attention of the tiny model, forward and backward,
// materialized one (sequence, head) at a time:
//   s_ij = scale (q_i.k_j + q_i.a^K_c) + bias_h[i - j] + pair_h[i, i - j]   for j <= i
//   p_i  = softmax_j(s_i)                                (float32, max subtracted)
//   o_i  = sum_j p_ij (v_j + a^V_c)
// scale = 1/sqrt(hd); a^K, a^V (Shaw) are rows of the layer's tables for the
// clipped distance class c = min(i - j, K) (table row K - c, which is
// ShawRelativeSpec::Row for d = j - i); bias_h (ALiBi, T5, KERPLE) depends
// on i - j only, pair_h (FIRE) on the query's position too. Without Shaw or
// biases those terms are absent.
//
// Backward, with do_i = dL/do_i:
//   dp_ij = do_i.(v_j + a^V_c)     ds_ij = p_ij (dp_ij - sum_j' p_ij' dp_ij')
//   dq_i  = scale sum_j ds_ij (k_j + a^K_c)     dk_j = scale sum_i ds_ij q_i
//   dv_j  = sum_i p_ij do_i         da^K_c = scale sum ds_ij q_i   da^V_c = sum p_ij do_i
//   dbias_h[delta] = sum over pairs with i - j = delta of ds_ij    dpair_h[i, delta] = ds_ij
// The probabilities are recomputed by the same function as the forward
// (bit for bit the same), so nothing [T, T] is stored.
//
// Threads: ParallelFor over the B*H (sequence, head) tasks. A task writes
// only its own rows and columns of the outputs, and its own partials of the
// shared parameters (bias, Shaw tables), which are summed afterwards in task
// order: results do not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "posenc/parallel.h"
#include "train/tiny_lm_internal.h"
#include "train/tiny_lm_kernels.h"

namespace posenc::tiny_lm {
namespace {

// One (sequence b, head h) of qkv [N, 3d].
class HeadTask {
 public:
  // keys, values: [T, hd] scratch that receives the head's keys and values.
  HeadTask(const AttentionShape& shape, const AttentionTerms& terms, const float* qkv, std::int64_t b, std::int64_t h,
           float* keys, float* values)
      : shape_(shape), terms_(terms), qkv_(qkv), b_(b), h_(h), hd_(shape.head_dim),
        scale_(1.0f / std::sqrt(static_cast<float>(shape.head_dim))), keys_(keys), values_(values) {
    for (std::int64_t t = 0; t < shape.length; ++t) {
      std::copy(Q(t) + shape_.d(), Q(t) + shape_.d() + hd_, keys_ + t * hd_);
      std::copy(Q(t) + 2 * shape_.d(), Q(t) + 2 * shape_.d() + hd_, values_ + t * hd_);
    }
  }

  std::int64_t hd() const { return hd_; }
  float scale() const { return scale_; }
  bool shaw() const { return !terms_.rel_k.empty(); }
  // Row n of the [N, *] tensors and the head's column in a [*, d] block.
  std::int64_t Row(std::int64_t t) const { return b_ * shape_.length + t; }
  std::int64_t Column() const { return h_ * hd_; }
  const float* Q(std::int64_t t) const { return qkv_ + Row(t) * 3 * shape_.d() + Column(); }
  // Key and value rows, contiguous: every query row reads all of them, and
  // at long lengths their rows in qkv (3d floats apart) fell out of the cache.
  const float* K(std::int64_t t) const { return keys_ + t * hd_; }
  const float* V(std::int64_t t) const { return values_ + t * hd_; }
  // Shaw: the number of distance classes of row i, and class c's rows.
  std::int64_t Classes(std::int64_t i) const { return shaw() ? std::min(i, terms_.shaw_clip) + 1 : 0; }
  std::int64_t ClassOf(std::int64_t i, std::int64_t j) const { return std::min(i - j, terms_.shaw_clip); }
  std::int64_t TableRow(std::int64_t c) const { return terms_.shaw_clip - c; }
  const float* RelK(std::int64_t c) const { return terms_.rel_k.data() + TableRow(c) * hd_; }
  const float* RelV(std::int64_t c) const { return terms_.rel_v.data() + TableRow(c) * hd_; }
  // Between the rows of consecutive keys (K(j + 1) - K(j)), and of
  // consecutive Shaw classes (RelK(c + 1) - RelK(c): the table walked back).
  std::int64_t KeyStride() const { return hd_; }
  std::int64_t ClassStride() const { return -hd_; }

  // p[0..i]: row i's probabilities; q_rel[c] = q_i.a^K_c for Shaw.
  void RowProbabilities(std::int64_t i, float* p, float* q_rel) const {
    const float* q = Q(i);
    if (shaw()) DotRows(q, RelK(0), ClassStride(), Classes(i), hd_, q_rel);
    const float* bias = terms_.distance_bias.empty() ? nullptr : terms_.distance_bias.data() + h_ * shape_.length + i;
    const float* pair = terms_.pair_bias.empty() ? nullptr : PairRow(i) + i;
    DotRows(q, K(0), KeyStride(), i + 1, hd_, p);
    float max = -std::numeric_limits<float>::infinity();
    for (std::int64_t j = 0; j <= i; ++j) {
      float s = p[j];
      if (shaw()) s += q_rel[ClassOf(i, j)];
      s *= scale_;
      if (bias != nullptr) s += *(bias - j);  // bias_h[i - j]
      if (pair != nullptr) s += *(pair - j);  // pair_h[i, i - j]
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

  // pair_h[i, 0..T-1] of the [H, T, T] pair bias.
  const float* PairRow(std::int64_t i) const {
    return terms_.pair_bias.data() + (h_ * shape_.length + i) * shape_.length;
  }

  // mass[c] = sum of w[j] over the keys of class c (Shaw).
  void ClassSums(std::int64_t i, const float* w, float* mass) const {
    std::fill(mass, mass + Classes(i), 0.0f);
    for (std::int64_t j = 0; j <= i; ++j) mass[ClassOf(i, j)] += w[j];
  }

 private:
  const AttentionShape& shape_;
  const AttentionTerms& terms_;
  const float* qkv_;
  std::int64_t b_, h_, hd_;
  float scale_;
  float* keys_;
  float* values_;
};

// Scratch of one thread: [T] rows, [K + 1] classes, [T, hd] keys and
// values and their gradients.
struct Scratch {
  std::vector<float> p, dp, scaled, q_rel, do_rel, mass, ds_mass;
  std::vector<float> keys, values, dkeys, dvalues;
  Scratch(std::int64_t length, std::int64_t classes, std::int64_t head_dim)
      : p(length), dp(length), scaled(length), q_rel(classes), do_rel(classes), mass(classes), ds_mass(classes),
        keys(static_cast<std::size_t>(length * head_dim)), values(keys.size()), dkeys(keys.size()),
        dvalues(keys.size()) {}
};

}  // namespace

void AttentionForward(const AttentionShape& shape, const AttentionTerms& terms, std::span<const float> qkv,
                      std::span<float> out) {
  const std::int64_t d = shape.d(), length = shape.length;
  ParallelFor(shape.batch * shape.heads, 1, [&](std::int64_t begin, std::int64_t end) {
    Scratch scratch(length, terms.shaw_clip + 1, shape.head_dim);
    for (std::int64_t task = begin; task < end; ++task) {
      const HeadTask head(shape, terms, qkv.data(), task / shape.heads, task % shape.heads, scratch.keys.data(),
                          scratch.values.data());
      for (std::int64_t i = 0; i < length; ++i) {
        head.RowProbabilities(i, scratch.p.data(), scratch.q_rel.data());
        float* o = out.data() + head.Row(i) * d + head.Column();
        std::fill(o, o + head.hd(), 0.0f);
        AddWeightedRows(scratch.p.data(), head.V(0), head.KeyStride(), i + 1, head.hd(), o);
        if (!head.shaw()) continue;
        head.ClassSums(i, scratch.p.data(), scratch.mass.data());
        AddWeightedRows(scratch.mass.data(), head.RelV(0), head.ClassStride(), head.Classes(i), head.hd(), o);
      }
    }
  });
}

AttentionGrads AttentionBackward(const AttentionShape& shape, const AttentionTerms& terms, std::span<const float> qkv,
                                 std::span<const float> dout) {
  const std::int64_t d = shape.d(), length = shape.length, hd = shape.head_dim, tasks = shape.batch * shape.heads;
  const std::int64_t table = terms.rel_k.empty() ? 0 : (2 * terms.shaw_clip + 1) * hd;
  const bool bias = !terms.distance_bias.empty(), pair = !terms.pair_bias.empty();
  AttentionGrads grads;
  grads.dqkv.assign(static_cast<std::size_t>(shape.batch * length * 3 * d), 0.0f);
  // Per-task partials of the shared parameters: [tasks, T] and [tasks, table].
  std::vector<double> dbias_part(bias ? static_cast<std::size_t>(tasks * length) : 0, 0.0);
  // [tasks, T, T]: each (i, j) of a task written once.
  std::vector<double> dpair_part(pair ? static_cast<std::size_t>(tasks * length * length) : 0, 0.0);
  std::vector<double> drel_k_part(static_cast<std::size_t>(tasks * table), 0.0);
  std::vector<double> drel_v_part(drel_k_part.size(), 0.0);
  ParallelFor(tasks, 1, [&](std::int64_t begin, std::int64_t end) {
    Scratch scratch(length, terms.shaw_clip + 1, hd);
    std::vector<float>& p = scratch.p;
    std::vector<float>& ds = scratch.dp;  // dp, then ds in place
    for (std::int64_t task = begin; task < end; ++task) {
      const HeadTask head(shape, terms, qkv.data(), task / shape.heads, task % shape.heads, scratch.keys.data(),
                          scratch.values.data());
      const auto dq_of = [&](std::int64_t t) { return grads.dqkv.data() + head.Row(t) * 3 * d + head.Column(); };
      std::fill(scratch.dkeys.begin(), scratch.dkeys.end(), 0.0f);
      std::fill(scratch.dvalues.begin(), scratch.dvalues.end(), 0.0f);
      for (std::int64_t i = 0; i < length; ++i) {
        head.RowProbabilities(i, p.data(), scratch.q_rel.data());
        const float* q = head.Q(i);
        const float* g = dout.data() + head.Row(i) * d + head.Column();
        if (head.shaw()) DotRows(g, head.RelV(0), head.ClassStride(), head.Classes(i), hd, scratch.do_rel.data());
        DotRows(g, head.V(0), head.KeyStride(), i + 1, hd, ds.data());
        float weighted = 0.0f;  // sum_j p_ij dp_ij
        for (std::int64_t j = 0; j <= i; ++j) {
          if (head.shaw()) ds[j] += scratch.do_rel[head.ClassOf(i, j)];
          weighted += p[j] * ds[j];
        }
        for (std::int64_t j = 0; j <= i; ++j) {
          ds[j] = p[j] * (ds[j] - weighted);
          scratch.scaled[j] = head.scale() * ds[j];
        }
        float* dq = dq_of(i);
        AddWeightedRows(ds.data(), head.K(0), head.KeyStride(), i + 1, hd, dq);
        AddScaledToRows(q, scratch.scaled.data(), scratch.dkeys.data(), hd, i + 1, hd);  // dk_j
        AddScaledToRows(g, p.data(), scratch.dvalues.data(), hd, i + 1, hd);             // dv_j
        if (bias) {
          for (std::int64_t j = 0; j <= i; ++j) dbias_part[task * length + (i - j)] += ds[j];
        }
        if (pair) {
          double* row = dpair_part.data() + (task * length + i) * length;
          for (std::int64_t j = 0; j <= i; ++j) row[i - j] = ds[j];
        }
        if (head.shaw()) {
          head.ClassSums(i, p.data(), scratch.mass.data());
          head.ClassSums(i, ds.data(), scratch.ds_mass.data());
          AddWeightedRows(scratch.ds_mass.data(), head.RelK(0), head.ClassStride(), head.Classes(i), hd, dq);
          for (std::int64_t c = 0; c < head.Classes(i); ++c) {
            double* drk = drel_k_part.data() + task * table + head.TableRow(c) * hd;
            double* drv = drel_v_part.data() + task * table + head.TableRow(c) * hd;
            for (std::int64_t e = 0; e < hd; ++e) {
              drk[e] += static_cast<double>(head.scale() * scratch.ds_mass[c]) * q[e];
              drv[e] += static_cast<double>(scratch.mass[c]) * g[e];
            }
          }
        }
        for (std::int64_t e = 0; e < hd; ++e) dq[e] *= head.scale();
      }
      for (std::int64_t t = 0; t < length; ++t) {  // the task's own columns of dqkv, still zero
        std::copy_n(scratch.dkeys.data() + t * hd, hd, dq_of(t) + d);
        std::copy_n(scratch.dvalues.data() + t * hd, hd, dq_of(t) + 2 * d);
      }
    }
  });
  // The shared parameters: partials summed in task order (b, then h).
  if (bias) {
    grads.dbias.assign(static_cast<std::size_t>(shape.heads * length), 0.0);
    for (std::int64_t task = 0; task < tasks; ++task) {
      const std::int64_t h = task % shape.heads;
      for (std::int64_t t = 0; t < length; ++t) grads.dbias[h * length + t] += dbias_part[task * length + t];
    }
  }
  if (pair) {
    const std::int64_t square = length * length;
    grads.dpair.assign(static_cast<std::size_t>(shape.heads * square), 0.0);
    for (std::int64_t task = 0; task < tasks; ++task) {
      const std::int64_t h = task % shape.heads;
      for (std::int64_t e = 0; e < square; ++e) grads.dpair[h * square + e] += dpair_part[task * square + e];
    }
  }
  if (table > 0) {
    grads.drel_k.assign(static_cast<std::size_t>(table), 0.0);
    grads.drel_v.assign(static_cast<std::size_t>(table), 0.0);
    for (std::int64_t task = 0; task < tasks; ++task) {
      for (std::int64_t e = 0; e < table; ++e) {
        grads.drel_k[e] += drel_k_part[task * table + e];
        grads.drel_v[e] += drel_v_part[task * table + e];
      }
    }
  }
  return grads;
}

}  // namespace posenc::tiny_lm
