// The plain matmul: y[i, j] = sum_kk x[i, kk] W[j, kk], summed in double.
// Readable on purpose; the fast kernel in matmul/matmul-inl.h is tested
// against it.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "posenc/error.h"
#include "posenc/matmul.h"

namespace posenc::reference {

void MatMul(std::span<const float> x, std::int64_t m, std::span<const float> w, std::int64_t n, std::int64_t k,
            std::span<float> y) {
  Require(n >= 1, "matmul", "n", n, "must be at least 1");
  Require(k >= 1, "matmul", "k", k, "must be at least 1");
  Require(m >= 0, "matmul", "m", m, "must be at least 0");
  Require(static_cast<std::int64_t>(w.size()) == n * k, "matmul", "w.size()", w.size(),
          "must be n * k = " + std::to_string(n) + " * " + std::to_string(k));
  Require(static_cast<std::int64_t>(x.size()) == m * k, "matmul", "x.size()", x.size(),
          "must be m * k = " + std::to_string(m) + " * " + std::to_string(k));
  Require(static_cast<std::int64_t>(y.size()) == m * n, "matmul", "y.size()", y.size(),
          "must be m * n = " + std::to_string(m) + " * " + std::to_string(n));
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (std::int64_t kk = 0; kk < k; ++kk) {
        sum += static_cast<double>(x[static_cast<std::size_t>(i * k + kk)]) *
               static_cast<double>(w[static_cast<std::size_t>(j * k + kk)]);
      }
      y[static_cast<std::size_t>(i * n + j)] = static_cast<float>(sum);
    }
  }
}

std::vector<float> Int8Activations(std::span<const float> x) {
  constexpr std::size_t kBlock = 32;
  Require(x.size() % kBlock == 0, "int8 activations", "x.size()", x.size(), "must be a multiple of 32");
  std::vector<float> out(x.size());
  for (std::size_t b = 0; b < x.size(); b += kBlock) {
    float largest = 0.0f;
    for (std::size_t l = b; l < b + kBlock; ++l) largest = std::max(largest, std::fabs(x[l]));
    const float d = largest / 127.0f;
    const float inverse = d == 0.0f ? 0.0f : 1.0f / d;
    for (std::size_t l = b; l < b + kBlock; ++l) out[l] = d * std::nearbyint(x[l] * inverse);
  }
  return out;
}

}  // namespace posenc::reference
