#include "posenc/dtype.h"

#include <bit>
#include <cmath>
#include <string>

#include "posenc/error.h"

namespace posenc {

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
  }
  return "?";
}

DType ParseDType(std::string_view name) {
  if (name == "f32" || name == "float32") return DType::kF32;
  if (name == "f16" || name == "float16") return DType::kF16;
  if (name == "bf16" || name == "bfloat16") return DType::kBF16;
  ThrowError("dtype", "dtype", FormatValue(name), "must be one of f32, f16, bf16");
}

std::size_t DTypeSize(DType dtype) { return dtype == DType::kF32 ? 4 : 2; }

float BF16ToF32(std::uint16_t bits) { return std::bit_cast<float>(std::uint32_t{bits} << 16); }

std::uint16_t F32ToBF16(float value) {
  const auto bits = std::bit_cast<std::uint32_t>(value);
  if (std::isnan(value)) return static_cast<std::uint16_t>((bits >> 16) | 0x40);  // stay NaN
  // Round to nearest, ties to even: add 0x7FFF plus the lowest kept bit.
  const std::uint32_t rounded = bits + 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(rounded >> 16);
}

// Binary16 conversions by bits (portable: not every compiler has _Float16).
float F16ToF32(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1Fu;
  const std::uint32_t mantissa = bits & 0x3FFu;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

std::uint16_t F32ToF16(float value) {
  const auto bits = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return sign | 0x7E00u | ((magnitude >> 13) & 0x3FFu);  // NaN stays NaN
  if (magnitude >= 0x477FF000u) return sign | 0x7C00u;                                // >= 65520 rounds to infinity
  if (magnitude < 0x38800000u) {
    // Below 2^-14: a subnormal half, in units of 2^-24. Scaling by 2^24 is
    // exact; nearbyint rounds to nearest, ties to even.
    const float units = std::bit_cast<float>(magnitude) * 16777216.0f;
    return sign | static_cast<std::uint16_t>(std::nearbyint(units));
  }
  const std::uint32_t exponent = (magnitude >> 23) - 112;
  std::uint32_t half = (exponent << 10) | ((magnitude >> 13) & 0x3FFu);
  const std::uint32_t dropped = magnitude & 0x1FFFu;
  if (dropped > 0x1000u || (dropped == 0x1000u && (half & 1u))) ++half;  // may carry into the exponent
  return sign | static_cast<std::uint16_t>(half);
}

}  // namespace posenc
