// posenc::model::GatedRow (the MLP's gated unit, elementwise) against the
// activations computed in float64 from their definitions, on every target,
// beside its one-at-a-time reference.
#include "model/gated_row.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "test_util.h"

namespace posenc::model {
namespace {

using testing::ForEachTarget;

// SiLU g / (1 + e^-g); GELU's tanh form 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))) (PyTorch's
// gelu(approximate="tanh")); in float64.
double Exact(double g, GateActivation activation) {
  if (activation == GateActivation::kSilu) return g / (1 + std::exp(-g));
  return 0.5 * g * (1 + std::tanh(std::sqrt(2 / M_PI) * (g + 0.044715 * g * g * g)));
}

std::vector<float> Uniform(std::int64_t n, float low, float high, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(low, high);
  std::vector<float> x(static_cast<std::size_t>(n));
  for (float& v : x) v = uniform(rng);
  return x;
}

TEST(GatedRow, EqualsTheFloat64ActivationsOnEveryTarget) {
  for (const GateActivation activation : {GateActivation::kSilu, GateActivation::kGeluTanh}) {
    for (const std::int64_t n : {1, 3, 4, 7, 8, 9, 15, 16, 17, 33, 1536}) {
      for (const float range : {1.0f, 8.0f, 120.0f}) {
        const std::vector<float> gate = Uniform(n, -range, range, 1), up = Uniform(n, -2, 2, 2);
        SCOPED_TRACE("n=" + std::to_string(n) + " range=" + std::to_string(range) +
                     (activation == GateActivation::kSilu ? " silu" : " gelu"));
        const auto check = [&](const std::vector<float>& out) {
          for (std::size_t j = 0; j < out.size(); ++j) {
            const double exact = Exact(gate[j], activation) * up[j];
            // A few float roundings of the activation, and GELU's 1 + tanh
            // losing digits where tanh nears -1: relative 2e-6, and 2e-7
            // of |g| absolute.
            EXPECT_NEAR(out[j], exact, 2e-6 * std::abs(exact) + 2e-7 * std::abs(gate[j]) * std::abs(up[j])) << j;
          }
        };
        std::vector<float> out(gate.size());
        GatedRowReference(gate.data(), up.data(), n, activation, out.data());
        check(out);
        ForEachTarget([&] {
          std::vector<float> fast(gate.size(), std::nanf(""));
          GatedRow(gate.data(), up.data(), n, activation, fast.data());
          check(fast);
        });
      }
    }
  }
}

// An element's result is the same wherever a run of the row starts and
// ends (the threads' runs depend on the thread count).
TEST(GatedRow, AnElementDoesNotDependOnItsRun) {
  const std::int64_t n = 61;
  const std::vector<float> gate = Uniform(n, -6, 6, 3), up = Uniform(n, -2, 2, 4);
  for (const GateActivation activation : {GateActivation::kSilu, GateActivation::kGeluTanh}) {
    ForEachTarget([&] {
      std::vector<float> whole(gate.size()), pieces(gate.size());
      GatedRow(gate.data(), up.data(), n, activation, whole.data());
      for (std::int64_t begin = 0, size = 1; begin < n; begin += size, size += 2) {
        const std::int64_t length = std::min(size, n - begin);
        GatedRow(gate.data() + begin, up.data() + begin, length, activation, pieces.data() + begin);
      }
      EXPECT_EQ(whole, pieces);
    });
  }
}

TEST(GatedRow, ANanGateGivesNan) {
  for (const GateActivation activation : {GateActivation::kSilu, GateActivation::kGeluTanh}) {
    for (const std::int64_t n : {1, 8, 13, 32}) {
      std::vector<float> gate = Uniform(n, -3, 3, 5), up = Uniform(n, -2, 2, 6);
      gate[static_cast<std::size_t>(n - 1)] = std::numeric_limits<float>::quiet_NaN();
      ForEachTarget([&] {
        std::vector<float> out(gate.size());
        GatedRow(gate.data(), up.data(), n, activation, out.data());
        EXPECT_TRUE(std::isnan(out.back())) << n;
      });
    }
  }
}

}  // namespace
}  // namespace posenc::model
