// Per-target decode attention over kept keys (decode_keys.h), compiled once
// per SIMD target: one work item is one kv head's query heads (the GQA
// group) against one segment of kSegment keys.
//
// For each chunk of 16 keys, the score of query head g is a vector over the
// chunk's 16 keys: sum_d q[g][d] * keys[d][0..16), even and odd d in
// separate accumulators (ScoreVectors). Then the segment's partial softmax:
// max m, the weights exp(s - m), their sum l, and o = sum_j w_j v_j (each
// column vector one chain over the keys, WeightedValues), which the caller
// combines across segments.
#if defined(POSENC_DECODE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_DECODE_INL_H_
#undef POSENC_DECODE_INL_H_
#else
#define POSENC_DECODE_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "attention/attention_rules.h"
#include "attention/decode_keys.h"
#include "hwy/cache_control.h"
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace posenc::HWY_NAMESPACE::decode {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::CappedTag<float, detail::DecodeKeys::kChunk>;
constexpr std::int64_t kChunk = detail::DecodeKeys::kChunk;
constexpr std::int64_t kSegment = detail::kDecodeSegment;

// Up to four query heads of one GQA group at a time (named accumulators, not
// arrays: sizeless SVE/RVV vectors cannot live in arrays), so that each key
// and each value row is loaded once for the heads that share it.
constexpr std::int64_t kHeadsAtOnce = 4;

// scores[g][0..16) = q[g] . keys[d][0..16) over d < dim, for g < H, V
// vectors of the chunk at a time: even and odd d in separate accumulators
// (2 V H independent FMA chains, each one lane's sum over d in order).
template <int H, int V>
HWY_INLINE void ScoreVectors(const float* const* q, const float* HWY_RESTRICT keys, std::int64_t dim,
                             float* const* scores, std::int64_t at) {
  const DF df;
  const auto n = static_cast<std::int64_t>(hn::Lanes(df));
  for (std::int64_t v = 0; v < kChunk; v += V * n) {
    // a, b: vector v (even, odd d); e, f: vector v + n (V = 2).
    auto a0 = hn::Zero(df), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    auto e0 = a0, e1 = a0, e2 = a0, f0 = a0, f1 = a0, f2 = a0;
    const auto step = [&](std::int64_t d, auto& x0, [[maybe_unused]] auto& x1, [[maybe_unused]] auto& x2,
                          [[maybe_unused]] auto& x3, [[maybe_unused]] auto& y0, [[maybe_unused]] auto& y1,
                          [[maybe_unused]] auto& y2) HWY_ATTR {
      const auto k = hn::Load(df, keys + d * kChunk + v);
      const auto w0 = hn::Set(df, q[0][d]);
      x0 = hn::MulAdd(w0, k, x0);
      if constexpr (H > 1) x1 = hn::MulAdd(hn::Set(df, q[1][d]), k, x1);
      if constexpr (H > 2) x2 = hn::MulAdd(hn::Set(df, q[2][d]), k, x2);
      if constexpr (H > 3) x3 = hn::MulAdd(hn::Set(df, q[3][d]), k, x3);
      if constexpr (V == 2) {
        const auto k2 = hn::Load(df, keys + d * kChunk + v + n);
        y0 = hn::MulAdd(w0, k2, y0);
        if constexpr (H > 1) y1 = hn::MulAdd(hn::Set(df, q[1][d]), k2, y1);
        if constexpr (H > 2) y2 = hn::MulAdd(hn::Set(df, q[2][d]), k2, y2);
      }
    };
    std::int64_t d = 0;
    for (; d + 2 <= dim; d += 2) {
      step(d, a0, a1, a2, a3, e0, e1, e2);
      step(d + 1, b0, b1, b2, b3, f0, f1, f2);
    }
    if (d < dim) step(d, a0, a1, a2, a3, e0, e1, e2);
    hn::Store(hn::Add(a0, b0), df, scores[0] + at + v);
    if constexpr (H > 1) hn::Store(hn::Add(a1, b1), df, scores[1] + at + v);
    if constexpr (H > 2) hn::Store(hn::Add(a2, b2), df, scores[2] + at + v);
    if constexpr (H > 3) hn::Store(hn::Add(a3, b3), df, scores[3] + at + v);
    if constexpr (V == 2) {
      hn::Store(hn::Add(e0, f0), df, scores[0] + at + v + n);
      if constexpr (H > 1) hn::Store(hn::Add(e1, f1), df, scores[1] + at + v + n);
      if constexpr (H > 2) hn::Store(hn::Add(e2, f2), df, scores[2] + at + v + n);
    }
  }
}

// The chunk's scores two vectors a pass where a chunk holds two or more
// (AVX2, SSE4, NEON) and the accumulators fit in 16 registers (up to three
// heads): each key row d is then read once, whole, with the heads' q[g][d]
// broadcast once for both vectors, instead of half a row on each of two
// passes; 1.18x faster scores and values from cache on AVX2, 1.12x with
// 8,192 cached tokens from memory. Bitwise the same sums either way.
template <int H>
HWY_INLINE void ScoreChunk(const float* const* q, const float* HWY_RESTRICT keys, std::int64_t dim,
                           float* const* scores, std::int64_t at) {
  const auto n = static_cast<std::int64_t>(hn::Lanes(DF()));
  if constexpr (H <= 3) {
    if (2 * n <= kChunk) return ScoreVectors<H, 2>(q, keys, dim, scores, at);
  }
  ScoreVectors<H, 1>(q, keys, dim, scores, at);
}

// Where a row takes several passes (AVX2 and narrower: a 64-wide head's
// row is 256 bytes, a pass reads 128), the first pass reads half of each
// row from memory, a stride the hardware prefetchers follow late: it asks
// for whole rows kPrefetchRows ahead, and the later passes find them in
// the cache. The AVX2 target's int8 decode on a Zen 4 (alternating
// processes, mean tokens/s): 152.8 -> 167.5 after 2,048 cached tokens
// (five pairs), 56.2 -> 64.9 after 8,192 (three pairs); on AVX-512 (one
// pass a row, read in order) the same prefetch cost 7%, so it is not made.
constexpr std::int64_t kPrefetchRows = 16;

// o[g][c] = sum_j w[g][j] values[j][c] for g < H, four column vectors at a
// time (4 H accumulators), so that a pass reads whole 64-float rows of a
// 64-wide head on AVX-512 and half rows on AVX2. Four on every target: on
// AVX2 (16 registers), where three heads then need more registers than
// there are, four vectors still ran 1.12x faster than two at 2,048 cached
// tokens (half the passes over the values).
template <int H>
HWY_INLINE void WeightedValues(const float* const* w, const float* HWY_RESTRICT values, std::int64_t width,
                               std::int64_t cols, float* const* o) {
  const DF df;
  const auto n = static_cast<std::int64_t>(hn::Lanes(df));
  for (std::int64_t c = 0; c < cols; c += 4 * n) {
    // Vector v of the pass is real when c + v n < cols (values are padded to
    // whole vectors); the others load and add zeros.
    const bool has1 = c + n < cols, has2 = c + 2 * n < cols, has3 = c + 3 * n < cols;
    auto a0 = hn::Zero(df), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    auto e0 = a0, e1 = a0, e2 = a0, e3 = a0, f0 = a0, f1 = a0, f2 = a0, f3 = a0;
    const bool first_of_passes = c == 0 && 4 * n < cols;
    for (std::int64_t j = 0; j < width; ++j) {
      const float* row = values + j * cols + c;
      if (first_of_passes && j + kPrefetchRows < width) {
        const auto* ahead = reinterpret_cast<const char*>(values + (j + kPrefetchRows) * cols);
        for (std::int64_t byte = 0; byte < cols * static_cast<std::int64_t>(sizeof(float)); byte += 64) {
          hwy::Prefetch(ahead + byte);
        }
      }
      const auto v0 = hn::Load(df, row);
      const auto v1 = has1 ? hn::Load(df, row + n) : hn::Zero(df);
      const auto v2 = has2 ? hn::Load(df, row + 2 * n) : hn::Zero(df);
      const auto v3 = has3 ? hn::Load(df, row + 3 * n) : hn::Zero(df);
      const auto add = [&](int g, auto& x, auto& y, auto& z, auto& u) HWY_ATTR {
        const auto weight = hn::Set(df, w[g][j]);
        x = hn::MulAdd(weight, v0, x);
        y = hn::MulAdd(weight, v1, y);
        z = hn::MulAdd(weight, v2, z);
        u = hn::MulAdd(weight, v3, u);
      };
      add(0, a0, b0, e0, f0);
      if constexpr (H > 1) add(1, a1, b1, e1, f1);
      if constexpr (H > 2) add(2, a2, b2, e2, f2);
      if constexpr (H > 3) add(3, a3, b3, e3, f3);
    }
    const auto store = [&](int g, auto x, auto y, auto z, auto u) HWY_ATTR {
      hn::StoreU(x, df, o[g] + c);
      if (has1) hn::StoreU(y, df, o[g] + c + n);
      if (has2) hn::StoreU(z, df, o[g] + c + 2 * n);
      if (has3) hn::StoreU(u, df, o[g] + c + 3 * n);
    };
    store(0, a0, b0, e0, f0);
    if constexpr (H > 1) store(1, a1, b1, e1, f1);
    if constexpr (H > 2) store(2, a2, b2, e2, f2);
    if constexpr (H > 3) store(3, a3, b3, e3, f3);
  }
}

// Query heads [g0, g0 + H) of kv head h against keys [begin, end): their
// scores in scores[g - g0][0..width), then their partial softmaxes.
template <int H>
HWY_INLINE void SegmentHeads(const detail::AttentionPlan& query, const detail::DecodeKeys& keys, std::int64_t h,
                             std::int64_t g0, std::int64_t begin, std::int64_t end, float* HWY_RESTRICT scores,
                             float* HWY_RESTRICT out) {
  const DF df;
  const auto n = static_cast<std::int64_t>(hn::Lanes(df));
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const std::int64_t dim = keys.head_dim(), cols = keys.value_cols(), width = end - begin;
  // Key index i (from the first kept key) sits at position base + i.
  const std::int64_t p = query.q_positions[0], base = keys.first();
  const bool two_sources = query.near.window > 0;
  const std::int64_t near_start = two_sources ? detail::NearStart(query.near, p) : 0;
  const AttentionMask& mask = query.mask;
  const float* q1[kHeadsAtOnce];
  const float* q2[kHeadsAtOnce];
  float* s[kHeadsAtOnce];
  float* o[kHeadsAtOnce];
  for (int g = 0; g < H; ++g) {
    const std::int64_t head = h * query.group + g0 + g;
    q1[g] = query.q1.data() + head * dim;
    q2[g] = two_sources ? query.q2.data() + head * dim : nullptr;
    s[g] = scores + g * kSegment;
    o[g] = out + (g0 + g) * (2 + cols);
  }
  // Scores by chunk: near keys (j >= NearStart(p)) from q1 . k1, far ones
  // from q2 . k2 (ReRoPE, Self-Extend); both where a chunk straddles it.
  for (std::int64_t c = begin; c < end; c += kChunk) {
    const std::int64_t chunk = c / kChunk, at = c - begin;
    const bool all_near = !two_sources || base + c >= near_start;
    const bool all_far = two_sources && base + c + kChunk - 1 < near_start;
    if (!all_far) ScoreChunk<H>(q1, keys.Keys1(h) + chunk * dim * kChunk, dim, s, at);
    if (!all_near) {
      HWY_ALIGN float far_scores[kHeadsAtOnce * kChunk];
      float* far[kHeadsAtOnce];
      for (int g = 0; g < H; ++g) far[g] = far_scores + g * kChunk;
      ScoreChunk<H>(q2, keys.Keys2(h) + chunk * dim * kChunk, dim, far, 0);
      for (int g = 0; g < H; ++g) {
        for (std::int64_t j = 0; j < kChunk; ++j) {
          if (all_far || base + c + j < near_start) s[g][at + j] = far[g][j];
        }
      }
    }
  }
  // Keys the mask hides (or past the last key) score -inf: tested one by one
  // only in a segment the mask cuts.
  const std::int64_t last = end - 1;
  const bool all_visible = last < keys.kept() && detail::KeyVisible(mask, p, base + begin) &&
                           detail::KeyVisible(mask, p, base + last) &&
                           (mask.window <= 0 || p - (base + begin) < mask.window);
  for (int g = 0; g < H; ++g) {
    float* row = s[g];
    float* part = o[g];
    std::fill_n(part, 2 + cols, 0.0f);
    if (query.softcap > 0) {
      const auto cap = hn::Set(df, query.softcap), inv_cap = hn::Set(df, 1.0f / query.softcap);
      for (std::int64_t j = 0; j < width; j += n) {
        hn::Store(hn::Mul(cap, hn::Tanh(df, hn::Mul(hn::Load(df, row + j), inv_cap))), df, row + j);
      }
    }
    if (!all_visible) {
      for (std::int64_t j = 0; j < width; ++j) {
        if (begin + j >= keys.kept() || !detail::KeyVisible(mask, p, base + begin + j)) row[j] = kNegInf;
      }
    }
    auto max_vec = hn::Set(df, kNegInf);
    auto nan_mask = hn::IsNaN(max_vec);  // all false
    for (std::int64_t j = 0; j < width; j += n) {
      const auto score = hn::Load(df, row + j);
      max_vec = hn::Max(max_vec, score);
      nan_mask = hn::Or(nan_mask, hn::IsNaN(score));
    }
    const float m = hn::GetLane(hn::MaxOfLanes(df, max_vec));
    part[0] = hn::AllFalse(df, nan_mask) ? m : std::numeric_limits<float>::quiet_NaN();
    // Weights exp(s - m), 0 for hidden keys and for a row that sees none.
    const auto shift = hn::Set(df, m == kNegInf ? 0.0f : m);
    auto sum = hn::Zero(df);
    for (std::int64_t j = 0; j < width; j += n) {
      const auto score = hn::Load(df, row + j);
      const auto weight = hn::IfThenZeroElse(hn::Eq(score, hn::Set(df, kNegInf)), hn::Exp(df, hn::Sub(score, shift)));
      hn::Store(weight, df, row + j);
      sum = hn::Add(sum, weight);
    }
    part[1] = hn::GetLane(hn::SumOfLanes(df, sum));
  }
  float* values_out[kHeadsAtOnce];
  for (int g = 0; g < H; ++g) values_out[g] = o[g] + 2;
  WeightedValues<H>(s, keys.Values(h) + begin * cols, width, cols, values_out);
}

// The partial softmax of one item: out [group][2 + value_cols] holds, per
// query head, m, l and o[value_cols]; scores has kHeadsAtOnce * kSegment
// floats.
inline void DecodeSegmentImpl(const detail::AttentionPlan& query, const detail::DecodeKeys& keys, std::int64_t h,
                              std::int64_t begin, std::int64_t end, float* HWY_RESTRICT scores,
                              float* HWY_RESTRICT out) {
  for (std::int64_t g0 = 0; g0 < query.group; g0 += kHeadsAtOnce) {
    switch (std::min(kHeadsAtOnce, query.group - g0)) {
      case 1: SegmentHeads<1>(query, keys, h, g0, begin, end, scores, out); break;
      case 2: SegmentHeads<2>(query, keys, h, g0, begin, end, scores, out); break;
      case 3: SegmentHeads<3>(query, keys, h, g0, begin, end, scores, out); break;
      default: SegmentHeads<4>(query, keys, h, g0, begin, end, scores, out); break;
    }
  }
}

}  // namespace posenc::HWY_NAMESPACE::decode

namespace posenc::HWY_NAMESPACE {

inline void DecodeSegmentImpl(const detail::AttentionPlan& query, const detail::DecodeKeys& keys, std::int64_t h,
                              std::int64_t begin, std::int64_t end, float* scores, float* out) {
  decode::DecodeSegmentImpl(query, keys, h, begin, end, scores, out);
}

}  // namespace posenc::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard
