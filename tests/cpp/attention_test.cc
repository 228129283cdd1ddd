// The tiled attention kernel against the float64 materialized reference, on
// every compiled SIMD target, over encodings x masks x dtypes x head layouts
// x lengths x prefill/decode; plus decode-equals-prefill, exact window sizes,
// thread-count independence and argument errors.
#include "posenc/attention.h"

#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "posenc/parallel.h"
#include "posenc/relative_attention.h"
#include "test_util.h"

namespace posenc {
namespace {

using testing::Buffer;
using testing::ExpectError;
using testing::ForEachTarget;

struct Shape {
  std::int64_t batch, q_len, kv_len, q_heads, kv_heads, head_dim;
};

struct Tensors {
  Shape shape;
  Buffer q, k, v;
  Tensors(const Shape& s, DType dtype, std::uint32_t seed)
      : shape(s), q(dtype, s.batch * s.q_len * s.q_heads * s.head_dim),
        k(dtype, s.batch * s.kv_len * s.kv_heads * s.head_dim), v(dtype, s.batch * s.kv_len * s.kv_heads * s.head_dim) {
    q.FillUniform(seed, -2, 2);
    k.FillUniform(seed + 1, -2, 2);
    v.FillUniform(seed + 2);
  }
  AttentionInputs Inputs(Buffer& out) {
    return {q.View({shape.batch, shape.q_len, shape.q_heads, shape.head_dim}),
            k.View({shape.batch, shape.kv_len, shape.kv_heads, shape.head_dim}),
            v.View({shape.batch, shape.kv_len, shape.kv_heads, shape.head_dim}),
            out.View({shape.batch, shape.q_len, shape.q_heads, shape.head_dim}),
            TokenPositions::Offset(shape.kv_len - shape.q_len),
            TokenPositions::Offset(0),
            {}};
  }
};

RopeSpec Rope(std::int64_t head_dim) { return RopeSpec{.theta = 10000, .head_dim = head_dim}; }

// Float32 compute against float64: outputs are convex mixtures of v (|v| <= 1),
// so an absolute tolerance; half-precision outputs add their rounding.
double Tolerance(DType dtype) { return dtype == DType::kF32 ? 2e-5 : dtype == DType::kF16 ? 2e-3 : 1.6e-2; }

void Compare(Tensors& t, const AttentionOptions& options, DType dtype, const std::string& what,
             std::vector<std::int64_t> kv_lengths = {}, bool q_ids = false) {
  SCOPED_TRACE(what + " dtype=" + std::string(DTypeName(dtype)));
  const std::int64_t out_size = t.shape.batch * t.shape.q_len * t.shape.q_heads * t.shape.head_dim;
  Buffer expected(dtype, out_size);
  auto reference_inputs = t.Inputs(expected);
  reference_inputs.kv_lengths = std::move(kv_lengths);
  if (q_ids) {  // explicit ids: row b's queries at b + 2 s (not consecutive)
    std::vector<std::int64_t> ids;
    for (std::int64_t b = 0; b < t.shape.batch; ++b)
      for (std::int64_t s = 0; s < t.shape.q_len; ++s) ids.push_back(b + 2 * s);
    reference_inputs.q_positions = TokenPositions::Ids(ids);
  }
  reference::Attention(reference_inputs, options);
  ForEachTarget([&] {
    Buffer out(dtype, out_size);
    auto inputs = reference_inputs;
    inputs.out = out.View(inputs.out.shape);
    Attention(inputs, options);
    double worst = 0;
    for (std::int64_t i = 0; i < out_size; ++i) worst = std::max(worst, std::abs(out.Get(i) - expected.Get(i)));
    EXPECT_LE(worst, Tolerance(dtype));
  });
}

std::vector<std::pair<std::string, PositionEncoding>> Encodings(std::int64_t head_dim, std::int64_t q_heads) {
  const RopeSpec rope = Rope(head_dim);
  const RopeSpec yarn{
      .theta = 10000, .head_dim = head_dim, .scaling = YarnScaling{.factor = 4, .original_max_position = 64}};
  std::vector<double> t5_weights(32 * q_heads);
  for (std::size_t i = 0; i < t5_weights.size(); ++i) t5_weights[i] = std::sin(0.7 * static_cast<double>(i));
  std::vector<double> urpe_scale(32 * q_heads);  // Toeplitz weights around 1, some above, some below
  for (std::size_t i = 0; i < urpe_scale.size(); ++i)
    urpe_scale[i] = 1.0 + 0.6 * std::cos(1.1 * static_cast<double>(i));
  std::vector<double> rel_k(9 * head_dim), rel_v(9 * head_dim);  // K = 4: 9 rows
  for (std::size_t i = 0; i < rel_k.size(); ++i) {
    rel_k[i] = 0.5 * std::cos(1.3 * static_cast<double>(i));
    rel_v[i] = 0.5 * std::sin(0.9 * static_cast<double>(i));
  }
  return {
      {"shaw-kv", ShawEncoding{{.max_distance = 4, .value_term = true}, rel_k, rel_v}},
      {"bert-key-query",
       ShawEncoding{{.max_distance = 4, .distance = RelativeDistance::kQueryMinusKey, .query_term = true}, rel_k, {}}},
      {"nope", NoPositionEncoding{}},
      {"rope", RopeEncoding{rope, ComputeRopeFrequencies(rope)}},
      {"rope-yarn", RopeEncoding{yarn, ComputeRopeFrequencies(yarn)}},
      {"rerope", ReRopeEncoding{rope, ComputeRopeFrequencies(rope), 20, std::nullopt}},
      {"leaky-rerope", ReRopeEncoding{rope, ComputeRopeFrequencies(rope), 20, 16.0}},
      {"self-extend", SelfExtendEncoding{rope, ComputeRopeFrequencies(rope), 4, 20}},
      {"self-extend-yarn", SelfExtendEncoding{yarn, ComputeRopeFrequencies(yarn), 3, 7}},
      {"self-extend-kv", SelfExtendEncoding{rope, ComputeRopeFrequencies(rope), 4, 20, SelfExtendForm::kKvShift}},
      {"self-extend-kv-yarn", SelfExtendEncoding{yarn, ComputeRopeFrequencies(yarn), 3, 9, SelfExtendForm::kKvShift}},
      {"alibi", AlibiEncoding{AlibiSlopes(AlibiSpec{.heads = q_heads}), AlibiForm::kDistance}},
      {"alibi-key", AlibiEncoding{AlibiSlopes(AlibiSpec{.heads = q_heads}), AlibiForm::kKeyPosition}},
      {"t5", T5BiasEncoding{T5BucketSpec{.num_buckets = 32, .max_distance = 64, .direction = T5Direction::kCausal},
                            t5_weights}},
      {"urpe", UrpeEncoding{T5BucketSpec{.num_buckets = 32, .max_distance = 64, .direction = T5Direction::kCausal},
                            t5_weights, urpe_scale}},
  };
}

TEST(Attention, MatchesReferenceOverGrid) {
  const Shape shapes[] = {
      {1, 1, 1, 2, 1, 32},      // one token
      {2, 37, 37, 4, 2, 64},    // odd length, GQA
      {1, 100, 100, 3, 3, 40},  // MHA, head_dim with a tail, above a tile
      {1, 5, 70, 8, 1, 32},     // decode-like: 5 queries at the end of a cache, MQA
      {1, 30, 30, 4, 2, 128},   // Llama head_dim
      {1, 9, 9, 2, 1, 256},     // Gemma head_dim
  };
  for (const Shape& shape : shapes) {
    for (const auto& [name, encoding] : Encodings(shape.head_dim, shape.q_heads)) {
      for (DType dtype : {DType::kF32, DType::kBF16}) {
        Tensors t(shape, dtype, static_cast<std::uint32_t>(shape.kv_len));
        AttentionOptions options{.encoding = encoding};
        Compare(t, options, dtype, name + " causal len=" + std::to_string(shape.kv_len));
      }
    }
  }
}

// URPE with every Toeplitz weight 1 is T5's bias, bit for bit on every
// target; other weights change the output (the weights reach the values).
TEST(Attention, UrpeWithUnitWeightsIsT5) {
  const Shape shape{2, 37, 37, 4, 2, 64};
  const T5BucketSpec buckets{.num_buckets = 16, .max_distance = 32, .direction = T5Direction::kCausal};
  std::vector<double> bias(16 * 4);
  for (std::size_t i = 0; i < bias.size(); ++i) bias[i] = std::cos(0.3 * static_cast<double>(i));
  ForEachTarget([&] {
    Tensors t(shape, DType::kF32, 9);
    const std::int64_t size = shape.batch * shape.q_len * shape.q_heads * shape.head_dim;
    Buffer t5(DType::kF32, size), urpe(DType::kF32, size), weighted(DType::kF32, size);
    Attention(t.Inputs(t5), {.encoding = T5BiasEncoding{buckets, bias}});
    Attention(t.Inputs(urpe), {.encoding = UrpeEncoding{buckets, bias, std::vector<double>(bias.size(), 1.0)}});
    std::vector<double> scale(bias.size(), 1.0);
    scale[3] = 0.5;  // head 3, the bucket of distance 0
    Attention(t.Inputs(weighted), {.encoding = UrpeEncoding{buckets, bias, scale}});
    double moved = 0;
    for (std::int64_t i = 0; i < size; ++i) {
      ASSERT_EQ(urpe.Get(i), t5.Get(i)) << i;
      moved = std::max(moved, std::abs(weighted.Get(i) - t5.Get(i)));
    }
    EXPECT_GT(moved, 1e-3);
  });
  ExpectError(
      [&] {
        Tensors t(shape, DType::kF32, 9);
        Buffer out(DType::kF32, shape.batch * shape.q_len * shape.q_heads * shape.head_dim);
        Attention(t.Inputs(out), {.encoding = UrpeEncoding{buckets, bias, {1.0}}});
      },
      {"urpe.scale.size() = 1", "num_buckets * q_heads = 64"});
}

TEST(Attention, MasksAndModifiers) {
  const Shape shape{2, 90, 90, 4, 2, 32};
  Tensors t(shape, DType::kF32, 5);
  const auto rope = Rope(32);
  const RopeEncoding encoding{rope, ComputeRopeFrequencies(rope)};
  Compare(t, {.encoding = encoding, .mask = {.causal = false}}, DType::kF32, "bidirectional");
  Compare(t, {.encoding = encoding, .mask = {.causal = false, .window = 9}}, DType::kF32, "bidirectional window");
  Compare(t, {.encoding = encoding, .mask = {.window = 16}}, DType::kF32, "sliding window");
  Compare(t, {.encoding = encoding, .mask = {.window = 16, .sinks = 4}}, DType::kF32, "lambda mask");
  Compare(t, {.encoding = encoding, .mask = {.window = 40, .sinks = 30}}, DType::kF32, "lambda overlapping");
  Compare(t, {.encoding = encoding, .logn_train_length = 16}, DType::kF32, "log-n");
  Compare(t, {.encoding = encoding, .sink_logits = {0.5, -1, 2, 0}}, DType::kF32, "sink logits");
  Compare(t, {.encoding = encoding, .softcap = 1.5}, DType::kF32, "softcap");
  Compare(t, {.encoding = encoding, .softmax_scale = 0.3}, DType::kF32, "scale");
  Compare(t, {.encoding = encoding}, DType::kF32, "ragged batch", {90, 41});
  Compare(t, {.encoding = encoding}, DType::kF32, "query ids", {}, true);
  Compare(
      t,
      {.encoding = AlibiEncoding{AlibiSlopes(AlibiSpec{.heads = 4}), AlibiForm::kDistance}, .mask = {.causal = false}},
      DType::kF32, "alibi symmetric encoder");
  Tensors half(shape, DType::kF16, 6);
  Compare(half, {.encoding = encoding, .mask = {.window = 16, .sinks = 4}}, DType::kF16, "f16 lambda");
}

// The kernel's Shaw policy against the relative-attention reference (which
// the Python suite checks against Hugging Face BERT), bidirectional.
TEST(Attention, ShawMatchesRelativeAttentionReference) {
  const Shape shape{2, 21, 21, 3, 3, 16};
  Tensors t(shape, DType::kF32, 11);
  const ShawRelativeSpec spec{.max_distance = 5, .query_term = true, .value_term = true};
  std::vector<double> rel_k(11 * 16), rel_v(11 * 16);
  for (std::size_t i = 0; i < rel_k.size(); ++i) {
    rel_k[i] = std::cos(0.7 * static_cast<double>(i));
    rel_v[i] = std::sin(0.4 * static_cast<double>(i));
  }
  Buffer out(DType::kF32, 2 * 21 * 3 * 16);
  Attention(t.Inputs(out), {.encoding = ShawEncoding{spec, rel_k, rel_v}, .mask = {.causal = false}});
  // [batch, seq, heads, dim] -> [batch, heads, seq, dim] in double.
  const auto to_bhsd = [](const Buffer& x) {
    std::vector<double> y(static_cast<std::size_t>(x.size()));
    for (std::int64_t b = 0; b < 2; ++b)
      for (std::int64_t s = 0; s < 21; ++s)
        for (std::int64_t h = 0; h < 3; ++h)
          for (std::int64_t d = 0; d < 16; ++d)
            y[((b * 3 + h) * 21 + s) * 16 + d] = x.Get(((b * 21 + s) * 3 + h) * 16 + d);
    return y;
  };
  const auto q = to_bhsd(t.q), k = to_bhsd(t.k), v = to_bhsd(t.v);
  const RelativeAttentionInputs inputs{.shape = {2, 3, 21, 21, 16}, .q = q, .k = k, .v = v};
  const auto expected = reference::ShawAttention(inputs, spec, rel_k, rel_v).output;
  const auto got = to_bhsd(out);
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], expected[i], 2e-5) << i;
}

