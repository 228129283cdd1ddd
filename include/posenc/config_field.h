// One field of a config, as every format that reads or writes it sees it:
// the field lists of the trainable position schemes (position_scheme.h) and
// of the context-extension methods (context_extension.h) are made of these.
// A struct's VisitFields(self, visitor) calls visitor(ConfigField, member&)
// for each of its fields in a fixed order; parsing, formatting, validation,
// checkpoints, grid files and flags are each one loop over that list.
#pragma once

#include <cmath>
#include <limits>
#include <string_view>

#include "posenc/error.h"

namespace posenc {

// Its key (GGUF metadata "posenc-tiny-lm.<key>", the JSON member, the key of
// a text form such as "yarn:factor=4"), its command-line flag ("" for none)
// and a line of help. An optional field was added after files were written
// without it: a reader that finds no key keeps the field's default. A
// field with a rule refuses values below `minimum` and values that are not
// finite (RequireFieldRule).
struct ConfigField {
  std::string_view key;
  std::string_view flag;
  std::string_view help;
  bool optional = false;
  double minimum = -std::numeric_limits<double>::infinity();
  std::string_view rule;  // "must be >= 1 (...)": the message of a value out of range
};

// Throws posenc::Error "[op] key = value: rule" unless `value` is finite and
// at least the field's minimum.
template <class T>
void RequireFieldRule(std::string_view op, const ConfigField& field, const T& value) {
  const auto number = static_cast<double>(value);
  Require(std::isfinite(number) && number >= field.minimum, op, field.key, value, field.rule);
}

}  // namespace posenc
