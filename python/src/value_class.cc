#include "value_class.h"

#include <pybind11/numpy.h>

#include <memory>

#include "args.h"

namespace py = pybind11;

namespace posenc::python {
namespace {

using Fields = std::shared_ptr<const std::vector<Field>>;

// A field's value in a form that == and hash can use: arrays by dtype, shape
// and bytes (an array's own == is elementwise), dicts as sorted items, lists
// and tuples as tuples of those.
py::object Frozen(const py::handle& value) {
  if (py::isinstance<py::array>(value)) {
    const auto array = py::reinterpret_borrow<py::array>(value);
    return py::make_tuple(py::str(array.dtype()), array.attr("shape"), array.attr("tobytes")());
  }
  if (py::isinstance<py::dict>(value)) {
    py::list items;
    for (const auto& [key, item] : py::reinterpret_borrow<py::dict>(value)) {
      items.append(py::make_tuple(key, Frozen(item)));
    }
    items.attr("sort")();  // by key: keys are unique, so items never compare their values
    return py::tuple(items);
  }
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    py::list items;
    for (const py::handle item : value) items.append(Frozen(item));
    return py::tuple(items);
  }
  return py::reinterpret_borrow<py::object>(value);
}

// What == and hash compare: the constructor arguments.
py::tuple Key(const py::object& self, const std::vector<Field>& fields) {
  py::list key;
  for (const Field& field : fields) {
    if (field.role == FieldRole::kArgument) key.append(Frozen(self.attr(field.name.c_str())));
  }
  return py::tuple(key);
}

std::string ValueRepr(const py::object& self, const std::vector<Field>& fields) {
  std::string parts;
  for (const Field& field : fields) {
    if (const std::optional<std::string> part = field.shown(self)) parts += (parts.empty() ? "" : ", ") + *part;
  }
  return py::type::of(self).attr("__name__").cast<std::string>() + "(" + parts + ")";
}

py::object Equal(const py::object& self, const py::object& other, const std::vector<Field>& fields) {
  if (!py::type::of(other).is(py::type::of(self))) return py::reinterpret_borrow<py::object>(Py_NotImplemented);
  return py::bool_(Key(self, fields).equal(Key(other, fields)));
}

// (functools.partial(type, **arguments), (), (None, attributes)): unpickling
// calls the class with its arguments, then sets the attributes (pickle's
// setattr for a state of (None, dict)).
py::tuple Reduce(const py::object& self, const std::vector<Field>& fields) {
  py::dict arguments, attributes;
  for (const Field& field : fields) {
    if (field.role == FieldRole::kArgument) arguments[field.name.c_str()] = self.attr(field.name.c_str());
    if (field.role == FieldRole::kAttribute) attributes[field.name.c_str()] = self.attr(field.name.c_str());
  }
  const py::object rebuild = py::module_::import("functools").attr("partial")(py::type::of(self), **arguments);
  return py::make_tuple(rebuild, py::tuple(), py::make_tuple(py::none(), attributes));
}

template <class Function>
void DefMethod(py::handle cls, const char* name, Function&& function) {
  py::setattr(cls, name, py::cpp_function(std::forward<Function>(function), py::name(name), py::is_method(cls)));
}

}  // namespace

Field Keyword(const std::string& name, FieldRole role) {
  return {name, role, [name](const py::object& self) { return name + "=" + python::Repr(self.attr(name.c_str())); }};
}

Field Positional(const std::string& name) {
  return {name, FieldRole::kArgument, [name](const py::object& self) { return python::Repr(self.attr(name.c_str())); }};
}

Field KeywordUnlessNone(const std::string& name) {
  return {name, FieldRole::kArgument, [name](const py::object& self) -> std::optional<std::string> {
            const py::object value = self.attr(name.c_str());
            if (value.is_none()) return std::nullopt;
            return name + "=" + python::Repr(value);
          }};
}

Field Hidden(const std::string& name, FieldRole role) {
  return {name, role, [](const py::object&) -> std::optional<std::string> { return std::nullopt; }};
}

Field Shown(const std::string& name, FieldRole role,
            std::function<std::optional<std::string>(const py::object& self)> shown) {
  return {name, role, std::move(shown)};
}

void DefValueMethods(py::handle cls, const char* module, std::vector<Field> fields) {
  const Fields shared = std::make_shared<const std::vector<Field>>(std::move(fields));
  py::setattr(cls, "__module__", py::str(module));
  DefMethod(cls, "__repr__", [shared](const py::object& self) { return ValueRepr(self, *shared); });
  DefMethod(cls, "__eq__",
            [shared](const py::object& self, const py::object& other) { return Equal(self, other, *shared); });
  DefMethod(cls, "__hash__", [shared](const py::object& self) { return py::hash(Key(self, *shared)); });
  DefMethod(cls, "__reduce__", [shared](const py::object& self) { return Reduce(self, *shared); });
}

}  // namespace posenc::python