// Decoding one token at a time against a growing cache equals prefill.
TEST(Attention, DecodeStepByStepEqualsPrefill) {
  const Shape shape{1, 50, 50, 4, 2, 32};
  Tensors t(shape, DType::kF32, 9);
  const auto rope = Rope(32);
  const AttentionOptions options{.encoding = ReRopeEncoding{rope, ComputeRopeFrequencies(rope), 12, 8.0},
                                 .mask = {.window = 20, .sinks = 2}};
  Buffer prefill(DType::kF32, 50 * 4 * 32);
  Attention(t.Inputs(prefill), options);
  for (std::int64_t step = 0; step < 50; ++step) {
    Buffer out(DType::kF32, 4 * 32);
    AttentionInputs inputs = t.Inputs(out);
    inputs.q.data = static_cast<const float*>(inputs.q.data) + step * 4 * 32;
    inputs.q.shape[1] = 1;
    inputs.out.shape[1] = 1;
    inputs.q_positions = TokenPositions::Offset(step);
    inputs.kv_lengths = {step + 1};  // the cache holds tokens 0..step
    Attention(inputs, options);
    for (std::int64_t i = 0; i < 4 * 32; ++i) {
      ASSERT_NEAR(out.Get(i), prefill.Get(step * 4 * 32 + i), 2e-6) << "step " << step;
    }
  }
}

