// posenc._posenc: the compiled half of the `posenc` Python package. The
// pythonic API (argument parsing, docstrings, NumPy conveniences) is in
// python/posenc/*.py; this module only exposes the C++ library.
#include <pybind11/pybind11.h>

#include "bindings.h"

PYBIND11_MODULE(_posenc, m) {
  m.doc() = "posenc C++ core (use the `posenc` package, not this module directly)";
  posenc::python::BindRope(m);
  posenc::python::BindEncodings(m);
  posenc::python::BindAttention(m);
  posenc::python::BindGguf(m);
  posenc::python::BindTokenizer(m);
  posenc::python::BindAnalysis(m);
  posenc::python::BindModel(m);
}
