// The integer prefill (MatMul with DotActivations::kInt8 and more than
// kDotRows rows of x): weight rows unpacked as GgufFile dequantizes them,
// the fast kernel bitwise the plain formula (Int8ProductReference) on every
// SIMD target that takes the type, near the float64 product of the rounded x
// on every target, over a grid of odd row counts, n tails and k; bitwise the
// same for any thread count.
// (Suite "matmulInt8", so that `ctest -R matmul` selects it.)
//
// AVX3_DL (AVX-512 VNNI) is one of the targets looped over, as matmul.cc
// compiles it.
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "hwy/targets.h"
#include "kernels/int8_panels.h"
#include "kernels/matmul_kernel.h"
#include "posenc/matmul.h"
#include "posenc/parallel.h"
#include "random_blocks.h"
#include "test_util.h"

namespace posenc {
namespace {

constexpr GgmlType kInt8Types[] = {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
                                   GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};

std::vector<float> Random(std::int64_t count, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(count));
  for (float& f : v) f = dist(rng);
  for (std::size_t i = 0; i < v.size(); i += 7) v[i] *= 20.0f;  // blocks of different scales
  return v;
}

std::vector<float> Dequantized(GgmlType type, const std::vector<std::byte>& bytes, std::int64_t n, std::int64_t k) {
  std::vector<float> w(static_cast<std::size_t>(n * k));
  DequantizeRow(type, bytes.data(), w.data(), n * k, "w");
  return w;
}

// x quantized as the kernel sees it (QuantizeInt8 is held to
// reference::Int8Activations by matmul_test).
struct Quantized {
  std::vector<std::int8_t> q;
  std::vector<float> scale, scaled_sum, dequantized;
  Quantized(const std::vector<float>& x, std::int64_t m, std::int64_t k)
      : q(x.size()), scale(x.size() / 32), scaled_sum(scale.size()), dequantized(x.size()) {
    detail::QuantizeInt8(x.data(), m, k, q.data(), scale.data(), scaled_sum.data(), nullptr, dequantized.data());
  }
  detail::Int8Rows Rows(std::int64_t m) const {
    return {.m = m,
            .q = q.data(),
            .scale = scale.data(),
            .scaled_sum = scaled_sum.data(),
            .x_padded = nullptr,
            .dequantized = dequantized.data()};
  }
};

// Whether the forced target has the integer kernel for `type`
// (int8_prefill-inl.h): x86 AVX2 and later; Q8_0 only with VNNI.
bool TakesInt8(std::int64_t target, GgmlType type) {
  const bool x86 = target == HWY_AVX2 || target == HWY_AVX3 || target == HWY_AVX3_DL;
  return x86 && (type != GgmlType::kQ8_0 || target == HWY_AVX3_DL);
}

// w = scale (c - offset) + min is bitwise GgufFile's weight, and the codes
// stay within the form's range (which the int16 sums of the kernel rely on).
TEST(matmulInt8, UnpackedRowsAreTheDequantizedWeights) {
  for (const GgmlType type : kInt8Types) {
    SCOPED_TRACE(TraitsOf(type).name);
    const std::int64_t n = 9, k = 512;
    const std::vector<std::byte> bytes = testing::RandomBlocks(type, n, k, 11);
    const std::vector<float> w = Dequantized(type, bytes, n, k);
    const detail::Int8Form form = *detail::Int8FormOf(type);
    const std::int64_t row_bytes = k / TraitsOf(type).block_elements * TraitsOf(type).block_bytes;
    std::vector<std::uint8_t> codes(k);
    std::vector<float> scale(k / 16), min(k / 32, 0.0f);
    int largest = 0;
    for (std::int64_t j = 0; j < n; ++j) {
      detail::UnpackInt8Row(type, bytes.data() + j * row_bytes, k, codes.data(), scale.data(), min.data());
      for (std::int64_t t = 0; t < k; ++t) {
        largest = std::max<int>(largest, codes[t]);
        const float code = static_cast<float>(static_cast<int>(codes[t]) - form.offset);
        const float weight = code * scale[t / form.sub] + (form.has_min ? min[t / 32] : 0.0f);
        ASSERT_EQ(weight, w[j * k + t]) << "j=" << j << " t=" << t;
      }
    }
    EXPECT_EQ(largest, form.largest_code);  // random bytes reach the top code
  }
  EXPECT_FALSE(detail::Int8FormOf(GgmlType::kQ3_K).has_value());
  EXPECT_FALSE(detail::Int8FormOf(GgmlType::kF16).has_value());
}

// The grid: every type with a form, row by row and (Q4_0, Q4_1, Q8_0) in
// groups of 8, m odd and past a tile and a block of rows, n with tails.
TEST(matmulInt8, KernelIsTheFormulaOnEveryTarget) {
  for (const GgmlType type : kInt8Types) {
    const std::int64_t block = TraitsOf(type).block_elements;
    for (const std::int64_t k : {block, 3 * block, 1536 / block * block}) {
      for (const std::int64_t n : {std::int64_t{16}, std::int64_t{37}, std::int64_t{72}}) {
        const std::vector<std::byte> bytes = testing::RandomBlocks(type, n, k, static_cast<std::uint32_t>(k + n));
        const std::vector<float> w = Dequantized(type, bytes, n, k);
        const WeightRows part{type, n, bytes};
        for (const DotActivations layout : {DotActivations::kFloat32, DotActivations::kInt8}) {
          const PackedWeights stored = PackedWeights::FromRows({&part, 1}, k, WeightStorage::kAsStored, layout);
          for (const std::int64_t m : {5, 7, 13, 50}) {
            if (k > 512 && m > 13) continue;  // the reference's time
            SCOPED_TRACE(std::string(TraitsOf(type).name) + " k=" + std::to_string(k) + " n=" + std::to_string(n) +
                         " m=" + std::to_string(m) + (layout == DotActivations::kInt8 ? " groups" : " rows"));
            const std::vector<float> x = Random(m * k, static_cast<std::uint32_t>(m * k + n));
            const Quantized quantized(x, m, k);
            std::vector<float> formula(static_cast<std::size_t>(m * n)), near(formula.size());
            detail::Int8ProductReference(stored.layout(), quantized.Rows(m), formula.data());
            reference::MatMul(quantized.dequantized, m, w, n, k, near);
            // Float32 sums of up to k terms err by about k roundings of sum |x w|.
            std::vector<double> tolerance(formula.size());
            for (std::size_t i = 0; i < formula.size(); ++i) {
              double magnitude = 0;
              const std::int64_t row = static_cast<std::int64_t>(i) / n, col = static_cast<std::int64_t>(i) % n;
              for (std::int64_t t = 0; t < k; ++t) {
                magnitude += std::abs(static_cast<double>(quantized.dequantized[row * k + t]) * w[col * k + t]);
              }
              tolerance[i] = 1e-7 * static_cast<double>(k + 1) * magnitude + 1e-30;
              ASSERT_NEAR(formula[i], near[i], tolerance[i]) << i;
            }
            for (const std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
              hwy::SetSupportedTargetsForTest(target);
              SCOPED_TRACE(hwy::TargetName(target));
              std::vector<float> y(formula.size(), std::nanf(""));
              MatMul(x, m, stored, y, DotActivations::kInt8);
              if (TakesInt8(target, type)) {
                ASSERT_EQ(0, std::memcmp(y.data(), formula.data(), y.size() * sizeof(float)));
              } else {  // the float32 kernel over d q
                for (std::size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], near[i], tolerance[i]) << i;
              }
            }
            hwy::SetSupportedTargetsForTest(0);
          }
        }
      }
    }
  }
}

