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

// Binary16: the compiler's _Float16 conversions are IEEE round-to-nearest-even.
float F16ToF32(std::uint16_t bits) { return static_cast<float>(std::bit_cast<_Float16>(bits)); }

std::uint16_t F32ToF16(float value) {
  return std::bit_cast<std::uint16_t>(static_cast<_Float16>(value));
}

}  // namespace posenc
