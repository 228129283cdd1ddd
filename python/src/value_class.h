// The package's value classes (posenc.RopeSpec, the attention encodings,
// posenc.PasskeyPrompt): bound here in C++, each described once by its
// fields, from which one mechanism makes repr, ==, hash and pickling.
//
// A field is an attribute of the class. Its role says what it takes part in:
//   kArgument   a constructor keyword: pickled (the copy is the class called
//               with these keywords) and compared by == and hash
//   kAttribute  a writable attribute set after construction: pickled, not
//               compared (RopeSpec.max_position_embeddings)
//   kDerived    computed from the others: shown in repr only
// and its repr part is "name=repr(value)" unless the field says otherwise
// (positional, left out when None, a custom text, hidden).
#pragma once

#include <pybind11/pybind11.h>

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace posenc::python {

enum class FieldRole { kArgument, kAttribute, kDerived };

struct Field {
  std::string name;
  FieldRole role = FieldRole::kArgument;
  // The field's part of repr, from the object; nullopt leaves it out.
  std::function<std::optional<std::string>(const pybind11::object& self)> shown;
};

// "name=repr(value)".
Field Keyword(const std::string& name, FieldRole role = FieldRole::kArgument);
// "repr(value)", for a first argument that names itself (a RopeSpec).
Field Positional(const std::string& name);
// "name=repr(value)", left out when the value is None.
Field KeywordUnlessNone(const std::string& name);
// Not shown in repr (tables too large to print).
Field Hidden(const std::string& name, FieldRole role = FieldRole::kArgument);
// A custom repr part (nullopt: left out).
Field Shown(const std::string& name, FieldRole role,
            std::function<std::optional<std::string>(const pybind11::object& self)> shown);

// Adds __repr__, __eq__, __hash__ and __reduce__ made from `fields` to `cls`,
// and sets its __module__ (where the package exports it, so that pickles
// name it there).
void DefValueMethods(pybind11::handle cls, const char* module, std::vector<Field> fields);

// py::class_<T, Extra...>(m, name, doc) as a value class of `module`.
template <class T, class... Extra>
pybind11::class_<T, Extra...> ValueClass(pybind11::module_& m, const char* module, const char* name,
                                         std::vector<Field> fields, const char* doc) {
  pybind11::class_<T, Extra...> cls(m, name, doc);
  DefValueMethods(cls, module, std::move(fields));
  return cls;
}

}  // namespace posenc::python
