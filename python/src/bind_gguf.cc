// Bindings for the GGUF reader (posenc/gguf.h): open a file, read its
// metadata and tensor list, dequantize a tensor to float32; and for the
// writer (posenc/gguf_writer.h), one typed method per value type. Thin on
// purpose: python/posenc/gguf.py gives them their Python interface (NumPy
// shape order, value types from Python types, docstrings).
//
// A bad file is a posenc::Error ("path: [gguf] what = value: rule"), which
// pybind11 turns into ValueError.
//
// Strings in a GGUF file are bytes that should be UTF-8 (llama.cpp does not
// check). A metadata value that is not UTF-8 comes back as `bytes` (the file
// stays readable, nothing is lost); a key or tensor name that is not UTF-8 is
// an error, since keys and names are looked up by str.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "bindings.h"
#include "posenc/error.h"
#include "posenc/gguf.h"
#include "posenc/gguf_writer.h"

namespace py = pybind11;

namespace posenc::python {
namespace {

// `bytes` as a Python str, or nullopt with the offset of the first byte
// that is not part of valid UTF-8 in `*bad_offset`.
std::optional<py::str> DecodeUtf8(std::string_view bytes, py::ssize_t* bad_offset) {
  PyObject* text = PyUnicode_DecodeUTF8(bytes.data(), static_cast<py::ssize_t>(bytes.size()), "strict");
  if (text != nullptr) return py::reinterpret_steal<py::str>(text);
  const py::error_already_set error;  // fetches (and clears) the UnicodeDecodeError
  if (!error.matches(PyExc_UnicodeDecodeError) || PyUnicodeDecodeError_GetStart(error.value().ptr(), bad_offset) != 0) {
    PyErr_Clear();
    *bad_offset = 0;
  }
  return std::nullopt;
}

// A key or tensor name as str; not UTF-8 is an error naming the bytes
// (undecodable ones as \xNN) and where the first bad one is.
py::str RequireUtf8(std::string_view bytes, const std::string& path, std::string_view what) {
  py::ssize_t offset = 0;
  if (auto text = DecodeUtf8(bytes, &offset)) return *text;
  const std::string shown =
      py::reinterpret_steal<py::str>(
          PyUnicode_DecodeUTF8(bytes.data(), static_cast<py::ssize_t>(bytes.size()), "backslashreplace"))
          .cast<std::string>();
  try {
    ThrowError("gguf", what, QuoteForMessage(shown),
               "is not valid UTF-8 (invalid byte at offset " + std::to_string(offset) + ")");
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
}

// A metadata string value: str, or bytes when it is not UTF-8.
py::object StringValue(const std::string& bytes) {
  py::ssize_t offset = 0;
  if (auto text = DecodeUtf8(bytes, &offset)) return std::move(*text);
  return py::bytes(bytes);
}

// One metadata value as a Python object: bool, int, float, str (bytes if not
// UTF-8) or a list of them (every integer type widens to int, f32 and f64 to
// float).
py::object ToPython(const GgufValue& value) {
  return std::visit(
      [](const auto& v) -> py::object {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::string>) {
          return StringValue(v);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          py::list items(v.size());
          for (std::size_t i = 0; i < v.size(); ++i) items[i] = StringValue(v[i]);
          return std::move(items);
        } else {
          return py::cast(v);
        }
      },
      value);
}

// `path` names the file in errors.
py::dict Metadata(const GgufFile& file, const std::string& path) {
  py::dict out;
  for (const auto& [key, value] : file.metadata()) out[RequireUtf8(key, path, "metadata key")] = ToPython(value);
  return out;
}

// (name, shape in ggml order, type name) per tensor, in file order.
py::list Tensors(const GgufFile& file, const std::string& path) {
  py::list out;
  for (const GgufTensorInfo& t : file.tensors()) {
    py::tuple shape(t.shape.size());
    for (std::size_t i = 0; i < t.shape.size(); ++i) shape[i] = py::int_(t.shape[i]);
    out.append(py::make_tuple(RequireUtf8(t.name, path, "tensor name"), shape, std::string(TraitsOf(t.type).name)));
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
    DequantizeRow(t.type, t.data.data(), data, t.Elements(), t.name);
  }
  return out;
}

// A scalar adder returning nothing (the C++ methods return the writer for
// chaining; bound as is, pybind11 would copy it on every call).
template <class T, GgufWriter& (GgufWriter::*Add)(std::string_view, T)>
void AddScalar(GgufWriter& writer, const std::string& key, T value) {
  (writer.*Add)(key, value);
}

template <class T>
std::span<const T> Items(const py::array_t<T, py::array::c_style>& items) {
  return {items.data(), static_cast<std::size_t>(items.size())};
}

// The writer's methods, bound one per value type (python/posenc/gguf.py
// chooses them from the Python types). Arrays arrive as contiguous NumPy
// arrays of exactly the item type: the Python side converts and checks them.
// The adds keep the GIL (they copy a few bytes, and a writer is not for two
// threads at once); Write, which only reads the writer, releases it.
void BindGgufWriter(py::module_& m) {
  using Writer = GgufWriter;
  py::class_<Writer>(m, "GgufWriter", "posenc::GgufWriter (used by posenc.write_gguf)")
      .def(py::init<std::uint32_t>(), py::arg("alignment"))
      .def("add_string", &AddScalar<std::string_view, &Writer::AddString>)
      .def("add_bool", &AddScalar<bool, &Writer::AddBool>)
      .def("add_uint32", &AddScalar<std::uint32_t, &Writer::AddUint32>)
      .def("add_int32", &AddScalar<std::int32_t, &Writer::AddInt32>)
      .def("add_int64", &AddScalar<std::int64_t, &Writer::AddInt64>)
      .def("add_float32", &AddScalar<float, &Writer::AddFloat32>)
      .def("add_float64", &AddScalar<double, &Writer::AddFloat64>)
      .def("add_string_array", [](Writer& w, const std::string& key,
                                  const std::vector<std::string>& items) { w.AddStringArray(key, items); })
      .def("add_int32_array",
           [](Writer& w, const std::string& key, const py::array_t<std::int32_t, py::array::c_style>& items) {
             w.AddInt32Array(key, Items(items));
           })
      .def("add_int64_array",
           [](Writer& w, const std::string& key, const py::array_t<std::int64_t, py::array::c_style>& items) {
             w.AddInt64Array(key, Items(items));
           })
      .def("add_float32_array",
           [](Writer& w, const std::string& key, const py::array_t<float, py::array::c_style>& items) {
             w.AddFloat32Array(key, Items(items));
           })
      // `shape` in ggml order; `data` a contiguous float32 array (copied).
      .def("add_tensor",
           [](Writer& w, const std::string& name, const std::vector<std::int64_t>& shape,
              const py::array_t<float, py::array::c_style>& data) { w.AddTensor(name, shape, Items(data)); })
      .def(
          "write",
          [](const Writer& w, const std::string& path) {
            py::gil_scoped_release release;
            w.Write(path);
          },
          py::arg("path"));
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
      .def("metadata", &Metadata, py::arg("path"), "Metadata as a dict; `path` names the file in errors.")
      .def("tensors", &Tensors, py::arg("path"),
           "(name, ggml shape, type) per tensor; `path` names the file in errors.")
      .def("dequantize", &Dequantize, py::arg("name"));
  BindGgufWriter(m);
}

}  // namespace posenc::python
