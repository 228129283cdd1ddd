// The fast matmul against the double-precision reference on every compiled
// SIMD target, over a grid of shapes that hits every m tail (rows not a
// multiple of the tile), n tail (partial panels) and short k; bitwise
// identical results for 1, 2 and 3 threads; argument errors.
// (Suite "matmul", lowercase, so that `ctest -R matmul` selects it.)
//
// AVX3_DL (AVX-512 VNNI) is one of the targets looped over, as matmul.cc
// compiles it.
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif
#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "hwy/targets.h"
#include "posenc/dtype.h"
#include "posenc/matmul.h"
#include "posenc/parallel.h"
#include "random_blocks.h"
#include "test_util.h"

namespace posenc {
namespace {

using testing::ExpectError;
using testing::ForEachTarget;
using testing::UniformFloats;

// Compares y with the reference; the float32 FMA chain of length k errs by
// at most about k units of float32 rounding (6e-8) of sum_kk |x||w|.
void ExpectNearReference(const std::vector<float>& x, const std::vector<float>& w, std::int64_t m, std::int64_t n,
                         std::int64_t k, const std::vector<float>& y) {
  std::vector<float> expected(static_cast<std::size_t>(m * n));
  reference::MatMul(x, m, w, n, k, expected);
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double magnitude = 0;
      for (std::int64_t kk = 0; kk < k; ++kk) {
        magnitude += std::abs(static_cast<double>(x[i * k + kk]) * w[j * k + kk]);
      }
      const double tolerance = 1e-7 * static_cast<double>(k + 1) * magnitude + 1e-30;
      ASSERT_NEAR(y[i * n + j], expected[i * n + j], tolerance) << "i=" << i << " j=" << j;
    }
  }
}

