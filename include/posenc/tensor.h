// Non-owning strided views of 4-D tensors [batch, seq, heads, head_dim].
// Strides are in elements; the last dimension must be contiguous (stride 1)
// so that kernels can load whole vectors along head_dim.
#pragma once

#include <array>
#include <cstdint>

#include "posenc/dtype.h"

namespace posenc {

template <class Pointer>
struct BasicTensorView {
  Pointer data = nullptr;
  DType dtype = DType::kF32;
  std::array<std::int64_t, 4> shape{};    // [batch, seq, heads, head_dim]
  std::array<std::int64_t, 4> strides{};  // elements; strides[3] == 1

  static BasicTensorView Contiguous(Pointer data, DType dtype, std::array<std::int64_t, 4> shape) {
    return {data, dtype, shape, {shape[1] * shape[2] * shape[3], shape[2] * shape[3], shape[3], 1}};
  }
  std::int64_t batch() const { return shape[0]; }
  std::int64_t seq() const { return shape[1]; }
  std::int64_t heads() const { return shape[2]; }
  std::int64_t head_dim() const { return shape[3]; }
  std::int64_t Offset(std::int64_t b, std::int64_t s, std::int64_t h) const {
    return b * strides[0] + s * strides[1] + h * strides[2];
  }
  // A mutable view converts to a read-only one.
  operator BasicTensorView<const void*>() const  // NOLINT(google-explicit-constructor)
      requires(!std::is_same_v<Pointer, const void*>) {
    return {data, dtype, shape, strides};
  }
};

using TensorView = BasicTensorView<void*>;
using ConstTensorView = BasicTensorView<const void*>;

// Whether the view is well formed: non-negative shape, data unless empty,
// unit last stride.
bool IsWellFormed(const ConstTensorView& view);
// Throws posenc::Error naming `op` and `name` unless IsWellFormed(view).
void ValidateView(const ConstTensorView& view, const char* op, const char* name);

}  // namespace posenc
