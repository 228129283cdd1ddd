#include "args.h"

#include <algorithm>

#include "posenc/error.h"
#include "posenc/rope_config.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace posenc::python {
namespace {

// A function of posenc._args, the package's one argument checker: its rules
// and messages are written there once, for the Python functions and these.
py::object Checker(const char* function) { return py::module_::import("posenc._args").attr(function); }

}  // namespace

std::string TypeName(const py::handle& value) { return py::type::of(value).attr("__name__").cast<std::string>(); }
std::string Repr(const py::handle& value) { return py::repr(value).cast<std::string>(); }

std::int64_t ToInt(std::string_view op, const std::string& name, const py::handle& value) {
  return Checker("integer")(op, name, value).cast<std::int64_t>();
}

double ToFloat(std::string_view op, const std::string& name, const py::handle& value) {
  return Checker("number")(op, name, value).cast<double>();
}

bool ToBool(std::string_view op, const std::string& name, const py::handle& value) {
  return Checker("boolean")(op, name, value).cast<bool>();
}

RopeSpec ToRopeSpec(std::string_view op, const py::handle& value) {
  if (!py::isinstance<RopeModelConfig>(value)) ThrowError(op, "spec", TypeName(value), "must be a posenc.RopeSpec");
  return value.cast<const RopeModelConfig&>().spec;
}

py::array ToArray(const py::handle& value) { return py::array(py::reinterpret_borrow<py::object>(value)); }

Int64Array ToInt64Array(std::string_view op, const std::string& name, const py::handle& value,
                        std::string_view dtype_rule) {
  return Int64Array(Checker("int64_array")(op, name, value, "dtype_rule"_a = dtype_rule));
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
