// Dynamic dispatch of the decode kernel (decode-inl.h) and the split-K
// combination of its partial softmaxes.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "attention/decode_kernel.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "attention/decode-inl.h"

#if HWY_ONCE
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "posenc/dtype.h"
#include "posenc/parallel.h"

namespace posenc::detail {
namespace {

constexpr std::int64_t kSegment = kDecodeSegment;

HWY_EXPORT(DecodeSegmentImpl);

// Indices of the segments of kept keys [0, padded), the first at position
// base, that hold a key visible to a query at position p (at least one
// segment, so that a row seeing nothing still gets its empty partial).
std::vector<std::int64_t> VisibleSegments(const AttentionMask& mask, std::int64_t p, std::int64_t base,
                                          std::int64_t padded) {
  const std::int64_t count = std::max<std::int64_t>(1, (padded + kSegment - 1) / kSegment);
  std::vector<std::int64_t> visible;
  const std::int64_t window_begin = mask.window > 0 ? p - mask.window + 1 - base : 0;  // an index
  for (std::int64_t s = 0; s < count; ++s) {
    if ((s + 1) * kSegment > window_begin || base + s * kSegment < mask.sinks) visible.push_back(s);
  }
  if (visible.empty()) visible.push_back(count - 1);
  return visible;
}

}  // namespace

void DecodeAttention(const AttentionPlan& query, const DecodeKeys& keys) {
  const std::int64_t cols = keys.value_cols(), group = query.group;
  const std::int64_t padded = (keys.kept() + DecodeKeys::kChunk - 1) / DecodeKeys::kChunk * DecodeKeys::kChunk;
  // The segments that hold a key the mask lets the query see: under a
  // sliding window (Gemma's local layers, the window and Λ methods) the
  // last ones and the sinks' (a hidden segment's partial would be empty).
  const std::vector<std::int64_t> visible = VisibleSegments(query.mask, query.q_positions[0], keys.first(), padded);
  const auto segments = static_cast<std::int64_t>(visible.size());
  const std::int64_t items = keys.kv_heads() * segments;
  // [item][group][m, l, o[cols]]
  std::vector<float> partials(static_cast<std::size_t>(items * group * (2 + cols)));
  // The heads' segments split over the threads, except a few keys a head:
  // under kSplitKeys, the whole attention is less work than a hand-off to
  // the other threads costs (about half a microsecond with the pool's
  // workers spinning). A single segment of 256 keys a head is not: SmolLM2's
  // 3 heads read 393 KB of keys and values, ~20 us a layer.
  constexpr std::int64_t kSplitKeys = 64;
  const std::int64_t min_chunk = segments == 1 && padded < kSplitKeys ? items : 1;
  ParallelFor(items, min_chunk, [&](std::int64_t begin, std::int64_t end) {
    alignas(64) float scores[4 * kSegment];  // up to 4 heads; aligned for every target's vectors
    for (std::int64_t item = begin; item < end; ++item) {
      const std::int64_t h = item / segments, first = visible[item % segments] * kSegment;
      HWY_DYNAMIC_DISPATCH(DecodeSegmentImpl)
      (query, keys, h, first, std::min(padded, first + kSegment), scores, partials.data() + item * group * (2 + cols));
    }
  });

  // Per query head, in key order: M = max m, L = sum l e^(m - M),
  // O = sum o e^(m - M); out = O / (L + the sink logit's e^(sink - M)).
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  std::vector<float> o(static_cast<std::size_t>(cols));
  for (std::int64_t h = 0; h < keys.kv_heads(); ++h) {
    for (std::int64_t g = 0; g < group; ++g) {
      const auto part = [&](std::int64_t segment) {
        return partials.data() + ((h * segments + segment) * group + g) * (2 + cols);
      };
      float top = kNegInf;
      bool nan = false;
      for (std::int64_t s = 0; s < segments; ++s) {
        nan = nan || std::isnan(part(s)[0]);
        top = std::max(top, part(s)[0]);
      }
      const std::int64_t head = h * group + g;
      double sum = 0;
      std::fill(o.begin(), o.end(), 0.0f);
      if (top != kNegInf) {
        for (std::int64_t s = 0; s < segments; ++s) {
          const float* p = part(s);
          if (p[0] == kNegInf) continue;
          const float rescale = std::exp(p[0] - top);
          sum += static_cast<double>(p[1] * rescale);
          for (std::int64_t c = 0; c < cols; ++c) o[c] += p[2 + c] * rescale;
        }
      }
      auto total = static_cast<float>(sum);
      float factor = total > 0 ? 1.0f / total : 0.0f;
      if (nan) {
        factor = std::numeric_limits<float>::quiet_NaN();
      } else if (!query.sink_logits.empty()) {
        const float sink = query.sink_logits[head];
        const float most = std::max(top, sink);
        const float kept = top == kNegInf ? 0.0f : std::exp(top - most);
        factor = kept / (total * kept + std::exp(sink - most));
      }
      const std::int64_t at = query.out.Offset(0, 0, head);
      for (std::int64_t c = 0; c < keys.v_dim(); ++c) {
        const float value = o[c] * factor;
        switch (query.out.dtype) {
          case DType::kF32: static_cast<float*>(query.out.data)[at + c] = value; break;
          case DType::kF16: static_cast<std::uint16_t*>(query.out.data)[at + c] = F32ToF16(value); break;
          case DType::kBF16: static_cast<std::uint16_t*>(query.out.data)[at + c] = F32ToBF16(value); break;
        }
      }
    }
  }
}

}  // namespace posenc::detail
#endif  // HWY_ONCE
