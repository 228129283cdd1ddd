// Element access by dtype for the reference implementations (slow and plain).
#pragma once

#include <cstdint>
#include <cstring>

#include "posenc/dtype.h"
#include "posenc/tensor.h"

namespace posenc::reference {

inline double ReadElement(const ConstTensorView& view, std::int64_t index) {
  switch (view.dtype) {
    case DType::kF32: return static_cast<const float*>(view.data)[index];
    case DType::kF16: return F16ToF32(static_cast<const std::uint16_t*>(view.data)[index]);
    case DType::kBF16: return BF16ToF32(static_cast<const std::uint16_t*>(view.data)[index]);
  }
  return 0;
}

// Rounds once from double to the tensor's dtype (float32 first for the
// half types; double->f32->f16 can double-round, below the kernels' tolerance).
inline void WriteElement(const TensorView& view, std::int64_t index, double value) {
  const float f = static_cast<float>(value);
  switch (view.dtype) {
    case DType::kF32: static_cast<float*>(view.data)[index] = f; break;
    case DType::kF16: static_cast<std::uint16_t*>(view.data)[index] = F32ToF16(f); break;
    case DType::kBF16: static_cast<std::uint16_t*>(view.data)[index] = F32ToBF16(f); break;
  }
}

inline void CopyElement(const ConstTensorView& from, std::int64_t from_index, const TensorView& to,
                        std::int64_t to_index) {
  const std::size_t size = DTypeSize(from.dtype);
  std::memmove(static_cast<char*>(to.data) + to_index * size, static_cast<const char*>(from.data) + from_index * size,
               size);
}

}  // namespace posenc::reference
