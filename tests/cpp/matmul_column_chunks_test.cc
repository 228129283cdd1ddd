// MatMulColumnChunks (a perplexity pass's output product, a chunk of
// columns at a time): every chunk bitwise the same columns of MatMul with
// the kernel of many rows, for float32 panels and stored rows of every
// kernel type, float32 and int8 activations, row counts around the tiles
// and the stored row block (768), column tails and every compiled target;
// the chunks in order, covering n once; argument errors.
// (Suite "matmul", lowercase, so that `ctest -R matmul` selects it.)
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/dtype.h"
#include "posenc/matmul.h"
#include "random_blocks.h"
#include "test_util.h"

namespace posenc {
namespace {

using testing::ExpectError;
using testing::ForEachTarget;
using testing::UniformFloats;

// MatMulColumnChunks' chunks put back into [m, n], checking their order.
std::vector<float> Chunked(const std::vector<float>& x, std::int64_t m, const PackedWeights& w, std::int64_t chunk,
                           DotActivations activations) {
  const std::int64_t n = w.rows();
  std::vector<float> y(static_cast<std::size_t>(m * n), std::nanf(""));
  std::int64_t next = 0;
  MatMulColumnChunks(x, m, w, chunk, activations,
                     [&](std::int64_t first, std::int64_t width, std::span<const float> c) {
                       EXPECT_EQ(first, next);
                       EXPECT_EQ(width, std::min(chunk, n - first));
                       EXPECT_EQ(static_cast<std::int64_t>(c.size()), m * width);
                       for (std::int64_t i = 0; i < m; ++i) {
                         for (std::int64_t j = 0; j < width; ++j) y[i * n + first + j] = c[i * width + j];
                       }
                       next = first + width;
                     });
  EXPECT_EQ(next, n);
  return y;
}

void ExpectChunksAreTheProduct(const std::vector<float>& x, std::int64_t m, const PackedWeights& w,
                               DotActivations activations) {
  std::vector<float> expected(static_cast<std::size_t>(m * w.rows()));
  MatMul(x, m, w, expected, activations, FewRows::kPanels);
  for (const std::int64_t chunk : {64, 128, 192, 1024}) {
    SCOPED_TRACE("chunk=" + std::to_string(chunk));
    EXPECT_EQ(Chunked(x, m, w, chunk, activations), expected);
  }
}

TEST(matmulColumnChunks, FloatPanelsBitwiseTheProduct) {
  for (const std::int64_t n : {1, 64, 200, 333}) {
    for (const std::int64_t k : {5, 64, 1100}) {  // 1100: two slices of k
      const std::vector<float> w = UniformFloats(n * k, static_cast<std::uint32_t>(n + k));
      for (const std::int64_t m : {1, 7, 100}) {
        SCOPED_TRACE("n=" + std::to_string(n) + " k=" + std::to_string(k) + " m=" + std::to_string(m));
        const std::vector<float> x = UniformFloats(m * k, static_cast<std::uint32_t>(m));
        ForEachTarget([&] { ExpectChunksAreTheProduct(x, m, PackedWeights::Pack(w, n, k), DotActivations::kFloat32); });
      }
    }
  }
}

TEST(matmulColumnChunks, StoredRowsBitwiseTheProduct) {
  const GgmlType types[] = {GgmlType::kF32,  GgmlType::kF16,  GgmlType::kQ4_0, GgmlType::kQ4_1,
                            GgmlType::kQ5_0, GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K};
  const std::int64_t n = 200, k = 256;
  for (const GgmlType type : types) {
    const std::vector<std::byte> bytes = testing::RandomBlocks(type, n, k, 11);
    const WeightRows part{type, n, bytes};
    for (const DotActivations activations : {DotActivations::kFloat32, DotActivations::kInt8}) {
      for (const std::int64_t m : {1, 4, 13, 800}) {  // 800: two stored row blocks
        SCOPED_TRACE(std::string(TraitsOf(type).name) + " m=" + std::to_string(m) +
                     (activations == DotActivations::kInt8 ? " int8" : " f32"));
        const std::vector<float> x = UniformFloats(m * k, static_cast<std::uint32_t>(m + 5));
        ForEachTarget([&] {
          const PackedWeights stored = PackedWeights::FromRows({&part, 1}, k, WeightStorage::kAsStored, activations);
          ExpectChunksAreTheProduct(x, m, stored, activations);
        });
      }
    }
  }
}

TEST(matmulColumnChunks, RejectsBadArguments) {
  const PackedWeights w = PackedWeights::Pack(UniformFloats(64 * 8, 1), 64, 8);
  const std::vector<float> x = UniformFloats(2 * 8, 2);
  const ColumnChunkSink ignore = [](std::int64_t, std::int64_t, std::span<const float>) {};
  for (const std::int64_t chunk : {0, -64, 100}) {
    ExpectError([&] { MatMulColumnChunks(x, 2, w, chunk, DotActivations::kFloat32, ignore); },
                {"chunk_columns", std::to_string(chunk).c_str(), "positive multiple of 64"});
  }
  ExpectError([&] { MatMulColumnChunks(x, 3, w, 64, DotActivations::kFloat32, ignore); }, {"x.size()", "16", "m * k"});
  ExpectError([&] { MatMulColumnChunks(x, -1, w, 64, DotActivations::kFloat32, ignore); }, {"m", "-1", "at least 0"});
}

}  // namespace
}  // namespace posenc
