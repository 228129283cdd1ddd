// The fast matmul against the double-precision reference on every compiled
// SIMD target, over a grid of shapes that hits every m tail (rows not a
// multiple of the tile), n tail (partial panels) and short k; bitwise
// identical results for 1, 2 and 3 threads; argument errors.
// (Suite "matmul", lowercase, so that `ctest -R matmul` selects it.)
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "posenc/matmul.h"
#include "posenc/parallel.h"
#include "test_util.h"

namespace posenc {
namespace {

using testing::ExpectError;
using testing::ForEachTarget;

std::vector<float> Random(std::int64_t count, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(count));
  for (float& f : v) f = dist(rng);
  return v;
}

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
      const std::vector<float> w = Random(n * k, static_cast<std::uint32_t>(1000 * n + k));
      for (const std::int64_t m : {0, 1, 2, 5, 6, 7, 13, 31, 64, 97}) {
        SCOPED_TRACE("m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k));
        const std::vector<float> x = Random(m * k, static_cast<std::uint32_t>(7 * m + k));
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
  const std::vector<float> x = Random(m * k, 1), w = Random(n * k, 2);
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
  const std::vector<float> x = Random(m * k, 3), w = Random(n * k, 4);
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