// A window of W attends to exactly W keys: with values one-hot by key, the
// output's support is the window.
TEST(Attention, WindowAttendsToExactlyWKeys) {
  const std::int64_t n = 40, window = 7;
  Buffer q(DType::kF32, n * 32), k(DType::kF32, n * 32), v(DType::kF32, n * n), out(DType::kF32, n * n);
  q.FillUniform(1);
  k.FillUniform(2);
  for (std::int64_t j = 0; j < n; ++j) v.Set(j * n + j, 1.0);  // v_j = e_j
  Attention({q.View({1, n, 1, 32}), k.View({1, n, 1, 32}), v.View({1, n, 1, n}), out.View({1, n, 1, n})},
            {.mask = {.window = window}});
  for (std::int64_t i = 0; i < n; ++i) {
    int attended = 0;
    for (std::int64_t j = 0; j < n; ++j) attended += out.Get(i * n + j) > 0;
    EXPECT_EQ(attended, std::min(i + 1, window)) << "query " << i;
  }
  EXPECT_EQ(WindowFromFlashAttentionLeft(6), 7);
  EXPECT_EQ(WindowToFlashAttentionLeft(7), 6);
}

TEST(Attention, SameBytesForAnyThreadCount) {
  const Shape shape{2, 133, 133, 4, 2, 64};
  Tensors t(shape, DType::kBF16, 3);
  const auto rope = Rope(64);
  const AttentionOptions options{.encoding = ReRopeEncoding{rope, ComputeRopeFrequencies(rope), 32, std::nullopt}};
  std::vector<std::vector<unsigned char>> results;
  for (int threads : {1, 2, 3}) {
    SetNumThreads(threads);
    Buffer out(DType::kBF16, 2 * 133 * 4 * 64);
    Attention(t.Inputs(out), options);
    results.push_back(out.bytes);
  }
  SetNumThreads(2);
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

// NaN in the inputs of a visible score (q, an ALiBi slope, a T5 weight) makes
// that row NaN, in the kernel on every target and in the reference; rows that
// never see the NaN stay finite.
TEST(Attention, NanPropagatesToTheRowsThatSeeIt) {
  const Shape shape{1, 9, 9, 2, 1, 32};
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> t5_weights(32 * 2, 0.25);
  t5_weights[1 * 2 + 0] = nan;  // bucket 1 (distance 1), head 0
  std::vector<std::pair<std::string, PositionEncoding>> cases = {
      {"nan in q", NoPositionEncoding{}},
      {"nan t5 weight",
       T5BiasEncoding{T5BucketSpec{.num_buckets = 32, .max_distance = 64, .direction = T5Direction::kCausal},
                      t5_weights}},
  };
  for (const auto& test_case : cases) {
    // Named references, not a structured binding: clang 14 cannot capture
    // structured bindings in the lambdas below.
    const std::string& name = test_case.first;
    const PositionEncoding& encoding = test_case.second;
    SCOPED_TRACE(name);
    Tensors t(shape, DType::kF32, 3);
    if (name == "nan in q") t.q.Set((4 * 2 + 0) * 32 + 5, nan);  // token 4, head 0
    // Rows (token, head 0) that see a NaN score: token 4 for q; tokens >= 1
    // for the distance-1 weight. (A NaN ALiBi slope is refused: it is a
    // parameter of the encoding, like softmax_scale, not data.)
    const auto expect_nan = [&](std::int64_t token, std::int64_t head) {
      if (head != 0) return false;
      return name == "nan in q" ? token == 4 : token >= 1;
    };
    const auto check = [&](Buffer& out) {
      for (std::int64_t token = 0; token < 9; ++token) {
        for (std::int64_t head = 0; head < 2; ++head) {
          const double value = out.Get((token * 2 + head) * 32 + 7);
          EXPECT_EQ(std::isnan(value), expect_nan(token, head)) << "token " << token << " head " << head;
        }
      }
    };
    Buffer expected(DType::kF32, 9 * 2 * 32);
    reference::Attention(t.Inputs(expected), {.encoding = encoding});
    check(expected);
    ForEachTarget([&] {
      Buffer out(DType::kF32, 9 * 2 * 32);
      Attention(t.Inputs(out), {.encoding = encoding});
      check(out);
    });
  }
}

// Positions past 2^53 are refused: q_offset = 2^63 - 1 overflowed to
// negative positions and gave zeros.
TEST(Attention, PositionsPastTwoToTheFiftyThirdAreErrors) {
  const Shape shape{1, 4, 4, 2, 1, 32};
  Tensors t(shape, DType::kF32, 1);
  Buffer out(DType::kF32, 4 * 2 * 32);
  auto inputs = t.Inputs(out);
  inputs.q_positions = TokenPositions::Offset(std::numeric_limits<std::int64_t>::max());
  ExpectError([&] { Attention(inputs, {}); }, {"[attention] offset = 9223372036854775807", "2^53"});
  inputs.q_positions = TokenPositions::Offset(kMaxPosition - 3);
  EXPECT_NO_THROW(Attention(inputs, {}));
  inputs.q_positions = TokenPositions::Offset(kMaxPosition - 2);
  ExpectError([&] { Attention(inputs, {}); }, {"offset = 9007199254740990", "<= 9007199254740989"});
  inputs = t.Inputs(out);
  inputs.k_positions = TokenPositions::Ids({0, 1, 2, kMaxPosition + 1});
  ExpectError([&] { Attention(inputs, {}); }, {"position_ids[3] = 9007199254740993"});
}

// Without query positions the queries are the last q_len tokens of each
// row's keys (the default Python has always had, now the library's own).
TEST(Attention, DefaultQueryPositionsAreTheEndOfTheKeys) {
  const Shape shape{2, 3, 8, 2, 1, 32};
  Tensors t(shape, DType::kF32, 5);
  Buffer expected(DType::kF32, 2 * 3 * 2 * 32), out(DType::kF32, 2 * 3 * 2 * 32);
  const AttentionOptions options{.encoding = RopeEncoding{Rope(32), ComputeRopeFrequencies(Rope(32))}};
  auto inputs = t.Inputs(expected);
  inputs.kv_lengths = {8, 6};
  inputs.q_positions = TokenPositions::Offsets({5, 3});
  Attention(inputs, options);
  inputs.out = out.View(inputs.out.shape);
  inputs.q_positions.reset();
  Attention(inputs, options);
  EXPECT_EQ(out.bytes, expected.bytes);
  inputs.kv_lengths = {8, 2};
  ExpectError([&] { Attention(inputs, options); },
              {"[attention] q_len = 3: exceeds kv_lengths[1] = 2", "the default puts the queries at the end"});
}

TEST(Attention, BadArgumentsAreErrors) {
  const Shape shape{1, 4, 4, 4, 2, 32};
  Tensors t(shape, DType::kF32, 1);
  Buffer out(DType::kF32, 4 * 4 * 32);
  const auto rope = Rope(32);
  ExpectError([&] { Attention(t.Inputs(out), {.mask = {.window = -1}}); }, {"[attention] mask.window = -1"});
  ExpectError([&] { Attention(t.Inputs(out), {.mask = {.sinks = 4}}); }, {"mask.sinks = 4", "need a window"});
  ExpectError(
      [&] {
        Attention(t.Inputs(out), {.encoding = ReRopeEncoding{rope, ComputeRopeFrequencies(rope), 0, std::nullopt}});
      },
      {"rerope.window = 0"});
  ExpectError(
      [&] {
        Attention(t.Inputs(out), {.encoding = ReRopeEncoding{rope, ComputeRopeFrequencies(rope), 8, 0.5}});
      },
      {"rerope.leak = 0.5", "> 1"});
  ExpectError(
      [&] {
        Attention(t.Inputs(out), {.encoding = SelfExtendEncoding{rope, ComputeRopeFrequencies(rope), 0, 8}});
      },
      {"self_extend.group = 0", ">= 1"});
  ExpectError(
      [&] {
        Attention(t.Inputs(out), {.encoding = SelfExtendEncoding{rope, ComputeRopeFrequencies(rope), 2, 0}});
      },
      {"self_extend.window = 0"});
  ExpectError(
      [&] {
        Attention(t.Inputs(out), {.encoding = SelfExtendEncoding{rope, ComputeRopeFrequencies(rope), 2, 8},
                                  .mask = {.causal = false}});
      },
      {"Self-Extend", "causal"});
  ExpectError(
      [&] {
        Attention(t.Inputs(out),
                  {.encoding = SelfExtendEncoding{rope, ComputeRopeFrequencies(rope), 3, 8, SelfExtendForm::kKvShift}});
      },
      {"self_extend.window = 8", "multiple of group = 3", "grp_attn_w"});
  ExpectError(
      [&] {
        Attention(t.Inputs(out), {.encoding = ReRopeEncoding{rope, ComputeRopeFrequencies(rope), 8, std::nullopt},
                                  .mask = {.causal = false}});
      },
      {"causal"});
  ExpectError(
      [&] {
        Attention(t.Inputs(out), {.encoding = AlibiEncoding{{0.5}, AlibiForm::kDistance}});
      },
      {"alibi.slopes.size() = 1", "q_heads = 4"});
  ExpectError(
      [&] {
        Attention(t.Inputs(out), {.encoding = ShawEncoding{{.max_distance = 2}, std::vector<double>(7), {}}});
      },
      {"shaw.rel_k.size() = 7", "(2K+1) * head_dim = 160"});
  auto inputs = t.Inputs(out);
  inputs.kv_lengths = {5};
  ExpectError([&] { Attention(inputs, {}); }, {"kv_lengths[0] = 5", "cache overflow"});
  inputs = t.Inputs(out);
  inputs.k.shape[2] = 3;
  ExpectError([&] { Attention(inputs, {}); }, {"k.heads = 3", "must divide"});
  ExpectError(
      [&] {
        Attention(t.Inputs(out), {.encoding = RopeEncoding{Rope(64), ComputeRopeFrequencies(Rope(64))}});
      },
      {"rope.head_dim = 64"});
}

// A value row of width 0 (the kernel's packed values would be 0 bytes: an
// aborting allocation), a NaN or +inf sink logit and a NaN or overflowing
// ALiBi slope (every row of its head NaN) are refused, by the kernel and the
// reference alike, as a head_dim of 0 and a NaN softmax_scale are.
TEST(Attention, EmptyValuesAndNanTermsAreErrors) {
  const Shape shape{1, 4, 4, 2, 2, 8};
  Tensors t(shape, DType::kF32, 1);
  Buffer out(DType::kF32, 4 * 2 * 8), empty(DType::kF32, 0);
  const double nan = std::nan("");
  const auto both = [&](const AttentionInputs& inputs, const AttentionOptions& options,
                        std::initializer_list<const char*> fragments) {
    ExpectError([&] { Attention(inputs, options); }, fragments);
    ExpectError([&] { reference::Attention(inputs, options); }, fragments);
  };
  auto inputs = t.Inputs(out);
  inputs.v = empty.View({1, 4, 2, 0});
  inputs.out = empty.View({1, 4, 2, 0});
  both(inputs, {}, {"[attention] v.head_dim = 0", "must be > 0"});
  both(t.Inputs(out), {.sink_logits = {0.5, nan}}, {"[attention] sink_logits[1] = nan"});
  both(t.Inputs(out), {.sink_logits = {std::numeric_limits<double>::infinity(), 0.5}}, {"sink_logits[0] = inf"});
  both(t.Inputs(out), {.sink_logits = {1e300, 0.5}}, {"sink_logits[0] = 1e+300", "float32"});
  EXPECT_NO_THROW(Attention(t.Inputs(out), {.sink_logits = {-std::numeric_limits<double>::infinity(), 0.5}}));
  both(t.Inputs(out), {.encoding = AlibiEncoding{{0.5, nan}, AlibiForm::kDistance}},
       {"[attention] alibi.slopes[1] = nan", "must be finite"});
  both(t.Inputs(out), {.encoding = AlibiEncoding{{1e39, 0.5}, AlibiForm::kDistance}}, {"alibi.slopes[0] = 1e+39"});
}

}  // namespace
}  // namespace posenc
