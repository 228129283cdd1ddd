#include "posenc/tensor.h"

#include "posenc/error.h"

namespace posenc {

void ValidateView(const ConstTensorView& view, const char* op, const char* name) {
  const std::string param(name);
  for (int axis = 0; axis < 4; ++axis) {
    Require(view.shape[axis] >= 0, op, param + ".shape[" + std::to_string(axis) + "]",
            view.shape[axis], "must not be negative");
  }
  const bool empty = view.shape[0] * view.shape[1] * view.shape[2] * view.shape[3] == 0;
  Require(empty || view.data != nullptr, op, param + ".data", Verbatim{"null"}, "must point to the elements");
  Require(view.strides[3] == 1, op, param + ".strides[3]", view.strides[3],
          "head_dim must be contiguous (stride 1)");
}

}  // namespace posenc
