// The fast RoPE kernel against the plain reference, on every compiled SIMD
// target, over a grid of shapes, layouts, positions, dtypes and directions.
#include <algorithm>
#include <array>
#include <cmath>
#include <string>

#include "posenc/parallel.h"
#include "posenc/rope.h"
#include "test_util.h"

namespace posenc {
namespace {

using testing::Buffer;
using testing::ExpectError;
using testing::ForEachTarget;

struct GridCase {
  std::int64_t head_dim;
  std::int64_t rotary_dim;  // 0 = full
  RopeLayout layout;
  std::int64_t batch, seq, q_heads, k_heads;
};

std::string Describe(const GridCase& c, DType dtype, RopeDirection direction, int positions) {
  return "head_dim=" + std::to_string(c.head_dim) + " rotary=" + std::to_string(c.rotary_dim) +
         " layout=" + std::string(RopeLayoutName(c.layout)) + " batch=" + std::to_string(c.batch) +
         " seq=" + std::to_string(c.seq) + " dtype=" + std::string(DTypeName(dtype)) +
         " direction=" + std::to_string(static_cast<int>(direction)) + " positions=" + std::to_string(positions);
}

// Fast and reference outputs differ only by float32-vs-double rounding
// inside the rotation: a few float32 ulps of the row's scale, or one ulp of
// the output dtype when that is f16/bf16.
double Tolerance(DType dtype, double value) {
  return dtype == DType::kF32 ? 4e-7 * std::max(1.0, std::abs(value))
                              : testing::UnitInLastPlace(dtype, value) * 1.01 + 1e-7;
}

RopePositions MakePositions(int kind, std::int64_t batch, std::int64_t seq) {
  switch (kind) {
    case 0: return RopePositions::Offset(0);
    case 1: return RopePositions::Offset(1000003);  // large: angle reduction matters
    case 2: {
      std::vector<std::int64_t> offsets;
      for (std::int64_t b = 0; b < batch; ++b) offsets.push_back(17 * b + 5);
      return RopePositions::Offsets(offsets);
    }
    default: {
      std::vector<std::int64_t> ids;  // left-padded rows, out-of-order tokens
      for (std::int64_t b = 0; b < batch; ++b) {
        for (std::int64_t s = 0; s < seq; ++s) ids.push_back((s * 7 + b * 3) % (seq + 4));
      }
      return RopePositions::Ids(ids);
    }
  }
}

void CheckCase(const GridCase& c, DType dtype, RopeDirection direction, int position_kind, bool in_place,
               RopeScaling scaling = NoScaling{}) {
  SCOPED_TRACE(Describe(c, dtype, direction, position_kind) + (in_place ? " in-place" : ""));
  const RopeSpec spec{.theta = 10000,
                      .head_dim = c.head_dim,
                      .rotary_dim = c.rotary_dim,
                      .layout = c.layout,
                      .scaling = std::move(scaling)};
  const std::array<std::int64_t, 4> q_shape{c.batch, c.seq, c.q_heads, c.head_dim};
  const std::array<std::int64_t, 4> k_shape{c.batch, c.seq, c.k_heads, c.head_dim};
  Buffer q(dtype, c.batch * c.seq * c.q_heads * c.head_dim), k(dtype, c.batch * c.seq * c.k_heads * c.head_dim);
  q.FillUniform(1 + c.head_dim);
  k.FillUniform(2 + c.seq);
  const RopePositions positions = MakePositions(position_kind, c.batch, c.seq);
  const auto frequencies = ComputeRopeFrequencies(spec, positions.Length(c.batch, c.seq));

  Buffer q_ref = q, k_ref = k;
  reference::ApplyRope(spec, frequencies,
                       RopeCall{{RopeOperand::InPlace(q_ref.View(q_shape)), RopeOperand::InPlace(k_ref.View(k_shape))},
                                positions,
                                direction});
  ForEachTarget([&] {
    Buffer q_out = q, k_out = k;
    if (in_place) {
      ApplyRope(spec, frequencies,
                RopeCall{{RopeOperand::InPlace(q_out.View(q_shape)), RopeOperand::InPlace(k_out.View(k_shape))},
                         positions,
                         direction});
    } else {
      Buffer q_in = q, k_in = k;
      ApplyRope(spec, frequencies,
                RopeCall{{{q_in.View(q_shape), q_out.View(q_shape)}, {k_in.View(k_shape), k_out.View(k_shape)}},
                         positions,
                         direction});
      ASSERT_EQ(q_in.bytes, q.bytes) << "out-of-place must not write its input";
    }
    for (const auto& [out, ref, in] : {std::tie(q_out, q_ref, q), std::tie(k_out, k_ref, k)}) {
      double worst = 0;
      for (std::int64_t i = 0; i < out.size(); ++i) {
        const std::int64_t d = i % c.head_dim;
        if (d >= spec.RotaryDim()) {  // pass-through: the same bits
          ASSERT_EQ(out.Get(i), in.Get(i)) << "element " << i;
          continue;
        }
        const double error = std::abs(out.Get(i) - ref.Get(i));
        worst = std::max(worst, error / Tolerance(dtype, ref.Get(i)));
        ASSERT_LE(error, Tolerance(dtype, ref.Get(i))) << "element " << i << " ref " << ref.Get(i);
      }
      ::testing::Test::RecordProperty("worst_error_in_tolerances", std::to_string(worst));
    }
  });
}

TEST(RopeApply, FastMatchesReferenceOverGrid) {
  const GridCase cases[] = {
      {32, 0, RopeLayout::kHalfSplit, 1, 1, 2, 1},      // a single decode token
      {64, 0, RopeLayout::kInterleaved, 2, 7, 3, 1},    // odd seq, MQA
      {80, 32, RopeLayout::kHalfSplit, 1, 9, 2, 2},     // Phi-2 partial rotary
      {96, 24, RopeLayout::kHalfSplit, 2, 5, 2, 2},     // GPT-NeoX-20B: 12 pairs, a tail
      {40, 0, RopeLayout::kHalfSplit, 1, 3, 2, 1},      // 20 pairs: tail after 8+8
      {40, 0, RopeLayout::kInterleaved, 1, 3, 2, 1},    // 40 dims: tail after 32
      {128, 0, RopeLayout::kHalfSplit, 1, 33, 4, 2},    // Llama, GQA
      {128, 64, RopeLayout::kInterleaved, 1, 4, 2, 1},  // GPT-J style partial
      {256, 0, RopeLayout::kHalfSplit, 1, 3, 2, 1},     // Gemma
      {6, 2, RopeLayout::kInterleaved, 2, 3, 1, 1},     // tiny: everything in the tail
  };
  for (const GridCase& c : cases) {
    for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
      for (int positions = 0; positions < 4; ++positions) {
        CheckCase(c, dtype, RopeDirection::kForward, positions, positions % 2 == 0);
      }
      CheckCase(c, dtype, RopeDirection::kBackward, 2, false);
      CheckCase(c, dtype, RopeDirection::kInverse, 3, true);
    }
  }
}

TEST(RopeApply, LongSequenceAndAttentionFactor) {
  const GridCase c{128, 0, RopeLayout::kHalfSplit, 1, 1031, 2, 1};
  const YarnScaling yarn{.factor = 4, .original_max_position = 256};
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    CheckCase(c, dtype, RopeDirection::kForward, 0, true, yarn);
    CheckCase(c, dtype, RopeDirection::kInverse, 1, false, yarn);
  }
}

