// Arguments that a binding converts itself, so that a bad value is a
// posenc::Error naming the parameter ("[attention] window = 2.5: must be an
// integer", "[attention] q_offset = 9223372036854775808: must fit in a signed
// 64-bit integer") and not pybind11's TypeError listing the signatures.
//
// A parameter declared as Int, Float, Bool, Str, ArrayLike, SpecArg (any Arg<Name>)
// accepts any Python object and shows as Name::text in signatures (int,
// float, bool, ...); the function converts arg.object with To*(op, name, ...),
// which call posenc._args (python/posenc/_args.py), the package's one
// argument checker: the Python functions and the bindings share its rules and
// messages.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "posenc/rope_spec.h"

namespace posenc::python {

// A Python argument as given; Name::text is its type in signatures.
template <class Name>
struct Arg {
  pybind11::object object;
};

struct IntName {
  static constexpr auto text = pybind11::detail::const_name("int");
};
struct FloatName {
  static constexpr auto text = pybind11::detail::const_name("float");
};
struct BoolName {
  static constexpr auto text = pybind11::detail::const_name("bool");
};
struct StrName {
  static constexpr auto text = pybind11::detail::const_name("str");
};
struct ArrayLikeName {
  static constexpr auto text = pybind11::detail::const_name("numpy.typing.ArrayLike");
};
struct RopeSpecName {
  static constexpr auto text = pybind11::detail::const_name("posenc.RopeSpec");
};

using Int = Arg<IntName>;              // a Python int or NumPy integer (anything with __index__)
using Float = Arg<FloatName>;          // an int or float (NumPy's too), never a bool
using Bool = Arg<BoolName>;            // True or False (numpy.bool_ too)
using Str = Arg<StrName>;              // a str, checked against the parameter's words
using ArrayLike = Arg<ArrayLikeName>;  // anything np.asarray takes
using SpecArg = Arg<RopeSpecName>;     // a posenc.RopeSpec

using Int64Array = pybind11::array_t<std::int64_t, pybind11::array::c_style | pybind11::array::forcecast>;
using DoubleArray = pybind11::array_t<double, pybind11::array::c_style | pybind11::array::forcecast>;

// posenc._args.integer, number and boolean.
std::int64_t ToInt(std::string_view op, const std::string& name, const pybind11::handle& value);
double ToFloat(std::string_view op, const std::string& name, const pybind11::handle& value);
bool ToBool(std::string_view op, const std::string& name, const pybind11::handle& value);

// The posenc::RopeSpec of a posenc.RopeSpec (a posenc::RopeModelConfig,
// bind_rope_spec.cc); anything else is "[op] spec = dict: must be a posenc.RopeSpec".
RopeSpec ToRopeSpec(std::string_view op, const pybind11::handle& value);

// np.asarray(value), with NumPy's own error for what it cannot convert.
pybind11::array ToArray(const pybind11::handle& value);

// An integer array-like (nested lists, NumPy arrays of any integer type) as
// C-contiguous int64, by posenc._args.int64_array: an int beyond int64 is
// named by its index ("[attention] q_positions[0, 1] = 2**63: must fit ..."),
// a float dtype is "[op] name.dtype = float64: dtype_rule".
Int64Array ToInt64Array(std::string_view op, const std::string& name, const pybind11::handle& value,
                        std::string_view dtype_rule);

// A read-only C-contiguous float64 copy of an array-like (the tables an
// encoding object keeps: later writes to the caller's array do not reach it).
DoubleArray ReadOnlyCopy(const pybind11::handle& value);

// An array's shape as Python prints it: (2, 3), (5,), ().
std::string ShapeOf(const pybind11::array& array);

// type(value).__name__ and repr(value), for messages.
std::string TypeName(const pybind11::handle& value);
std::string Repr(const pybind11::handle& value);

}  // namespace posenc::python

namespace pybind11::detail {

// Arg<Name> loads any object (the function converts it) and names Name::text.
template <class Name>
struct type_caster<posenc::python::Arg<Name>> {
  PYBIND11_TYPE_CASTER(posenc::python::Arg<Name>, Name::text);
  bool load(handle source, bool /*convert*/) {
    value.object = reinterpret_borrow<object>(source);
    return true;
  }
  static handle cast(const posenc::python::Arg<Name>& arg, return_value_policy, handle) { return arg.object.inc_ref(); }
};

}  // namespace pybind11::detail