// Blocks of panels mixing two types, or holding element rows, take the
// float32 kernel (over d q; over x for element rows alone); the others the
// integer one: near the float64 product of the x each reads. More rows than
// a block of rows (768), so that a block's d q starts past row 0.
TEST(matmulInt8, MixedSegments) {
  const std::int64_t k = 256, m = 777;
  const std::vector<std::byte> a = testing::RandomBlocks(GgmlType::kQ4_K, 20, k, 1);
  const std::vector<std::byte> b = testing::RandomBlocks(GgmlType::kQ6_K, 100, k, 2);
  const std::vector<std::byte> c = testing::RandomBlocks(GgmlType::kF16, 70, k, 3);
  const WeightRows parts[] = {{GgmlType::kQ4_K, 20, a}, {GgmlType::kQ6_K, 100, b}, {GgmlType::kF16, 70, c}};
  const PackedWeights stored = PackedWeights::FromRows(parts, k, WeightStorage::kAsStored);
  std::vector<float> w = Dequantized(GgmlType::kQ4_K, a, 20, k);
  for (const auto& [type, rows, bytes] : {std::tuple{GgmlType::kQ6_K, 100, &b}, std::tuple{GgmlType::kF16, 70, &c}}) {
    const std::vector<float> more = Dequantized(type, *bytes, rows, k);
    w.insert(w.end(), more.begin(), more.end());
  }
  const std::int64_t n = 190;
  const std::vector<float> x = Random(m * k, 4);
  const std::vector<float> rounded = reference::Int8Activations(x);
  std::vector<float> from_rounded(static_cast<std::size_t>(m * n)), from_x(from_rounded.size());
  reference::MatMul(rounded, m, w, n, k, from_rounded);
  reference::MatMul(x, m, w, n, k, from_x);
  testing::ForEachTarget([&] {
    std::vector<float> y(from_rounded.size(), std::nanf(""));
    MatMul(x, m, stored, y, DotActivations::kInt8);
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        // Blocks of 64 rows: 0..63 Q4_K and Q6_K, 64..127 Q6_K and F16
        // (mixed: d q), 128..189 F16 alone (x).
        const float expected = j < 128 ? from_rounded[i * n + j] : from_x[i * n + j];
        ASSERT_NEAR(y[i * n + j], expected, 1e-4 * (std::abs(expected) + 1.0)) << i << " " << j;
      }
    }
  });
}