TEST(RopeApply, StridedViewsRotateOnlyTheirElements) {
  // q is a view into a fused qkv buffer [batch, seq, 3 * heads, head_dim].
  const std::int64_t batch = 2, seq = 5, heads = 2, head_dim = 64;
  Buffer qkv(DType::kF32, batch * seq * 3 * heads * head_dim);
  qkv.FillUniform(7);
  TensorView q{qkv.bytes.data(),
               DType::kF32,
               {batch, seq, heads, head_dim},
               {seq * 3 * heads * head_dim, 3 * heads * head_dim, head_dim, 1}};
  Buffer dense(DType::kF32, batch * seq * heads * head_dim);
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t s = 0; s < seq; ++s)
      for (std::int64_t i = 0; i < heads * head_dim; ++i)
        dense.Set((b * seq + s) * heads * head_dim + i, qkv.Get(q.Offset(b, s, 0) + i));
  const RopeSpec spec{.head_dim = head_dim};
  const Buffer before = qkv;
  ApplyRope(spec, RopeCall{{RopeOperand::InPlace(q)}, RopePositions::Offset(3)});
  ApplyRope(spec,
            RopeCall{{RopeOperand::InPlace(dense.View({batch, seq, heads, head_dim}))}, RopePositions::Offset(3)});
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t s = 0; s < seq; ++s)
      for (std::int64_t i = 0; i < 3 * heads * head_dim; ++i) {
        const std::int64_t at = (b * seq + s) * 3 * heads * head_dim + i;
        const double expected = i < heads * head_dim ? dense.Get((b * seq + s) * heads * head_dim + i) : before.Get(at);
        ASSERT_EQ(qkv.Get(at), expected) << b << " " << s << " " << i;
      }
}

