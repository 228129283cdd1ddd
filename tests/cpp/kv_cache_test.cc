// KV cache with StreamingLLM eviction: decode over the evicting cache with
// true positions equals the Λ-masked prefill; re-indexed positions equal
// attention at slot positions; bad appends are errors that change nothing.
#include "posenc/kv_cache.h"

#include "test_util.h"

namespace posenc {
namespace {

using testing::Buffer;
using testing::ExpectError;

constexpr std::int64_t kHeads = 4, kKvHeads = 2, kDim = 32, kTokens = 70;

struct Sequence {
  Buffer q{DType::kF32, kTokens*kHeads*kDim}, k{DType::kF32, kTokens*kKvHeads*kDim},
      v{DType::kF32, kTokens*kKvHeads*kDim};
  Sequence() {
    q.FillUniform(1, -2, 2);
    k.FillUniform(2, -2, 2);
    v.FillUniform(3);
  }
  const float* Q(std::int64_t t) const { return reinterpret_cast<const float*>(q.bytes.data()) + t * kHeads * kDim; }
  const float* K(std::int64_t t) const { return reinterpret_cast<const float*>(k.bytes.data()) + t * kKvHeads * kDim; }
  const float* V(std::int64_t t) const { return reinterpret_cast<const float*>(v.bytes.data()) + t * kKvHeads * kDim; }
};

AttentionOptions RopeOptions(AttentionMask mask = {}) {
  const RopeSpec spec{.theta = 10000, .head_dim = kDim};
  return {.encoding = RopeEncoding{spec, ComputeRopeFrequencies(spec)}, .mask = mask};
}

TEST(KvCache, StreamingDecodeWithTruePositionsEqualsLambdaPrefill) {
  Sequence seq;
  const std::int64_t sinks = 4, window = 16;
  Buffer prefill(DType::kF32, kTokens * kHeads * kDim);
  Attention({seq.q.View({1, kTokens, kHeads, kDim}), seq.k.View({1, kTokens, kKvHeads, kDim}),
             seq.v.View({1, kTokens, kKvHeads, kDim}), prefill.View({1, kTokens, kHeads, kDim})},
            RopeOptions({.window = window, .sinks = sinks}));
  KvCache cache({.kv_heads = kKvHeads, .head_dim = kDim, .v_dim = kDim, .sinks = sinks, .window = window});
  for (std::int64_t t = 0; t < kTokens; ++t) {
    cache.Append(seq.K(t), seq.V(t), 1, t);
    ASSERT_EQ(cache.size(), std::min(t + 1, sinks + window));
    float out[kHeads * kDim];
    cache.Attend(ConstTensorView::Contiguous(seq.Q(t), DType::kF32, {1, 1, kHeads, kDim}),
                 TensorView::Contiguous(out, DType::kF32, {1, 1, kHeads, kDim}), RopeOptions(), CachePositions::kTrue);
    for (std::int64_t i = 0; i < kHeads * kDim; ++i) {
      ASSERT_NEAR(out[i], prefill.Get(t * kHeads * kDim + i), 2e-6) << "token " << t;
    }
  }
  // The true positions are all kept: sinks 0..3 and the last 16.
  std::vector<std::int64_t> kept = cache.true_positions();
  std::sort(kept.begin(), kept.end());
  EXPECT_EQ(kept.front(), 0);
  EXPECT_EQ(kept[sinks], kTokens - window);
  EXPECT_EQ(kept.back(), kTokens - 1);
}

TEST(KvCache, ReindexedPositionsRotateKeysAtTheirSlots) {
  Sequence seq;
  const std::int64_t sinks = 2, window = 8, steps = 30;
  KvCache cache({.kv_heads = kKvHeads, .head_dim = kDim, .v_dim = kDim, .sinks = sinks, .window = window});
  cache.Append(seq.K(0), seq.V(0), steps, 0);  // one chunk; keeps tokens 0, 1 and 22..29
  float out[kHeads * kDim];
  const auto q_view = ConstTensorView::Contiguous(seq.Q(steps - 1), DType::kF32, {1, 1, kHeads, kDim});
  cache.Attend(q_view, TensorView::Contiguous(out, DType::kF32, {1, 1, kHeads, kDim}), RopeOptions(),
               CachePositions::kReindexed);
  // The same keys, packed in order, at positions 0..9 and the query at 9.
  const std::int64_t n = sinks + window;
  Buffer keys(DType::kF32, n * kKvHeads * kDim), values(DType::kF32, n * kKvHeads * kDim),
      expected(DType::kF32, kHeads * kDim);
  std::vector<std::int64_t> kept = {0, 1};
  for (std::int64_t t = steps - window; t < steps; ++t) kept.push_back(t);
  for (std::int64_t slot = 0; slot < n; ++slot) {
    for (std::int64_t i = 0; i < kKvHeads * kDim; ++i) {
      keys.Set(slot * kKvHeads * kDim + i, seq.k.Get(kept[slot] * kKvHeads * kDim + i));
      values.Set(slot * kKvHeads * kDim + i, seq.v.Get(kept[slot] * kKvHeads * kDim + i));
    }
  }
  reference::Attention({q_view,
                        keys.View({1, n, kKvHeads, kDim}),
                        values.View({1, n, kKvHeads, kDim}),
                        expected.View({1, 1, kHeads, kDim}),
                        TokenPositions::Offset(n - 1),
                        TokenPositions::Offset(0),
                        {}},
                       RopeOptions());
  for (std::int64_t i = 0; i < kHeads * kDim; ++i) EXPECT_NEAR(out[i], expected.Get(i), 2e-6);
}

TEST(KvCache, BadUseIsAnErrorAndChangesNothing) {
  Sequence seq;
  ExpectError([] { KvCache({.kv_heads = 1, .head_dim = 8, .v_dim = 8, .sinks = 2}); },
              {"[kv-cache] sinks = 2", "window"});
  KvCache cache({.kv_heads = kKvHeads, .head_dim = kDim, .v_dim = kDim, .capacity = 4});
  cache.Append(seq.K(0), seq.V(0), 3, 0);
  ExpectError([&] { cache.Append(seq.K(3), seq.V(3), 2, 3); }, {"tokens = 2", "capacity of 4"});
  ExpectError([&] { cache.Append(seq.K(3), seq.V(3), 1, 5); }, {"first_position = 5", "continue the cache at 3"});
  EXPECT_EQ(cache.size(), 3);
  KvCache windowed({.kv_heads = kKvHeads, .head_dim = kDim, .v_dim = kDim, .window = 4});
  windowed.Append(seq.K(0), seq.V(0), 6, 0);
  float out[2 * kHeads * kDim];
  ExpectError(
      [&] {
        windowed.Attend(ConstTensorView::Contiguous(seq.Q(4), DType::kF32, {1, 2, kHeads, kDim}),
                        TensorView::Contiguous(out, DType::kF32, {1, 2, kHeads, kDim}), RopeOptions(),
                        CachePositions::kTrue);
      },
      {"q.seq = 2", "evicted"});
}

}  // namespace
}  // namespace posenc
