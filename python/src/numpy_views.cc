#include "numpy_views.h"

#include "posenc/error.h"

namespace py = pybind11;

namespace posenc::python {

const py::dtype& BFloat16DType() {
  PYBIND11_CONSTINIT static py::gil_safe_call_once_and_store<py::dtype> storage;
  return storage
      .call_once_and_store_result(
          [] { return py::dtype::from_args(py::module_::import("ml_dtypes").attr("bfloat16")); })
      .get_stored();
}

DType DTypeOf(const py::array& a, std::string_view op, const std::string& name) {
  const py::dtype dt = a.dtype();
  if (dt.equal(py::dtype::of<float>())) return DType::kF32;
  if (dt.kind() == 'f' && dt.itemsize() == 2) return DType::kF16;
  if (dt.itemsize() == 2 && dt.kind() == 'V' && dt.equal(BFloat16DType())) return DType::kBF16;
  ThrowError(op, name + ".dtype", FormatValue(py::str(static_cast<const py::handle&>(dt)).cast<std::string>()),
             "must be float32, float16 or bfloat16 (ml_dtypes.bfloat16)");
}

TensorView ArrayView(const py::array& a, std::string_view op, const std::string& name, std::string_view layout,
                     bool writeable) {
  Require(a.ndim() == 4, op, name + ".ndim", a.ndim(), "must be 4 (" + std::string(layout) + ")");
  TensorView view;
  view.dtype = DTypeOf(a, op, name);
  const auto itemsize = static_cast<std::int64_t>(a.itemsize());
  for (int axis = 0; axis < 4; ++axis) {
    view.shape[axis] = a.shape(axis);
    const auto bytes = static_cast<std::int64_t>(a.strides(axis));
    Require(bytes % itemsize == 0, op, name + ".strides[" + std::to_string(axis) + "]", bytes,
            "must be a multiple of the item size " + std::to_string(itemsize) + " bytes");
    view.strides[axis] = bytes / itemsize;
  }
  if (view.shape[3] <= 1) view.strides[3] = 1;  // a single element is contiguous
  if (a.size() == 0) view.strides = TensorView::Contiguous(nullptr, view.dtype, view.shape).strides;
  Require(view.strides[3] == 1, op, name + ".strides[3]", view.strides[3],
          "the last axis must be contiguous (stride 1 element); pass np.ascontiguousarray(x)");
  if (writeable && !a.writeable()) ThrowError(op, name, "read-only", "must be a writeable array to hold the result");
  view.data = const_cast<void*>(a.data());
  return view;
}

}  // namespace posenc::python
