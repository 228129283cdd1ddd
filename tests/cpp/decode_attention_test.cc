// The decode kernel (kept lowered keys, split-K) against the float64
// reference attention of the whole sequence, on every compiled SIMD target:
// every encoding it keeps (NoPE, RoPE, ReRoPE, Leaky ReRoPE, Self-Extend),
// masks (causal, window, Λ), log-n, softcap, sink logits; GQA groups of 1,
// 3 and 6 (more than the kernel's four heads at once); odd head and value
// sizes; key counts inside one chunk, past one 256-key segment, and keys
// appended in pieces across chunk edges, after a rewind; the same bits for
// 1, 2 and 3 threads.
#include <cmath>
#include <string>
#include <vector>

#include "attention/attention_plan.h"
#include "attention/decode_keys.h"
#include "posenc/attention.h"
#include "posenc/parallel.h"
#include "posenc/rope_frequencies.h"
#include "test_util.h"

namespace posenc {
namespace {

using testing::Buffer;
using testing::ForEachTarget;

struct Case {
  std::int64_t kv_heads, group, head_dim, v_dim, tokens;
};

std::vector<std::pair<std::string, AttentionOptions>> Methods(std::int64_t head_dim, std::int64_t q_heads) {
  // Odd head_dim: a partial rotary of the even part.
  const RopeSpec spec{
      .theta = 10000, .head_dim = head_dim, .rotary_dim = head_dim - head_dim % 2, .layout = RopeLayout::kInterleaved};
  const RopeFrequencies f = ComputeRopeFrequencies(spec);
  std::vector<double> sinks(static_cast<std::size_t>(q_heads));
  for (std::size_t h = 0; h < sinks.size(); ++h) sinks[h] = 0.5 - static_cast<double>(h % 3);
  std::vector<std::pair<std::string, AttentionOptions>> methods{
      {"nope", {}},
      {"rope", {.encoding = RopeEncoding{spec, f}}},
      {"rerope", {.encoding = ReRopeEncoding{spec, f, 37}}},
      {"leaky-rerope", {.encoding = ReRopeEncoding{spec, f, 20, 8.0}}},
      {"self-extend", {.encoding = SelfExtendEncoding{spec, f, 3, 21}}},
      {"self-extend-kv", {.encoding = SelfExtendEncoding{spec, f, 3, 21, SelfExtendForm::kKvShift}}},
      {"rope window", {.encoding = RopeEncoding{spec, f}, .mask = {.window = 40}}},
      {"rope lambda", {.encoding = RopeEncoding{spec, f}, .mask = {.window = 40, .sinks = 5}}},
      {"rope log-n softcap", {.encoding = RopeEncoding{spec, f}, .logn_train_length = 16, .softcap = 3}},
      {"rope sink logits", {.encoding = RopeEncoding{spec, f}, .sink_logits = sinks}},
  };
  return methods;
}

// Random q [tokens, q_heads, head_dim], k [tokens, kv_heads, head_dim] and
// v [tokens, kv_heads, v_dim] in [-1, 1].
struct Inputs {
  Buffer q, k, v;
  Inputs(const Case& c, std::uint32_t seed)
      : q(DType::kF32, c.tokens * c.kv_heads * c.group * c.head_dim),
        k(DType::kF32, c.tokens * c.kv_heads * c.head_dim), v(DType::kF32, c.tokens * c.kv_heads * c.v_dim) {
    q.FillUniform(seed);
    k.FillUniform(seed + 1);
    v.FillUniform(seed + 2);
  }
};

// The decode kernel's output for the last token (its q attends over every
// key, the last one its own), keys appended in the given pieces.
std::vector<float> Decode(const Case& c, const AttentionOptions& options, const Buffer& q, const Buffer& k,
                          const Buffer& v, const std::vector<std::int64_t>& pieces) {
  detail::DecodeKeys keys;
  keys.Reset(options, c.kv_heads, c.head_dim, c.v_dim);
  detail::AttentionPlan plan{};
  std::vector<float> ignored(static_cast<std::size_t>(c.tokens * c.kv_heads * c.group * c.v_dim));
  const auto prepare = [&](std::int64_t first, std::int64_t n, const float* queries, std::int64_t q_heads) {
    AttentionInputs in;
    in.q = ConstTensorView::Contiguous(queries, DType::kF32, {1, n, q_heads, c.head_dim});
    in.k = ConstTensorView::Contiguous(reinterpret_cast<const float*>(k.bytes.data()) + first * c.kv_heads * c.head_dim,
                                       DType::kF32, {1, n, c.kv_heads, c.head_dim});
    in.v = ConstTensorView::Contiguous(reinterpret_cast<const float*>(v.bytes.data()) + first * c.kv_heads * c.v_dim,
                                       DType::kF32, {1, n, c.kv_heads, c.v_dim});
    in.out = TensorView::Contiguous(ignored.data(), DType::kF32, {1, n, q_heads, c.v_dim});
    in.q_positions = TokenPositions::Offset(first);
    in.k_positions = TokenPositions::Offset(first);
    detail::PrepareAttentionPlan(in, options, plan);
  };
  std::int64_t first = 0;
  for (const std::int64_t n : pieces) {
    keys.AppendRaw(reinterpret_cast<const float*>(k.bytes.data()) + first * c.kv_heads * c.head_dim,
                   reinterpret_cast<const float*>(v.bytes.data()) + first * c.kv_heads * c.v_dim, n, options);
    first += n;
  }
  // A rewind by one token, then the last token with its own query.
  keys.Truncate(first - 1);
  const std::int64_t last = c.tokens - 1;
  prepare(last, 1, reinterpret_cast<const float*>(q.bytes.data()) + last * c.kv_heads * c.group * c.head_dim,
          c.kv_heads * c.group);
  keys.Append(plan);
  std::vector<float> out(static_cast<std::size_t>(c.kv_heads * c.group * c.v_dim), std::nanf(""));
  plan.out = TensorView::Contiguous(out.data(), DType::kF32, {1, 1, c.kv_heads * c.group, c.v_dim});
  detail::DecodeAttention(plan, keys);
  return out;
}

TEST(DecodeAttention, MatchesTheReferenceOnEveryTarget) {
  for (const Case c : {Case{2, 3, 8, 8, 1}, Case{1, 6, 13, 7, 17}, Case{3, 1, 16, 16, 300}, Case{2, 3, 10, 10, 530}}) {
    const std::int64_t q_heads = c.kv_heads * c.group;
    Inputs inputs(c, 1);
    Buffer &q = inputs.q, &k = inputs.k, &v = inputs.v;
    // Pieces that cross chunk (16) and segment (256) edges.
    std::vector<std::int64_t> pieces;
    for (std::int64_t left = c.tokens, n = 5; left > 0; n = n * 3 + 1) {
      pieces.push_back(std::min(n, left));
      left -= pieces.back();
    }
    for (const auto& method : Methods(c.head_dim, q_heads)) {
      const std::string& name = method.first;
      const AttentionOptions& options = method.second;
      SCOPED_TRACE(name + " tokens=" + std::to_string(c.tokens) + " group=" + std::to_string(c.group));
      // The reference for the last query alone: q [1, 1, q_heads, head_dim].
      Buffer expected(DType::kF32, q_heads * c.v_dim);
      const std::int64_t last_q = (c.tokens - 1) * q_heads * c.head_dim;
      AttentionInputs in{ConstTensorView::Contiguous(reinterpret_cast<const float*>(q.bytes.data()) + last_q,
                                                     DType::kF32, {1, 1, q_heads, c.head_dim}),
                         k.View({1, c.tokens, c.kv_heads, c.head_dim}),
                         v.View({1, c.tokens, c.kv_heads, c.v_dim}),
                         expected.View({1, 1, q_heads, c.v_dim}),
                         TokenPositions::Offset(c.tokens - 1),
                         TokenPositions::Offset(0),
                         {}};
      reference::Attention(in, options);
      const std::int64_t last = 0;
      ForEachTarget([&] {
        const std::vector<float> out = Decode(c, options, q, k, v, pieces);
        double worst = 0;
        for (std::size_t i = 0; i < out.size(); ++i) {
          worst = std::max(worst, std::abs(out[i] - expected.Get(last + static_cast<std::int64_t>(i))));
        }
        EXPECT_LE(worst, 2e-5);  // outputs are mixtures of |v| <= 1
      });
    }
  }
}

// Many segments a head (700 keys), and one segment of 200 keys, which the
// heads share over the threads too; 40 keys stay on one thread.
TEST(DecodeAttention, BitwiseIdenticalForAnyThreadCount) {
  for (const std::int64_t tokens : {700, 200, 40}) {
    const Case c{3, 3, 16, 16, tokens};
    const std::int64_t q_heads = c.kv_heads * c.group;
    const Inputs inputs(c, 4);
    const AttentionOptions options = Methods(c.head_dim, q_heads)[2].second;  // ReRoPE: two key copies
    const int saved = NumThreads();
    std::vector<std::vector<float>> outs;
    for (const int threads : {1, 2, 3}) {
      SetNumThreads(threads);
      outs.push_back(Decode(c, options, inputs.q, inputs.k, inputs.v, {tokens - 1, 1}));
    }
    SetNumThreads(saved);
    EXPECT_EQ(outs[0], outs[1]) << tokens << " keys";
    EXPECT_EQ(outs[0], outs[2]) << tokens << " keys";
  }
}

}  // namespace
}  // namespace posenc