TEST(RopeApply, SameBytesForAnyThreadCount) {
  const RopeSpec spec{.theta = 500000, .head_dim = 128};
  Buffer q(DType::kBF16, 1 * 257 * 8 * 128), k(DType::kBF16, 1 * 257 * 2 * 128);
  q.FillUniform(3);
  k.FillUniform(4);
  std::vector<std::vector<unsigned char>> results;
  for (int threads : {1, 2, 3}) {
    SetNumThreads(threads);
    Buffer q1 = q, k1 = k;
    ApplyRope(spec, RopeCall{{RopeOperand::InPlace(q1.View({1, 257, 8, 128})),
                              RopeOperand::InPlace(k1.View({1, 257, 2, 128}))},
                             RopePositions::Offset(12345)});
    q1.bytes.insert(q1.bytes.end(), k1.bytes.begin(), k1.bytes.end());
    results.push_back(q1.bytes);
  }
  SetNumThreads(2);
  EXPECT_EQ(results[0], results[1]);
  EXPECT_EQ(results[0], results[2]);
}

TEST(RopeApply, BadCallsAreErrorsAndWriteNothing) {
  const RopeSpec spec{.head_dim = 8};
  Buffer q(DType::kF32, 2 * 3 * 1 * 8), k(DType::kF32, 1 * 3 * 1 * 8), wide(DType::kF32, 2 * 3 * 1 * 16);
  q.FillUniform(1);
  const Buffer q_before = q;
  const auto frequencies = ComputeRopeFrequencies(spec);
  const auto q_view = q.View({2, 3, 1, 8});
  ExpectError(
      [&] {
        ApplyRope(spec, RopeCall{{RopeOperand::InPlace(q_view)}, RopePositions::Offset(-1)});
      },
      {"offset = -1", "must not be negative"});
  ExpectError(
      [&] {
        ApplyRope(spec, RopeCall{{RopeOperand::InPlace(q_view)}, RopePositions::Offsets({0, -5})});
      },
      {"offsets[1] = -5"});
  ExpectError(
      [&] {
        ApplyRope(spec, RopeCall{{RopeOperand::InPlace(q_view)}, RopePositions::Offsets({0})});
      },
      {"offsets.size() = 1", "batch = 2"});
  ExpectError(
      [&] {
        ApplyRope(spec, RopeCall{{RopeOperand::InPlace(q_view)}, RopePositions::Ids({0, 1, 2})});
      },
      {"position_ids.size() = 3", "batch * seq = 6"});
  ExpectError(
      [&] {
        ApplyRope(spec, RopeCall{{RopeOperand::InPlace(q_view), RopeOperand::InPlace(k.View({1, 3, 1, 8}))}});
      },
      {"operands[1].batch = 1"});
  ExpectError(
      [&] {
        ApplyRope(spec, RopeCall{{RopeOperand::InPlace(wide.View({2, 3, 1, 16}))}});
      },
      {"operands[0].head_dim = 16", "head_dim = 8"});
  ExpectError(
      [&] {
        ApplyRope(spec, RopeFrequencies{{1.0, 0.5}, 1.0}, RopeCall{{RopeOperand::InPlace(q_view)}});
      },
      {"inv_freq.size() = 2", "rotary_dim / 2 = 4"});
  Buffer half(DType::kF16, 2 * 3 * 1 * 8);
  ExpectError([&] { ApplyRope(spec, RopeCall{{{q_view, half.View({2, 3, 1, 8})}}}); }, {"out.dtype = \"f16\""});
  // Aliasing: the same tensor as q and k would be rotated twice; an output
  // that overlaps its input without being it would read rotated values.
  ExpectError(
      [&] {
        ApplyRope(spec, RopeCall{{RopeOperand::InPlace(q_view), RopeOperand::InPlace(q_view)}});
      },
      {"operands[1] = memory shared with operands[0]", "rotated once"});
  Buffer other(DType::kF32, 2 * 3 * 1 * 8);
  ExpectError(
      [&] {
        ApplyRope(spec, RopeCall{{RopeOperand::InPlace(other.View({2, 3, 1, 8})), {q_view, other.View({2, 3, 1, 8})}}});
      },
      {"operands[1] = memory shared with operands[0]"});
  Buffer wider(DType::kF32, 2 * 3 * 1 * 8 + 1);
  const auto shifted =
      TensorView::Contiguous(reinterpret_cast<float*>(wider.bytes.data()) + 1, DType::kF32, {2, 3, 1, 8});
  ExpectError(
      [&] {
        ApplyRope(spec, RopeCall{{{wider.View({2, 3, 1, 8}), shifted}}});
      },
      {"operands[0].out = overlaps its input"});
  EXPECT_EQ(q.bytes, q_before.bytes);
}

