// Per-target decode attention over kept keys (decode_keys.h), compiled once
// per SIMD target: one work item is one kv head's query heads (the GQA
// group) against one segment of kSegment keys.
//
// For each chunk of 16 keys, the score of query head g is a vector over the
// chunk's 16 keys: sum_d q[g][d] * keys[d][0..16), four accumulators over d
// (independent FMA chains). Then the segment's partial softmax: max m, the
// weights exp(s - m), their sum l, and o = sum_j w_j v_j (four accumulators
// over keys), which the caller combines across segments.
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
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace posenc::HWY_NAMESPACE {
namespace decode {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::CappedTag<float, detail::DecodeKeys::kChunk>;
constexpr std::int64_t kChunk = detail::DecodeKeys::kChunk;

// scores[0..16) = q . keys[d][0..16) for d < dim.
HWY_INLINE void ScoreChunk(const float* HWY_RESTRICT q, const float* HWY_RESTRICT keys, std::int64_t dim,
                           float* HWY_RESTRICT scores) {
  const DF df;
  const auto n = static_cast<std::int64_t>(hn::Lanes(df));
  for (std::int64_t v = 0; v < kChunk; v += n) {
    auto a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
    std::int64_t d = 0;
    for (; d + 4 <= dim; d += 4) {
      a0 = hn::MulAdd(hn::Set(df, q[d]), hn::Load(df, keys + d * kChunk + v), a0);
      a1 = hn::MulAdd(hn::Set(df, q[d + 1]), hn::Load(df, keys + (d + 1) * kChunk + v), a1);
      a2 = hn::MulAdd(hn::Set(df, q[d + 2]), hn::Load(df, keys + (d + 2) * kChunk + v), a2);
      a3 = hn::MulAdd(hn::Set(df, q[d + 3]), hn::Load(df, keys + (d + 3) * kChunk + v), a3);
    }
    for (; d < dim; ++d) a0 = hn::MulAdd(hn::Set(df, q[d]), hn::Load(df, keys + d * kChunk + v), a0);
    hn::Store(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)), df, scores + v);
  }
}

// The partial softmax of one item: out [group][2 + value_cols] holds, per
// query head, m, l and o[value_cols].
inline void DecodeSegmentImpl(const detail::AttentionPlan& query, const detail::DecodeKeys& keys, std::int64_t h,
                              std::int64_t begin, std::int64_t end, float* HWY_RESTRICT scores,
                              float* HWY_RESTRICT out) {
  const DF df;
  const auto n = static_cast<std::int64_t>(hn::Lanes(df));
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const std::int64_t dim = keys.head_dim(), cols = keys.value_cols(), width = end - begin;
  const std::int64_t p = query.q_positions[0], w = query.rerope_window;
  const AttentionMask& mask = query.mask;
  for (std::int64_t g = 0; g < query.group; ++g) {
    const std::int64_t head = h * query.group + g;
    const float* q1 = query.q1.data() + head * dim;
    const float* q2 = w > 0 ? query.q2.data() + head * dim : nullptr;
    float* s = scores;
    // Scores by chunk: near keys (p - j < w) from q1 . k1, far ones from
    // q2 . k2 (ReRoPE, Self-Extend); both where a chunk straddles w.
    for (std::int64_t c = begin; c < end; c += kChunk) {
      const std::int64_t chunk = c / kChunk;
      const bool all_near = w <= 0 || p - c < w;
      const bool all_far = w > 0 && p - (c + kChunk - 1) >= w;
      if (!all_far) ScoreChunk(q1, keys.Keys1(h) + chunk * dim * kChunk, dim, s + (c - begin));
      if (!all_near) {
        HWY_ALIGN float far[kChunk];
        ScoreChunk(q2, keys.Keys2(h) + chunk * dim * kChunk, dim, far);
        for (std::int64_t j = 0; j < kChunk; ++j) {
          if (all_far || p - (c + j) >= w) s[c - begin + j] = far[j];
        }
      }
    }
    float* o = out + g * (2 + cols);
    std::fill_n(o, 2 + cols, 0.0f);
    if (query.softcap > 0) {
      const auto cap = hn::Set(df, query.softcap), inv_cap = hn::Set(df, 1.0f / query.softcap);
      for (std::int64_t j = 0; j < width; j += n) {
        hn::Store(hn::Mul(cap, hn::Tanh(df, hn::Mul(hn::Load(df, s + j), inv_cap))), df, s + j);
      }
    }
    // Keys the mask hides (or past the last key) score -inf: tested one by
    // one only in a segment the mask cuts.
    const std::int64_t last = end - 1;
    const bool all_visible = last < keys.tokens() && detail::KeyVisible(mask, p, begin) &&
                             detail::KeyVisible(mask, p, last) && (mask.window <= 0 || p - begin < mask.window);
    if (!all_visible) {
      for (std::int64_t j = 0; j < width; ++j) {
        if (begin + j >= keys.tokens() || !detail::KeyVisible(mask, p, begin + j)) s[j] = kNegInf;
      }
    }
    auto max_vec = hn::Set(df, kNegInf);
    auto nan_mask = hn::IsNaN(max_vec);  // all false
    for (std::int64_t j = 0; j < width; j += n) {
      const auto score = hn::Load(df, s + j);
      max_vec = hn::Max(max_vec, score);
      nan_mask = hn::Or(nan_mask, hn::IsNaN(score));
    }
    if (!hn::AllFalse(df, nan_mask)) {
      o[0] = std::numeric_limits<float>::quiet_NaN();
      continue;
    }
    const float m = hn::GetLane(hn::MaxOfLanes(df, max_vec));
    o[0] = m;
    if (m == kNegInf) continue;  // nothing visible: l = 0, o = 0
    const auto shift = hn::Set(df, m);
    auto sum = hn::Zero(df);
    for (std::int64_t j = 0; j < width; j += n) {
      const auto score = hn::Load(df, s + j);
      const auto weight = hn::IfThenZeroElse(hn::Eq(score, hn::Set(df, kNegInf)), hn::Exp(df, hn::Sub(score, shift)));
      hn::Store(weight, df, s + j);
      sum = hn::Add(sum, weight);
    }
    o[1] = hn::GetLane(hn::SumOfLanes(df, sum));
    const float* values = keys.Values(h) + begin * cols;
    for (std::int64_t c = 0; c < cols; c += n) {
      auto a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
      for (std::int64_t j = 0; j < width; j += 4) {  // width: whole chunks of 16
        a0 = hn::MulAdd(hn::Set(df, s[j]), hn::Load(df, values + j * cols + c), a0);
        a1 = hn::MulAdd(hn::Set(df, s[j + 1]), hn::Load(df, values + (j + 1) * cols + c), a1);
        a2 = hn::MulAdd(hn::Set(df, s[j + 2]), hn::Load(df, values + (j + 2) * cols + c), a2);
        a3 = hn::MulAdd(hn::Set(df, s[j + 3]), hn::Load(df, values + (j + 3) * cols + c), a3);
      }
      hn::StoreU(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)), df, o + 2 + c);
    }
  }
}

}  // namespace decode

inline void DecodeSegmentImpl(const detail::AttentionPlan& query, const detail::DecodeKeys& keys, std::int64_t h,
                              std::int64_t begin, std::int64_t end, float* scores, float* out) {
  decode::DecodeSegmentImpl(query, keys, h, begin, end, scores, out);
}

}  // namespace posenc::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard
