// Half-precision conversions against the compiler's own IEEE conversions
// (_Float16, or Arm's __fp16 on aarch64, and a float-to-bfloat16
// re-derivation in double).
#include "posenc/dtype.h"

#include <bit>
#include <cmath>
#include <random>

#include "test_util.h"

namespace posenc {
namespace {

// The compiler's IEEE binary16. GCC's C++ has no _Float16 on aarch64 before
// GCC 13 (Debian 12's cross compiler is GCC 12); Arm's __fp16 (IEEE format,
// round-to-nearest-even conversions) stands in for it there. Elsewhere
// _Float16 where the compiler has it (it defines __FLT16_MANT_DIG__ then:
// GCC 12 on x86-64; clang only from 15 on x86-64), else the two comparisons
// below are skipped (clang 14 on x86-64, the ASan build's compiler).
#if defined(__aarch64__) && defined(__ARM_FP16_FORMAT_IEEE)
#define POSENC_COMPILER_F16 1
using CompilerF16 = __fp16;
#elif defined(__FLT16_MANT_DIG__)
#define POSENC_COMPILER_F16 1
using CompilerF16 = _Float16;
#else
#define POSENC_COMPILER_F16 0
#endif

TEST(DType, F16DecodesEveryBitPatternLikeTheCompiler) {
#if !POSENC_COMPILER_F16
  GTEST_SKIP() << "this compiler has no IEEE binary16 type (_Float16) on this target";
#else
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const float ours = F16ToF32(static_cast<std::uint16_t>(h));
    const float compiler = static_cast<float>(std::bit_cast<CompilerF16>(static_cast<std::uint16_t>(h)));
    if (std::isnan(compiler)) {
      EXPECT_TRUE(std::isnan(ours)) << h;
    } else {
      EXPECT_EQ(std::bit_cast<std::uint32_t>(ours), std::bit_cast<std::uint32_t>(compiler)) << h;
    }
  }
#endif
}

TEST(DType, F16EncodesLikeTheCompiler) {
#if !POSENC_COMPILER_F16
  GTEST_SKIP() << "this compiler has no IEEE binary16 type (_Float16) on this target";
#else
  std::mt19937 rng(1);
  std::uniform_int_distribution<std::uint32_t> bits;
  for (int i = 0; i < 2000000; ++i) {
    // Random float bit patterns (all magnitudes), plus exact half-way cases.
    std::uint32_t b = bits(rng);
    if (i % 4 == 1) b = (b & 0xFFFFE000u) | 0x1000u;  // a tie at f16 precision
    const float f = std::bit_cast<float>(b);
    const auto compiler = std::bit_cast<std::uint16_t>(static_cast<CompilerF16>(f));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(F16ToF32(F32ToF16(f))));
    } else {
      ASSERT_EQ(F32ToF16(f), compiler) << "float bits " << b;
    }
  }
#endif
}

TEST(DType, BF16RoundsToNearestEven) {
  std::mt19937 rng(2);
  std::uniform_real_distribution<double> dist(-1e6, 1e6);
  for (int i = 0; i < 100000; ++i) {
    const float f = static_cast<float>(dist(rng));
    const float rounded = BF16ToF32(F32ToBF16(f));
    // The nearest bfloat16: no other bf16 neighbour is closer.
    const std::uint16_t b = F32ToBF16(f);
    for (int step : {-1, 1}) {
      const float neighbour = BF16ToF32(static_cast<std::uint16_t>(b + step));
      ASSERT_LE(std::abs(static_cast<double>(rounded) - f), std::abs(static_cast<double>(neighbour) - f)) << f;
    }
  }
  EXPECT_EQ(F32ToBF16(std::bit_cast<float>(0x3F808000u)), 0x3F80);  // tie to even (down)
  EXPECT_EQ(F32ToBF16(std::bit_cast<float>(0x3F818000u)), 0x3F82);  // tie to even (up)
  EXPECT_TRUE(std::isnan(BF16ToF32(F32ToBF16(std::nanf("")))));
}

TEST(DType, NamesParse) {
  EXPECT_EQ(ParseDType("bfloat16"), DType::kBF16);
  EXPECT_EQ(DTypeName(DType::kF16), "f16");
  testing::ExpectError([] { ParseDType("f8"); }, {"dtype = \"f8\""});
}

}  // namespace
}  // namespace posenc