// Overlapping windows of one tensor (x[:, :, 0:4] and x[:, :, 2:6]) would
// rotate the shared rows twice, and an expanded tensor (stride 0) would
// rotate its one row at every index: both are refused before anything is
// written, on the fast kernel and the reference alike (the check compared
// start addresses only). A NaN in a caller's inv_freq is refused too.
TEST(RopeApply, RefusesOverlappingWritesAndNanFrequencies) {
  const RopeSpec spec{.head_dim = 8};
  Buffer x(DType::kF32, 1 * 4 * 6 * 8);
  x.FillUniform(3);
  const Buffer before = x;
  auto* base = reinterpret_cast<float*>(x.bytes.data());
  const std::array<std::int64_t, 4> strides{4 * 6 * 8, 6 * 8, 8, 1};  // x [1, 4, 6, 8] bshd
  const TensorView low{base, DType::kF32, {1, 4, 4, 8}, strides};
  const TensorView high{base + 2 * 8, DType::kF32, {1, 4, 4, 8}, strides};
  const TensorView expanded{base, DType::kF32, {1, 4, 3, 8}, {8, 0, 0, 1}};
  const RopeCall windows{{RopeOperand::InPlace(low), RopeOperand::InPlace(high)}};
  const RopeCall expand{{RopeOperand::InPlace(expanded)}};
  ExpectError([&] { ApplyRope(spec, windows); }, {"[rope] operands[1] = memory shared with operands[0]"});
  ExpectError([&] { reference::ApplyRope(spec, ComputeRopeFrequencies(spec, 4), windows); },
              {"operands[1] = memory shared with operands[0]"});
  ExpectError([&] { ApplyRope(spec, expand); },
              {"[rope] operands[0].out = shape [1, 4, 3, 8], strides [8, 0, 0, 1]", "written more than once"});
  ExpectError([&] { reference::ApplyRope(spec, ComputeRopeFrequencies(spec, 4), expand); },
              {"operands[0].out = shape [1, 4, 3, 8]"});
  RopeFrequencies nan = ComputeRopeFrequencies(spec, 4);
  nan.inv_freq[2] = std::nan("");
  ExpectError([&] { ApplyRope(spec, nan, RopeCall{{RopeOperand::InPlace(low)}}); },
              {"[rope] inv_freq[2] = nan", "must be finite"});
  EXPECT_EQ(x.bytes, before.bytes);
}

// batch * seq is compared without wrapping: 7 * 0x6DB6DB6DB6DB6DB7 is 1
// modulo 2^64, so one position id passed for 7 sequences of that length.
TEST(RopeApply, PositionCountIsComparedWithoutWrapping) {
  const std::int64_t seq = 0x6DB6DB6DB6DB6DB7;
  ExpectError([&] { TokenPositions::Ids({0}).Validate("rope", 7, seq); },
              {"[rope] position_ids.size() = 1", "batch * seq = 7 * 7905747460161236407 (beyond int64)"});
  ExpectError([&] { PositionIdsFromMask(std::vector<std::uint8_t>{1}, 7, seq, 0); }, {"[positions] mask.size() = 1"});
}

// Slices of one fused qkv tensor interleave in memory without sharing an
// element: rotating its q and k slices in one call is allowed.
TEST(RopeApply, SlicesOfOneFusedTensorAreNotAliases) {
  const RopeSpec spec{.head_dim = 8};
  Buffer qkv(DType::kF32, 3 * (2 + 1 + 1) * 8);  // [seq 3, q 2 heads | k 1 | v 1, 8]
  qkv.FillUniform(2);
  auto* base = reinterpret_cast<float*>(qkv.bytes.data());
  const std::array<std::int64_t, 4> strides{3 * 32, 32, 8, 1};
  const TensorView q{base, DType::kF32, {1, 3, 2, 8}, strides};
  const TensorView k{base + 16, DType::kF32, {1, 3, 1, 8}, strides};
  EXPECT_NO_THROW(ApplyRope(spec, RopeCall{{RopeOperand::InPlace(q), RopeOperand::InPlace(k)}}));
}

}  // namespace
}  // namespace posenc
