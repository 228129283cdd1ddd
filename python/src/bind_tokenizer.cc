// Bindings for the tokenizer of a GGUF file (posenc/tokenizer.h: byte-level
// or SentencePiece BPE): posenc.tokenizer.BpeTokenizer.from_gguf(path),
// encode, decode.
//
// Text crosses as Python str (UTF-8 on the C++ side); ids as lists of int
// from encode, and to decode as an int32 array (python/posenc/tokenizer.py
// checks the ids fit int32; the tokenizer checks the vocabulary range).
// decode gives str with undecodable bytes (a sequence cut inside a
// character) as U+FFFD, like Hugging Face; decode_bytes gives the raw bytes.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bindings.h"
#include "posenc/error.h"
#include "posenc/gguf.h"
#include "posenc/tokenizer.h"

namespace py = pybind11;

namespace posenc::python {
namespace {

using IdArray = py::array_t<std::int32_t, py::array::c_style | py::array::forcecast>;

std::span<const std::int32_t> Ids(const IdArray& ids) { return {ids.data(), static_cast<std::size_t>(ids.size())}; }

// The vocabulary string of `id` as str (what token() documents). GGUF strings
// are UTF-8 by the format, but a file may hold other bytes: an error quoting
// them (as \xNN), not Python's UnicodeDecodeError.
py::str TokenText(const BpeTokenizer& t, std::int32_t id) {
  const std::string& bytes = t.token(id);
  if (PyObject* text = PyUnicode_DecodeUTF8(bytes.data(), static_cast<py::ssize_t>(bytes.size()), "strict")) {
    return py::reinterpret_steal<py::str>(text);
  }
  PyErr_Clear();
  const auto shown = py::reinterpret_steal<py::str>(
      PyUnicode_DecodeUTF8(bytes.data(), static_cast<py::ssize_t>(bytes.size()), "backslashreplace"));
  ThrowError("tokenizer", "token(" + std::to_string(id) + ")", QuoteForMessage(shown.cast<std::string>()),
             "is not valid UTF-8, as a GGUF string must be (the file's vocabulary holds other bytes)");
}

}  // namespace

void BindTokenizer(py::module_& m) {
  py::class_<BpeTokenizer>(m, "BpeTokenizer",
                           "BPE tokenizer built from a GGUF file's tokenizer.ggml.* metadata: byte-level "
                           "(\"gpt2\", token ids identical to Hugging Face tokenizers) or SentencePiece "
                           "(\"llama\", token ids identical to Google's SentencePiece)")
      .def_static(
          "from_gguf",
          [](const std::string& path) {
            py::gil_scoped_release release;
            return BpeTokenizer::FromGguf(GgufFile::Open(path).metadata());
          },
          py::arg("path"), "Reads the tokenizer of a GGUF model file.")
      .def(
          "encode",
          [](const BpeTokenizer& t, std::string_view text) {
            py::gil_scoped_release release;  // `text` points into the Python str, kept alive by the call
            return t.Encode(text);
          },
          py::arg("text"), "Token ids of `text` (special tokens matched, no BOS/EOS added).")
      .def(
          "decode",
          [](const BpeTokenizer& t, const IdArray& ids) {
            const std::string bytes = t.Decode(Ids(ids));
            return py::reinterpret_steal<py::str>(
                PyUnicode_DecodeUTF8(bytes.data(), static_cast<py::ssize_t>(bytes.size()), "replace"));
          },
          py::arg("ids"), "The text of `ids` (bytes that are not UTF-8 become U+FFFD).")
      .def(
          "decode_bytes", [](const BpeTokenizer& t, const IdArray& ids) { return py::bytes(t.Decode(Ids(ids))); },
          py::arg("ids"))
      .def_property_readonly("vocab_size", &BpeTokenizer::vocab_size)
      .def_property_readonly("model", [](const BpeTokenizer& t) { return std::string(TokenizerModelName(t.model())); })
      .def_property_readonly("pre_tokenizer",
                             [](const BpeTokenizer& t) -> std::optional<std::string> {
                               if (!t.pre_tokenizer()) return std::nullopt;
                               return std::string(PreTokenizerName(*t.pre_tokenizer()));
                             })
      .def("token", &TokenText, py::arg("id"))
      .def("token_id", &BpeTokenizer::TokenId, py::arg("token"))
      .def("is_special", &BpeTokenizer::IsSpecial, py::arg("id"))
      .def_property_readonly("bos_id", &BpeTokenizer::bos_id)
      .def_property_readonly("eos_id", &BpeTokenizer::eos_id)
      .def_property_readonly("unknown_id", &BpeTokenizer::unknown_id)
      .def_property_readonly("padding_id", &BpeTokenizer::padding_id)
      .def_property_readonly("add_bos", &BpeTokenizer::add_bos);
}

}  // namespace posenc::python
