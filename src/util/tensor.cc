#include "posenc/tensor.h"

#include "posenc/error.h"

namespace posenc {

bool IsWellFormed(const ConstTensorView& view) {
  const bool empty = view.shape[0] * view.shape[1] * view.shape[2] * view.shape[3] == 0;
  return view.shape[0] >= 0 && view.shape[1] >= 0 && view.shape[2] >= 0 && view.shape[3] >= 0 &&
         (empty || view.data != nullptr) && view.strides[3] == 1;
}

void ValidateView(const ConstTensorView& view, const char* op, const char* name) {
  // The common case without building any message (decode calls this per token).
  if (IsWellFormed(view)) return;
  const bool empty = view.shape[0] * view.shape[1] * view.shape[2] * view.shape[3] == 0;
  const std::string param(name);
  for (int axis = 0; axis < 4; ++axis) {
    Require(view.shape[axis] >= 0, op, param + ".shape[" + std::to_string(axis) + "]", view.shape[axis],
            "must not be negative");
  }
  Require(empty || view.data != nullptr, op, param + ".data", Verbatim{"null"}, "must point to the elements");
  Require(view.strides[3] == 1, op, param + ".strides[3]", view.strides[3], "head_dim must be contiguous (stride 1)");
}

}  // namespace posenc
