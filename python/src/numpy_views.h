// NumPy arrays as posenc tensor views, shared by every binding family:
// element type (float32, float16, ml_dtypes.bfloat16) and element strides.
// Errors use the library's "[op] parameter = value: rule" form.
#pragma once

#include <pybind11/numpy.h>

#include <string>
#include <string_view>

#include "posenc/dtype.h"
#include "posenc/tensor.h"

namespace posenc::python {

// ml_dtypes' bfloat16 as a NumPy dtype (imported on first use).
const pybind11::dtype& BFloat16DType();

// The posenc dtype of an array; throws for anything but f32, f16, bf16.
DType DTypeOf(const pybind11::array& a, std::string_view op, const std::string& name);

// A 4-D view with element strides; only the last axis must be contiguous
// (inputs may be slices of a fused projection). `layout` names the axes in
// the ndim message, e.g. "[batch, seq, heads, head_dim]". An empty array
// gets contiguous strides (NumPy may report any). `writeable` requires an
// array that can hold a result.
TensorView ArrayView(const pybind11::array& a, std::string_view op, const std::string& name, std::string_view layout,
                     bool writeable);

}  // namespace posenc::python
