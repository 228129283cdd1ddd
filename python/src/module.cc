// posenc._posenc: the compiled half of the `posenc` Python package. The value
// classes (RopeSpec, the attention encodings, PasskeyPrompt: bindings.h says
// why), attention and apply_rope are bound with their Python signatures and
// docstrings, which python/posenc/*.py re-export; for the rest, the pythonic
// API (docstrings, NumPy conveniences) is in python/posenc/*.py and this
// module exposes the library. Arguments are checked by posenc._args, from
// Python and from C++ (args.h).
#include <pybind11/pybind11.h>

#include <cstring>
#include <exception>

#include "bindings.h"
#include "posenc/error.h"

PYBIND11_MODULE(_posenc, m) {
  m.doc() = "posenc C++ core (use the `posenc` package, not this module directly)";
  // posenc::Error is a ValueError (pybind11 would do that for any
  // std::invalid_argument), with a message that is always a valid str: a
  // message quoting bytes from a file (a key or string that is not UTF-8)
  // shows them as \xNN instead of turning the error into a UnicodeDecodeError.
  pybind11::register_exception_translator([](std::exception_ptr error) {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const posenc::Error& e) {
      PyObject* message =
          PyUnicode_DecodeUTF8(e.what(), static_cast<Py_ssize_t>(std::strlen(e.what())), "backslashreplace");
      if (message == nullptr) return;  // out of memory: that error is set instead
      PyErr_SetObject(PyExc_ValueError, message);
      Py_DECREF(message);
    }
  });
  posenc::python::BindRopeSpec(m);
  posenc::python::BindRope(m);
  posenc::python::BindEncodings(m);
  posenc::python::BindAttention(m);
  posenc::python::BindGguf(m);
  posenc::python::BindTokenizer(m);
  posenc::python::BindAnalysis(m);
  posenc::python::BindModel(m);
  posenc::python::BindSchemes(m);
}
