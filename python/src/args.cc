#include "args.h"

#include <pybind11/gil_safe_call_once.h>

#include <algorithm>

#include "posenc/error.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace posenc::python {
namespace {

const py::module_& Numpy() {
  PYBIND11_CONSTINIT static py::gil_safe_call_once_and_store<py::module_> storage;
  return storage.call_once_and_store_result([] { return py::module_::import("numpy"); }).get_stored();
}

bool IsNumpyBool(const py::handle& value) { return py::isinstance(value, Numpy().attr("bool_")); }

}  // namespace

std::string TypeName(const py::handle& value) { return py::type::of(value).attr("__name__").cast<std::string>(); }
std::string Repr(const py::handle& value) { return py::repr(value).cast<std::string>(); }

std::int64_t ToInt(std::string_view op, const std::string& name, const py::handle& value) {
  const auto index = py::reinterpret_steal<py::object>(PyNumber_Index(value.ptr()));
  if (!index) {
    PyErr_Clear();
    ThrowError(op, name, Repr(value), "must be an integer");
  }
  int overflow = 0;
  const long long n = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow != 0) ThrowError(op, name, py::str(index).cast<std::string>(), kInt64Rule);
  if (n == -1 && PyErr_Occurred()) throw py::error_already_set();
  return n;
}

double ToFloat(std::string_view op, const std::string& name, const py::handle& value) {
  const bool number = PyLong_Check(value.ptr()) || PyFloat_Check(value.ptr()) ||
                      py::isinstance(value, Numpy().attr("integer")) || py::isinstance(value, Numpy().attr("floating"));
  if (PyBool_Check(value.ptr()) || IsNumpyBool(value) || !number) ThrowError(op, name, Repr(value), "must be a number");
  const double x = PyFloat_AsDouble(value.ptr());  // an int beyond double: OverflowError, as float(x)
  if (x == -1.0 && PyErr_Occurred()) throw py::error_already_set();
  return x;
}

bool ToBool(std::string_view op, const std::string& name, const py::handle& value) {
  if (!PyBool_Check(value.ptr()) && !IsNumpyBool(value)) ThrowError(op, name, Repr(value), "must be True or False");
  return py::bool_(py::reinterpret_borrow<py::object>(value));
}

RopeSpec ToRopeSpec(std::string_view op, const py::handle& value) {
  if (!py::isinstance(value, py::module_::import("posenc.rope").attr("RopeSpec"))) {
    ThrowError(op, "spec", TypeName(value), "must be a posenc.RopeSpec");
  }
  return value.attr("_spec").cast<RopeSpec>();
}

py::array ToArray(const py::handle& value) { return py::array(py::reinterpret_borrow<py::object>(value)); }

Int64Array ToInt64Array(std::string_view op, const std::string& name, const py::handle& value,
                        std::string_view dtype_rule) {
  const py::object array =
      py::module_::import("posenc._args").attr("int64_array")(op, name, value, "dtype_rule"_a = dtype_rule);
  return Int64Array(array);
}

DoubleArray ReadOnlyCopy(const py::handle& value) {
  const DoubleArray converted(py::reinterpret_borrow<py::object>(value));
  DoubleArray copy(std::vector<py::ssize_t>(converted.shape(), converted.shape() + converted.ndim()));
  std::copy_n(converted.data(), converted.size(), copy.mutable_data());
  copy.attr("setflags")("write"_a = false);
  return copy;
}

std::string ShapeOf(const py::array& array) { return py::str(array.attr("shape")).cast<std::string>(); }

}  // namespace posenc::python
