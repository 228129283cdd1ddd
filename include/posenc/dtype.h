// Element types of tensors. Computation is always float32 (angles float64);
// f16 and bf16 are storage formats only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace posenc {

enum class DType { kF32, kF16, kBF16 };

std::string_view DTypeName(DType dtype);
// Parses "f32"/"float32", "f16"/"float16", "bf16"/"bfloat16".
DType ParseDType(std::string_view name);
std::size_t DTypeSize(DType dtype);

// Scalar conversions with IEEE round-to-nearest-even (NaN stays NaN).
float F16ToF32(std::uint16_t bits);
std::uint16_t F32ToF16(float value);
float BF16ToF32(std::uint16_t bits);
std::uint16_t F32ToBF16(float value);

}  // namespace posenc
