// The tiny model's SIMD kernels (src/train/tiny_lm_kernels.h) against the
// formulas in double, on every SIMD target this CPU runs, with row widths
// around the vector sizes (tails), negative strides and rows that alias
// nothing but sit in one buffer, as the attention's do.
#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>
#include <vector>

#include "test_util.h"
#include "train/tiny_lm_kernels.h"

namespace posenc::tiny_lm {
namespace {

std::vector<float> Uniform(std::size_t n, std::uint32_t seed, float low, float high) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(low, high);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

double GeluTanh(double x) { return std::tanh(std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x)); }

TEST(TinyLmKernels, GeluForwardAndBackward) {
  testing::ForEachTarget([] {
    for (const std::int64_t n : {1, 7, 16, 37, 1000}) {
      const std::vector<float> u = Uniform(static_cast<std::size_t>(n), 1, -9.0f, 9.0f);
      const std::vector<float> da = Uniform(u.size(), 2, -1.0f, 1.0f);
      std::vector<float> a(u.size()), du(u.size());
      GeluForwardKernel(u.data(), a.data(), n);
      GeluBackwardKernel(u.data(), da.data(), du.data(), n);
      const double k = std::sqrt(2.0 / std::numbers::pi);
      for (std::int64_t e = 0; e < n; ++e) {
        const double x = u[e], t = GeluTanh(x);
        const double slope = 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
        EXPECT_NEAR(a[e], 0.5 * x * (1 + t), 2e-6 * (1 + std::abs(x))) << "n " << n << " x " << x;
        EXPECT_NEAR(du[e], da[e] * slope, 2e-6) << "n " << n << " x " << x;
      }
    }
  });
}

TEST(TinyLmKernels, RowsForwardAndBackward) {
  testing::ForEachTarget([] {
    for (const std::int64_t n : {1, 5, 8, 16, 32, 33, 70}) {
      for (const std::int64_t stride : {n, 3 * n + 1, -n}) {
        SCOPED_TRACE(::testing::Message() << "n " << n << " stride " << stride);
        const std::int64_t count = 9;
        const std::int64_t span = (count - 1) * std::abs(stride) + n;
        std::vector<float> buffer = Uniform(static_cast<std::size_t>(span), 3, -1.0f, 1.0f);
        // Row 0 at the start, or at the end for a negative stride.
        const std::int64_t first = stride < 0 ? (count - 1) * -stride : 0;
        const auto row = [&](std::int64_t j) { return buffer.data() + first + j * stride; };
        const std::vector<float> x = Uniform(static_cast<std::size_t>(n), 4, -1.0f, 1.0f);
        const std::vector<float> w = Uniform(static_cast<std::size_t>(count), 5, -1.0f, 1.0f);

        std::vector<float> dots(static_cast<std::size_t>(count));
        DotRows(x.data(), row(0), stride, count, n, dots.data());
        for (std::int64_t j = 0; j < count; ++j) {
          double expected = 0;
          for (std::int64_t e = 0; e < n; ++e) expected += static_cast<double>(x[e]) * row(j)[e];
          EXPECT_NEAR(dots[j], expected, 1e-5) << "dot " << j;
        }

        std::vector<float> out = Uniform(static_cast<std::size_t>(n), 6, -1.0f, 1.0f);
        const std::vector<float> out_before = out;
        AddWeightedRows(w.data(), row(0), stride, count, n, out.data());
        for (std::int64_t e = 0; e < n; ++e) {
          double expected = out_before[e];
          for (std::int64_t j = 0; j < count; ++j) expected += static_cast<double>(w[j]) * row(j)[e];
          EXPECT_NEAR(out[e], expected, 1e-5) << "weighted " << e;
        }

        const std::vector<float> before = buffer;
        AddScaledToRows(x.data(), w.data(), row(0), stride, count, n);
        for (std::int64_t j = 0; j < count; ++j) {
          for (std::int64_t e = 0; e < n; ++e) {
            const std::int64_t at = first + j * stride + e;
            EXPECT_NEAR(buffer[at], before[at] + static_cast<double>(w[j]) * x[e], 1e-6) << "scaled " << j;
          }
        }
        // Only the rows changed (stride > n leaves gaps between them).
        if (stride > n) {
          EXPECT_EQ(buffer[n], before[n]);
        }
      }
    }
  });
}

}  // namespace
}  // namespace posenc::tiny_lm
