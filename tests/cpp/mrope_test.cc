// Multimodal RoPE (Qwen2-VL): the three-pass kernel against the float64
// reference, text tokens (three equal positions) as plain RoPE, and the
// section errors. Hugging Face's apply_multimodal_rotary_pos_emb is the
// outside oracle in tests/python/test_rope_config_variants_hf.py.
#include "posenc/mrope.h"

#include <cmath>

#include "test_util.h"

namespace posenc {
namespace {

using testing::Buffer;
using testing::ExpectError;

constexpr std::int64_t kSeq = 7, kHeads = 2, kDim = 16;  // 8 pairs: sections 2, 3, 3

RopeSpec Spec() { return {.theta = 10000, .head_dim = kDim}; }

std::array<TokenPositions, 3> Positions() {
  return {TokenPositions::Ids({0, 3, 3, 3, 3, 9, 10}), TokenPositions::Ids({0, 1, 1, 2, 2, 9, 10}),
          TokenPositions::Ids({0, 1, 2, 1, 2, 9, 10})};
}

double MaxDifference(const Buffer& a, const Buffer& b) {
  double worst = 0;
  for (std::int64_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a.Get(i) - b.Get(i)));
  return worst;
}

TEST(MultimodalRope, KernelMatchesTheReference) {
  for (const DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (const RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved}) {
      RopeSpec spec = Spec();
      spec.layout = layout;
      Buffer x(dtype, kSeq * kHeads * kDim), fast(dtype, x.size()), slow(dtype, x.size());
      x.FillUniform(7);
      const std::array<std::int64_t, 4> shape{1, kSeq, kHeads, kDim};
      MultimodalRopeCall call{
          .operands = {{x.View(shape), fast.View(shape)}}, .positions = Positions(), .section = {2, 3, 3}};
      ApplyMultimodalRope(spec, ComputeRopeFrequencies(spec), call);
      call.operands = {{x.View(shape), slow.View(shape)}};
      reference::ApplyMultimodalRope(spec, ComputeRopeFrequencies(spec), call);
      // f32: the kernel's float32 sin/cos; f16/bf16: one rounding of the output.
      EXPECT_LE(MaxDifference(fast, slow), dtype == DType::kF32 ? 1e-6 : testing::UnitInLastPlace(dtype, 1.0));
    }
  }
}

TEST(MultimodalRope, TextTokensAreOneDimensionalRope) {
  const RopeSpec spec = Spec();
  Buffer x(DType::kF32, kSeq * kHeads * kDim), mrope(DType::kF32, x.size()), rope(DType::kF32, x.size());
  x.FillUniform(3);
  const std::array<std::int64_t, 4> shape{1, kSeq, kHeads, kDim};
  const TokenPositions text = TokenPositions::Offset(5);
  reference::ApplyMultimodalRope(
      spec, ComputeRopeFrequencies(spec),
      {.operands = {{x.View(shape), mrope.View(shape)}}, .positions = {text, text, text}, .section = {2, 3, 3}});
  reference::ApplyRope(spec, ComputeRopeFrequencies(spec),
                       {.operands = {{x.View(shape), rope.View(shape)}}, .positions = text});
  EXPECT_EQ(MaxDifference(mrope, rope), 0.0);
}

TEST(MultimodalRope, SectionsMustCoverThePairs) {
  const RopeSpec spec = Spec();
  Buffer x(DType::kF32, kSeq * kHeads * kDim);
  const std::array<std::int64_t, 4> shape{1, kSeq, kHeads, kDim};
  MultimodalRopeCall call{
      .operands = {RopeOperand::InPlace(x.View(shape))}, .positions = Positions(), .section = {2, 3, 2}};
  ExpectError([&] { ApplyMultimodalRope(spec, ComputeRopeFrequencies(spec), call); },
              {"sum(mrope_section) = 7", "must equal rotary_dim / 2 = 8"});
  call.section = {4, 4};
  ExpectError([&] { reference::ApplyMultimodalRope(spec, ComputeRopeFrequencies(spec), call); },
              {"mrope_section.size() = 2", "must be 3"});
}

}  // namespace
}  // namespace posenc
