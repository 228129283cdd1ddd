// Shared test helpers: random tensors of any dtype, element access, and a
// loop over every SIMD target compiled into the library that this CPU runs.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "hwy/targets.h"
#include "posenc/dtype.h"
#include "posenc/error.h"
#include "posenc/tensor.h"

namespace posenc::testing {

// Runs `body` once per compiled and supported Highway target (AVX2, SSE4,
// EMU128 ... here; AVX-512 or NEON elsewhere), with dispatch forced to it.
template <class Body>
void ForEachTarget(Body&& body) {
  for (const std::int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    body();
  }
  hwy::SetSupportedTargetsForTest(0);
}

// Owns the bytes of a tensor of any dtype.
struct Buffer {
  DType dtype;
  std::vector<unsigned char> bytes;

  Buffer(DType dtype, std::int64_t elements)
      : dtype(dtype), bytes(static_cast<std::size_t>(elements) * DTypeSize(dtype)) {}
  std::int64_t size() const { return static_cast<std::int64_t>(bytes.size() / DTypeSize(dtype)); }

  double Get(std::int64_t i) const {
    if (dtype == DType::kF32) {
      float f;
      std::memcpy(&f, bytes.data() + 4 * i, 4);
      return f;
    }
    std::uint16_t h;
    std::memcpy(&h, bytes.data() + 2 * i, 2);
    return dtype == DType::kF16 ? F16ToF32(h) : BF16ToF32(h);
  }
  void Set(std::int64_t i, double value) {
    const auto f = static_cast<float>(value);
    if (dtype == DType::kF32) {
      std::memcpy(bytes.data() + 4 * i, &f, 4);
      return;
    }
    const std::uint16_t h = dtype == DType::kF16 ? F32ToF16(f) : F32ToBF16(f);
    std::memcpy(bytes.data() + 2 * i, &h, 2);
  }
  void FillUniform(std::uint32_t seed, double low = -1.0, double high = 1.0) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> dist(low, high);
    for (std::int64_t i = 0; i < size(); ++i) Set(i, dist(rng));
  }
  TensorView View(std::array<std::int64_t, 4> shape) { return TensorView::Contiguous(bytes.data(), dtype, shape); }
};

// count floats drawn uniformly from [-scale, scale).
inline std::vector<float> UniformFloats(std::int64_t count, std::uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(static_cast<std::size_t>(count));
  for (float& f : v) f = dist(rng);
  return v;
}

// Expects posenc::Error whose message contains every fragment.
template <class F>
void ExpectError(F&& f, std::initializer_list<const char*> fragments) {
  try {
    f();
    ADD_FAILURE() << "expected posenc::Error";
  } catch (const Error& e) {
    for (const char* fragment : fragments) EXPECT_THAT(e.what(), ::testing::HasSubstr(fragment));
  }
}

// One unit in the last place of `value` stored as `dtype` (its spacing).
inline double UnitInLastPlace(DType dtype, double value) {
  const int mantissa_bits = dtype == DType::kF32 ? 23 : dtype == DType::kF16 ? 10 : 7;
  const double magnitude = std::max(std::abs(value), dtype == DType::kF16 ? 6.1e-5 : 1.2e-38);
  return std::ldexp(1.0, std::ilogb(magnitude) - mantissa_bits);
}

}  // namespace posenc::testing
