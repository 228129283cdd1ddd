// Bindings for the GGUF reader (posenc/gguf.h): open a file, read its
// metadata and tensor list, dequantize a tensor to float32. Thin on purpose:
// python/posenc/gguf.py gives the class its Python interface (NumPy shape
// order, docstrings).
//
// A bad file is a posenc::Error ("path: [gguf] what = value: rule"), which
// pybind11 turns into ValueError.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "bindings.h"
#include "posenc/gguf.h"

namespace py = pybind11;

namespace posenc::python {
namespace {

// One metadata value as a Python object: bool, int, float, str or a list of
// them (every integer type widens to int, f32 and f64 to float).
py::object ToPython(const GgufValue& value) {
  return std::visit([](const auto& v) -> py::object { return py::cast(v); }, value);
}

py::dict Metadata(const GgufFile& file) {
  py::dict out;
  for (const auto& [key, value] : file.metadata()) out[py::str(key)] = ToPython(value);
  return out;
}

// (name, shape in ggml order, type name) per tensor, in file order.
py::list Tensors(const GgufFile& file) {
  py::list out;
  for (const GgufTensorInfo& t : file.tensors()) {
    py::tuple shape(t.shape.size());
    for (std::size_t i = 0; i < t.shape.size(); ++i) shape[i] = py::int_(t.shape[i]);
    out.append(py::make_tuple(t.name, shape, std::string(TraitsOf(t.type).name)));
  }
  return out;
}

// All values of one tensor as float32 in NumPy order: the ggml shape
// reversed, so that a matrix of `rows` rows of `cols` values (ggml shape
// {cols, rows}) comes back as [rows, cols] (what gguf-py's reader gives).
py::array_t<float> Dequantize(const GgufFile& file, const std::string& name) {
  const GgufTensorInfo& t = file.Tensor(name);
  std::vector<py::ssize_t> shape(t.shape.rbegin(), t.shape.rend());
  py::array_t<float> out(shape);
  float* data = out.mutable_data();
  {
    py::gil_scoped_release release;  // `file` (and its mapping) is held by the Python object
    DequantizeRow(t.type, t.data.data(), data, t.Elements());
  }
  return out;
}

}  // namespace

void BindGguf(py::module_& m) {
  py::class_<GgufFile>(m, "GgufFile", "posenc::GgufFile (wrapped by posenc.GgufFile)")
      .def(py::init([](const std::string& path) {
             py::gil_scoped_release release;
             return GgufFile::Open(path);
           }),
           py::arg("path"))
      .def_property_readonly("version", &GgufFile::version)
      .def_property_readonly("alignment", &GgufFile::alignment)
      .def("metadata", &Metadata)
      .def("tensors", &Tensors)
      .def("dequantize", &Dequantize, py::arg("name"));
}

}  // namespace posenc::python