TEST(matmul, MatchesReferenceOnEveryTarget) {
  for (const std::int64_t k : {1, 2, 3, 7, 8, 17, 64, 129}) {
    for (const std::int64_t n : {1, 3, 7, 8, 15, 16, 17, 31, 33, 64, 100}) {
      const std::vector<float> w = UniformFloats(n * k, static_cast<std::uint32_t>(1000 * n + k));
      for (const std::int64_t m : {0, 1, 2, 5, 6, 7, 13, 31, 64, 97}) {
        SCOPED_TRACE("m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k));
        const std::vector<float> x = UniformFloats(m * k, static_cast<std::uint32_t>(7 * m + k));
        ForEachTarget([&] {
          const PackedWeights packed = PackedWeights::Pack(w, n, k);
          EXPECT_EQ(packed.rows(), n);
          EXPECT_EQ(packed.cols(), k);
          std::vector<float> y(static_cast<std::size_t>(m * n), std::nanf(""));
          MatMul(x, m, packed, y);
          ExpectNearReference(x, w, m, n, k, y);
        });
      }
    }
  }
}

// k beyond one slice of the kernel (1024: here 2 slices of 550, partial sums
// resume from y, also in the n tail) and m beyond one block (96 rows); the
// same bits on 1 and 3 threads.
TEST(matmul, LongKAndManyBlocks) {
  const std::int64_t m = 211, n = 70, k = 1100;
  const std::vector<float> x = UniformFloats(m * k, 1), w = UniformFloats(n * k, 2);
  const int saved = NumThreads();
  ForEachTarget([&] {
    const PackedWeights packed = PackedWeights::Pack(w, n, k);
    std::vector<float> y(static_cast<std::size_t>(m * n)), y3(y.size());
    SetNumThreads(1);
    MatMul(x, m, packed, y);
    SetNumThreads(3);
    MatMul(x, m, packed, y3);
    ExpectNearReference(x, w, m, n, k, y);
    EXPECT_EQ(y, y3);
  });
  SetNumThreads(saved);
}

TEST(matmul, BitwiseIdenticalForAnyThreadCount) {
  const std::int64_t m = 200, n = 300, k = 257;
  const std::vector<float> x = UniformFloats(m * k, 3), w = UniformFloats(n * k, 4);
  const int saved = NumThreads();
  ForEachTarget([&] {
    const PackedWeights packed = PackedWeights::Pack(w, n, k);
    std::vector<std::vector<float>> results;
    for (const int threads : {1, 2, 3}) {
      SetNumThreads(threads);
      std::vector<float> y(static_cast<std::size_t>(m * n));
      MatMul(x, m, packed, y);
      results.push_back(y);
    }
    EXPECT_EQ(results[0], results[1]);
    EXPECT_EQ(results[0], results[2]);
    // And the m = 1 rows of a decode step equal the same rows of the batch.
    std::vector<float> row(static_cast<std::size_t>(n));
    MatMul(std::span(x).subspan(static_cast<std::size_t>(199 * k), static_cast<std::size_t>(k)), 1, packed, row);
    EXPECT_EQ(row, std::vector<float>(results[0].end() - n, results[0].end()));
  });
  SetNumThreads(saved);
}

std::vector<float> DequantizedRows(GgmlType type, const std::vector<std::byte>& bytes, std::int64_t rows,
                                   std::int64_t k) {
  std::vector<float> w(static_cast<std::size_t>(rows * k));
  DequantizeRow(type, bytes.data(), w.data(), rows * k, "w");
  return w;
}

const GgmlType kKernelTypes[] = {GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ4_0, GgmlType::kQ4_1,
                                 GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ8_0, GgmlType::kQ2_K,
                                 GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K};

// Weights kept as stored: decode (m <= 4) near the reference on the exactly
// dequantized weights; more rows bitwise the float32 kernel on them; the
// rows, the bytes held. Shapes: n tails, k of one block, several blocks and
// past one k slice (1024); m past one row block: the next test.
TEST(matmul, StoredRowsOfEveryTypeOnEveryTarget) {
  for (const GgmlType type : kKernelTypes) {
    const std::int64_t block = TraitsOf(type).block_elements == 1 ? 16 : TraitsOf(type).block_elements;
    for (const std::int64_t k : {block, 3 * block, 1280 / block * block + (block == 16 ? 5 : 0)}) {
      for (const std::int64_t n : {1, 17, 70}) {
        SCOPED_TRACE(std::string(TraitsOf(type).name) + " n=" + std::to_string(n) + " k=" + std::to_string(k));
        const std::vector<std::byte> bytes = testing::RandomBlocks(type, n, k, static_cast<std::uint32_t>(n * 31 + k));
        const std::vector<float> w = DequantizedRows(type, bytes, n, k);
        const WeightRows part{type, n, bytes};
        const PackedWeights floats = PackedWeights::Pack(w, n, k);
        ForEachTarget([&] {
          const PackedWeights stored = PackedWeights::FromRows({&part, 1}, k, WeightStorage::kAsStored);
          EXPECT_EQ(stored.Bytes(), static_cast<double>(bytes.size()));
          std::vector<float> row(static_cast<std::size_t>(k));
          stored.Row(n - 1, row);
          EXPECT_EQ(row, std::vector<float>(w.end() - k, w.end()));
          for (const std::int64_t m : {1, 2, 3, 4, 5, 13}) {
            SCOPED_TRACE("m=" + std::to_string(m));
            const std::vector<float> x = UniformFloats(m * k, static_cast<std::uint32_t>(m + k));
            std::vector<float> y(static_cast<std::size_t>(m * n), std::nanf(""));
            MatMul(x, m, stored, y);
            if (m <= 4) {
              ExpectNearReference(x, w, m, n, k, y);
            } else {
              std::vector<float> expected(y.size());
              MatMul(x, m, floats, expected);
              EXPECT_EQ(y, expected);
            }
          }
        });
      }
    }
  }
}

// Int8 activations (decode, m <= 4): the quantized types against the
// reference on x rounded as documented (reference::Int8Activations), near
// enough that the rounding of x is seen (the float32 x's result is farther
// than the tolerance somewhere); element types read x as it is.
TEST(matmul, Int8ActivationsOfEveryTypeOnEveryTarget) {
  for (const GgmlType type : kKernelTypes) {
    const bool quantized = TraitsOf(type).block_elements > 1;
    const std::int64_t block = quantized ? TraitsOf(type).block_elements : 32;
    for (const std::int64_t k : {block, 3 * block, 1280 / block * block}) {
      const std::int64_t n = 37;
      SCOPED_TRACE(std::string(TraitsOf(type).name) + " k=" + std::to_string(k));
      const std::vector<std::byte> bytes = testing::RandomBlocks(type, n, k, static_cast<std::uint32_t>(k + 3));
      const std::vector<float> w = DequantizedRows(type, bytes, n, k);
      const WeightRows part{type, n, bytes};
      for (const std::int64_t m : {1, 2, 3, 4}) {
        SCOPED_TRACE("m=" + std::to_string(m));
        std::vector<float> x = UniformFloats(m * k, static_cast<std::uint32_t>(m * k));
        for (std::int64_t i = 0; i < k; i += 7) x[i] *= 20.0f;  // blocks of different scales
        const std::vector<float> rounded = quantized ? reference::Int8Activations(x) : x;
        std::vector<float> expected(static_cast<std::size_t>(m * n)), from_float32(expected.size());
        reference::MatMul(rounded, m, w, n, k, expected);
        reference::MatMul(x, m, w, n, k, from_float32);
        // The gap to the float32 x's result, in units of the test's tolerance.
        double largest_gap = 0;
        for (std::int64_t i = 0; i < m; ++i) {
          for (std::int64_t j = 0; j < n; ++j) {
            double magnitude = 0;
            for (std::int64_t kk = 0; kk < k; ++kk)
              magnitude += std::abs(static_cast<double>(x[i * k + kk]) * w[j * k + kk]);
            const double gap = std::abs(static_cast<double>(expected[i * n + j]) - from_float32[i * n + j]);
            largest_gap = std::max(largest_gap, gap / (1e-7 * static_cast<double>(k + 1) * magnitude));
          }
        }
        if (quantized) {
          EXPECT_GT(largest_gap, 3.0);
        }
        ForEachTarget([&] {
          const PackedWeights stored = PackedWeights::FromRows({&part, 1}, k, WeightStorage::kAsStored);
          std::vector<float> y(static_cast<std::size_t>(m * n), std::nanf(""));
          MatMul(x, m, stored, y, DotActivations::kInt8);
          ExpectNearReference(rounded, w, m, n, k, y);
        });
      }
    }
  }
}

// The rounding of x, by hand: a block of largest magnitude 127 has d = 1,
// halves round to even; an all-zero block stays zero; every block
// has its own scale; NaN in x gives NaN, not a garbage int8.
TEST(matmul, Int8ActivationsRoundAsDocumented) {
  std::vector<float> x(64, 0.0f);
  x[0] = 127.0f;
  x[1] = -63.5f;
  x[2] = 0.5f;
  x[3] = -0.49f;
  x[4] = 2.5f;
  const std::vector<float> rounded = reference::Int8Activations(x);
  EXPECT_EQ(rounded[0], 127.0f);
  EXPECT_EQ(rounded[1], -64.0f);
  EXPECT_EQ(rounded[2], 0.0f);
  EXPECT_EQ(rounded[3], 0.0f);
  EXPECT_EQ(rounded[4], 2.0f);
  EXPECT_EQ(std::vector<float>(rounded.begin() + 32, rounded.end()), std::vector<float>(32, 0.0f));
  const std::vector<float> y = UniformFloats(64, 3);
  const std::vector<float> r = reference::Int8Activations(y);
  for (std::size_t b = 0; b < 64; b += 32) {
    float largest = 0;
    for (std::size_t l = b; l < b + 32; ++l) largest = std::max(largest, std::abs(y[l]));
    const double d = largest / 127.0;
    for (std::size_t l = b; l < b + 32; ++l)
      EXPECT_LE(std::abs(static_cast<double>(y[l]) - r[l]), 0.5 * d * (1 + 1e-6));
  }
  const std::int64_t n = 5, k = 64;
  const std::vector<std::byte> bytes = testing::RandomBlocks(GgmlType::kQ4_0, n, k, 9);
  const WeightRows part{GgmlType::kQ4_0, n, bytes};
  const PackedWeights stored = PackedWeights::FromRows({&part, 1}, k, WeightStorage::kAsStored);
  std::vector<float> with_nan = UniformFloats(k, 4);
  with_nan[40] = std::nanf("");
  std::vector<float> out(static_cast<std::size_t>(n));
  ForEachTarget([&] {
    MatMul(with_nan, 1, stored, out, DotActivations::kInt8);
    for (const float v : out) EXPECT_TRUE(std::isnan(v));
  });
  ExpectError([&] { reference::Int8Activations(std::vector<float>(33)); }, {"x.size()", "33", "multiple of 32"});
}

// More rows than one stored row block (768): still bitwise the float32
// kernel on the dequantized weights.
TEST(matmul, StoredRowsPastOneRowBlock) {
  const std::int64_t m = 800, n = 17, k = 256;
  const std::vector<std::byte> bytes = testing::RandomBlocks(GgmlType::kQ4_K, n, k, 7);
  const std::vector<float> w = DequantizedRows(GgmlType::kQ4_K, bytes, n, k);
  const WeightRows part{GgmlType::kQ4_K, n, bytes};
  const std::vector<float> x = UniformFloats(m * k, 8);
  ForEachTarget([&] {
    const PackedWeights stored = PackedWeights::FromRows({&part, 1}, k, WeightStorage::kAsStored);
    std::vector<float> y(static_cast<std::size_t>(m * n)), expected(y.size());
    MatMul(x, m, stored, y);
    MatMul(x, m, PackedWeights::Pack(w, n, k), expected);
    EXPECT_EQ(y, expected);
  });
}

// Q, K and V of different types stacked as one matrix (a Q4_K_M file's
// attn_v is Q6_K); as float32 it is the float32 panels of all rows.
TEST(matmul, StoredSegmentsOfMixedTypes) {
  const std::int64_t k = 512;
  const std::vector<std::pair<GgmlType, std::int64_t>> shapes{
      {GgmlType::kQ4_K, 20}, {GgmlType::kQ6_K, 7}, {GgmlType::kF32, 9}, {GgmlType::kQ8_0, 3}};
  std::vector<std::vector<std::byte>> bytes;
  std::vector<WeightRows> parts;
  std::vector<float> w;
  for (const auto& [type, rows] : shapes) {
    bytes.push_back(testing::RandomBlocks(type, rows, k, static_cast<std::uint32_t>(rows)));
    const std::vector<float> part = DequantizedRows(type, bytes.back(), rows, k);
    w.insert(w.end(), part.begin(), part.end());
  }
  for (std::size_t i = 0; i < shapes.size(); ++i) parts.push_back({shapes[i].first, shapes[i].second, bytes[i]});
  const std::int64_t n = 39;
  const PackedWeights stored = PackedWeights::FromRows(parts, k, WeightStorage::kAsStored);
  const PackedWeights as_f32 = PackedWeights::FromRows(parts, k, WeightStorage::kFloat32);
  EXPECT_EQ(as_f32.Bytes(), 4.0 * 48 * k);  // three panels of 16 rows
  for (const std::int64_t m : {1, 3, 50}) {
    const std::vector<float> x = UniformFloats(m * k, static_cast<std::uint32_t>(m));
    std::vector<float> y(static_cast<std::size_t>(m * n)), y_f32(y.size());
    MatMul(x, m, stored, y);
    MatMul(x, m, as_f32, y_f32);
    ExpectNearReference(x, w, m, n, k, y);
    if (m > 4) {
      EXPECT_EQ(y, y_f32);
    } else {
      // Int8 activations: the F32 rows (27..35) read x, the others x rounded.
      std::vector<float> y_int8(y.size()), from_x(y.size()), from_rounded(y.size());
      MatMul(x, m, stored, y_int8, DotActivations::kInt8);
      reference::MatMul(x, m, w, n, k, from_x);
      reference::MatMul(reference::Int8Activations(x), m, w, n, k, from_rounded);
      for (std::int64_t i = 0; i < m; ++i) {
        for (std::int64_t j = 0; j < n; ++j) {
          const float expected = (j >= 27 && j < 36 ? from_x : from_rounded)[i * n + j];
          EXPECT_NEAR(y_int8[i * n + j], expected, 1e-4 * (1 + std::abs(expected))) << i << " " << j;
        }
      }
    }
  }
  for (const std::int64_t j : {0, 19, 20, 26, 27, 35, 36, 38}) {
    std::vector<float> row(static_cast<std::size_t>(k)), row_f32(row.size());
    stored.Row(j, row);
    as_f32.Row(j, row_f32);
    EXPECT_EQ(row, std::vector<float>(w.begin() + j * k, w.begin() + (j + 1) * k)) << j;
    EXPECT_EQ(row_f32, row) << j;
  }
}

// Weights packed for int8 decode keep Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q5_K and
// Q6_K parts of whole groups of 8 rows interleaved (row_groups.h). For each k of `ks`,
// the parts `shapes` (type, rows) one after the other: the integer
// products equal the reference on the rounded x, bitwise the same on every
// x86 target; every other path reads the same weights bitwise as the
// row-major layout (the thread counts: below).
void CheckInt8Groups(const std::vector<std::pair<GgmlType, std::int64_t>>& shapes,
                     std::initializer_list<std::int64_t> ks) {
  std::int64_t n = 0;
  for (const auto& shape : shapes) n += shape.second;
  for (const std::int64_t k : ks) {
    SCOPED_TRACE("k=" + std::to_string(k));
    std::vector<std::vector<std::byte>> bytes;
    std::vector<WeightRows> parts;
    std::vector<float> w;
    for (const auto& [type, rows] : shapes) {
      bytes.push_back(testing::RandomBlocks(type, rows, k, static_cast<std::uint32_t>(rows + k)));
      const std::vector<float> part = DequantizedRows(type, bytes.back(), rows, k);
      w.insert(w.end(), part.begin(), part.end());
    }
    for (std::size_t i = 0; i < shapes.size(); ++i) parts.push_back({shapes[i].first, shapes[i].second, bytes[i]});
    const PackedWeights rows = PackedWeights::FromRows(parts, k, WeightStorage::kAsStored);
    const PackedWeights groups = PackedWeights::FromRows(parts, k, WeightStorage::kAsStored, DotActivations::kInt8);
    EXPECT_EQ(groups.Bytes(), rows.Bytes());
    for (std::int64_t j = 0; j < n; ++j) {
      std::vector<float> row(static_cast<std::size_t>(k));
      groups.Row(j, row);
      ASSERT_EQ(row, std::vector<float>(w.begin() + j * k, w.begin() + (j + 1) * k)) << j;
    }
    ForEachTarget([&] {
      for (const std::int64_t m : {1, 2, 3, 4, 9}) {
        SCOPED_TRACE("m=" + std::to_string(m));
        std::vector<float> x = UniformFloats(m * k, static_cast<std::uint32_t>(m + 2 * k));
        for (std::int64_t i = 0; i < m * k; i += 5) x[i] *= 30.0f;  // blocks of different scales
        std::vector<float> y_rows(static_cast<std::size_t>(m * n)), y_groups(y_rows.size());
        MatMul(x, m, rows, y_rows);
        MatMul(x, m, groups, y_groups);
        EXPECT_EQ(y_groups, y_rows);  // float32 activations, and prefill: the same bytes, the same kernel
        if (m > 4) continue;
        MatMul(x, m, groups, y_groups, DotActivations::kInt8);
        ExpectNearReference(reference::Int8Activations(x), w, m, n, k, y_groups);
      }
    });
    // The integer kernel's sums are exact and its float32 steps have one
    // order, so every x86 target that has it (AVX2, AVX3, AVX3_DL) gives the
    // same bytes.
    for (const std::int64_t m : {1, 2, 3, 4}) {
      SCOPED_TRACE("m=" + std::to_string(m));
      const std::vector<float> x = UniformFloats(m * k, static_cast<std::uint32_t>(7 * m + k));
      std::vector<float> first;
      for (const std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
        if (target != HWY_AVX2 && target != HWY_AVX3 && target != HWY_AVX3_DL) continue;
        hwy::SetSupportedTargetsForTest(target);
        SCOPED_TRACE(hwy::TargetName(target));
        std::vector<float> y(static_cast<std::size_t>(m * n), std::nanf(""));
        MatMul(x, m, groups, y, DotActivations::kInt8);
        if (first.empty()) first = y;
        EXPECT_EQ(0, std::memcmp(y.data(), first.data(), y.size() * sizeof(float)));
      }
      hwy::SetSupportedTargetsForTest(0);
    }
  }
}

// Grouped parts of each 32-weight type, a part of another type, a Q5_0
// part of 5 rows, a Q4_1 part that starts off a multiple of 8 and one of 3
// rows (all three kept row by row).
TEST(matmul, Int8GroupsOfRows) {
  CheckInt8Groups({{GgmlType::kQ4_1, 24},
                   {GgmlType::kQ8_0, 16},
                   {GgmlType::kQ4_0, 8},
                   {GgmlType::kQ5_0, 16},
                   {GgmlType::kQ5_1, 8},
                   {GgmlType::kQ5_0, 5},
                   {GgmlType::kQ4_1, 16},
                   {GgmlType::kQ4_1, 3}},
                  {32, 96, 576});
}

// K-quant super-blocks of 256: grouped Q4_K, Q5_K and Q6_K parts and 3-row
// parts of each (kept row by row), over one and three super-blocks.
TEST(matmul, Int8GroupsOfKQuantRows) {
  CheckInt8Groups({{GgmlType::kQ4_K, 16},
                   {GgmlType::kQ6_K, 8},
                   {GgmlType::kQ5_K, 8},
                   {GgmlType::kQ4_K, 8},
                   {GgmlType::kQ6_K, 16},
                   {GgmlType::kQ5_K, 16},
                   {GgmlType::kQ4_K, 3},
                   {GgmlType::kQ6_K, 3},
                   {GgmlType::kQ5_K, 3}},
                  {256, 768});
}

// Row by row (Q5_1; every type with float32 activations) and in groups of
// 8 (Q4_1, Q5_0, Q4_K, Q5_K and Q6_K packed for int8 decode).
TEST(matmul, StoredRowsBitwiseIdenticalForAnyThreadCount) {
  const std::int64_t n = 296, k = 256;
  const int saved = NumThreads();
  for (const GgmlType type :
       {GgmlType::kQ5_1, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K}) {
    const std::vector<std::byte> bytes = testing::RandomBlocks(type, n, k, 5);
    const WeightRows part{type, n, bytes};
    for (const DotActivations activations : {DotActivations::kFloat32, DotActivations::kInt8}) {
      const PackedWeights stored = PackedWeights::FromRows({&part, 1}, k, WeightStorage::kAsStored, activations);
      for (const std::int64_t m : {1, 4, 500}) {
        const std::vector<float> x = UniformFloats(m * k, 6);
        std::vector<std::vector<float>> results;
        for (const int threads : {1, 2, 3}) {
          SetNumThreads(threads);
          std::vector<float> y(static_cast<std::size_t>(m * n));
          MatMul(x, m, stored, y, activations);
          results.push_back(y);
        }
        EXPECT_EQ(results[0], results[1]) << TraitsOf(type).name << " m=" << m;
        EXPECT_EQ(results[0], results[2]) << TraitsOf(type).name << " m=" << m;
      }
    }
  }
  SetNumThreads(saved);
}

TEST(matmul, StoredRowsRejectBadArguments) {
  const std::vector<std::byte> q4(20 * 2);  // two Q4_1 blocks
  const WeightRows part{GgmlType::kQ4_1, 2, q4};
  ExpectError(
      [&] {
        PackedWeights::FromRows({&part, 1}, 48, WeightStorage::kAsStored);
      },
      {"[matmul] k = 48", "whole Q4_1 blocks of 32 values (parts[0])"});
  ExpectError(
      [&] {
        PackedWeights::FromRows({&part, 1}, 64, WeightStorage::kAsStored);
      },
      {"parts[0].data.size() = 40", "rows * row bytes = 2 * 40"});
  const WeightRows none{GgmlType::kQ4_1, 0, {}};
  ExpectError([&] { PackedWeights::FromRows({&none, 1}, 32, WeightStorage::kAsStored); }, {"parts[0].rows = 0"});
  ExpectError([&] { PackedWeights::FromRows({}, 32, WeightStorage::kAsStored); }, {"parts = empty"});
  const std::vector<std::byte> q8(292);  // Q8_K: llama.cpp's activation type, never a weight
  const WeightRows q8_k{GgmlType::kQ8_K, 1, q8};
  ExpectError(
      [&] {
        PackedWeights::FromRows({&q8_k, 1}, 256, WeightStorage::kAsStored);
      },
      {"parts[0].type = \"Q8_K\"", "has no matmul kernel"});
  std::vector<std::byte> inf_scale(20);
  const std::uint16_t inf = 0x7C00;
  std::memcpy(inf_scale.data() + 2, &inf, 2);
  const WeightRows named{GgmlType::kQ4_1, 1, inf_scale, "blk.0.attn_q.weight"};
  ExpectError(
      [&] {
        PackedWeights::FromRows({&named, 1}, 32, WeightStorage::kAsStored);
      },
      {"[gguf] blk.0.attn_q.weight (Q4_1) block 0 m = inf", "must be finite"});
  const PackedWeights stored = PackedWeights::FromRows({&part, 1}, 32, WeightStorage::kAsStored);
  std::vector<float> row(32);
  ExpectError([&] { stored.Row(2, row); }, {"[matmul] row = 2", "[0, n = 2)"});
  ExpectError([&] { stored.Row(0, std::span<float>(row).first(31)); }, {"out.size() = 31"});
}

TEST(matmul, RejectsBadArguments) {
  const std::vector<float> w(6, 1.0f);
  ExpectError([&] { PackedWeights::Pack(w, 0, 6); }, {"[matmul] n = 0", "at least 1"});
  ExpectError([&] { PackedWeights::Pack(w, 6, 0); }, {"[matmul] k = 0", "at least 1"});
  ExpectError([&] { PackedWeights::Pack(w, -1, 6); }, {"n = -1"});
  ExpectError([&] { PackedWeights::Pack(w, 4, 2); }, {"w.size() = 6", "n * k = 4 * 2"});
  ExpectError([&] { PackedWeights::Pack(std::span<const float>(w).first(5), 2, 3); }, {"w.size() = 5"});

  const PackedWeights packed = PackedWeights::Pack(w, 2, 3);  // n = 2, k = 3
  std::vector<float> x(6), y(4);
  EXPECT_NO_THROW(MatMul(x, 2, packed, y));
  ExpectError([&] { MatMul(x, -1, packed, y); }, {"[matmul] m = -1"});
  ExpectError([&] { MatMul(std::span<const float>(x).first(5), 2, packed, y); }, {"x.size() = 5", "m * k = 2 * 3"});
  ExpectError([&] { MatMul(x, 2, packed, std::span<float>(y).first(3)); }, {"y.size() = 3", "m * n = 2 * 2"});

  std::vector<float> out(4);
  ExpectError([&] { reference::MatMul(x, 2, w, 0, 3, out); }, {"n = 0"});
  ExpectError([&] { reference::MatMul(x, 2, w, 2, 0, out); }, {"k = 0"});
  ExpectError([&] { reference::MatMul(x, 2, std::span<const float>(w).first(5), 2, 3, out); }, {"w.size() = 5"});
  ExpectError([&] { reference::MatMul(x, 3, w, 2, 3, out); }, {"x.size() = 6"});
  ExpectError([&] { reference::MatMul(x, 2, w, 2, 3, std::span<float>(out).first(1)); }, {"y.size() = 1"});
}

}  // namespace
}  // namespace posenc