// The same bits for 1, 2 and 3 threads, with more rows than one block of
// rows (768) and blocks of panels the float32 kernel takes (Q3_K).
TEST(matmulInt8, BitwiseIdenticalForAnyThreadCount) {
  const int saved = NumThreads();
  const std::int64_t n = 150, k = 256, m = 801;
  for (const GgmlType type : {GgmlType::kQ4_K, GgmlType::kQ8_0, GgmlType::kQ4_1, GgmlType::kQ3_K}) {
    const std::vector<std::byte> bytes = testing::RandomBlocks(type, n, k, 8);
    const WeightRows part{type, n, bytes};
    const PackedWeights stored =
        PackedWeights::FromRows({&part, 1}, k, WeightStorage::kAsStored, DotActivations::kInt8);
    const std::vector<float> x = Random(m * k, 9);
    std::vector<std::vector<float>> results;
    for (const int threads : {1, 2, 3}) {
      SetNumThreads(threads);
      std::vector<float> y(static_cast<std::size_t>(m * n));
      MatMul(x, m, stored, y, DotActivations::kInt8);
      results.push_back(y);
    }
    EXPECT_EQ(results[0], results[1]) << TraitsOf(type).name;
    EXPECT_EQ(results[0], results[2]) << TraitsOf(type).name;
  }
  SetNumThreads(saved);
}

// A NaN or an infinity in x makes its row NaN (d is NaN), no other row.
TEST(matmulInt8, NonFiniteRowsStayTheirOwn) {
  const std::int64_t n = 20, k = 64, m = 7;
  const std::vector<std::byte> bytes = testing::RandomBlocks(GgmlType::kQ4_0, n, k, 12);
  const WeightRows part{GgmlType::kQ4_0, n, bytes};
  const PackedWeights stored = PackedWeights::FromRows({&part, 1}, k, WeightStorage::kAsStored);
  std::vector<float> x = Random(m * k, 13);
  x[2 * k + 5] = std::nanf("");
  x[4 * k + 40] = INFINITY;
  testing::ForEachTarget([&] {
    std::vector<float> y(static_cast<std::size_t>(m * n));
    MatMul(x, m, stored, y, DotActivations::kInt8);
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) EXPECT_EQ(std::isnan(y[i * n + j]), i == 2 || i == 4) << i << " " << j;
    }
  });
}

}  // namespace
}  // namespace posenc
