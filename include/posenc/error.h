// Errors for invalid arguments. Every check in posenc throws posenc::Error with
// a message that names the operation, the parameter, its value and the rule:
//   "[rope] rotary_dim = 63: must be even"
// Python sees it as ValueError (it derives from std::invalid_argument).
#pragma once

#include <charconv>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

namespace posenc {

class Error : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// A value printed as is: a JSON fragment, or a word such as missing or null.
struct Verbatim {
  std::string text;
};

// `text` with control bytes (NUL included) and DEL written as \xNN. Names and
// strings read from files reach messages this way, so that a NUL cannot cut
// a message short and no raw control byte reaches a terminal.
std::string EscapeControlBytes(std::string_view text);
// The same in double quotes: how messages print string values.
std::string QuoteForMessage(std::string_view text);

// Formats any streamable value the way messages print it (floating point in
// the shortest form that round-trips, strings quoted, Verbatim as is).
template <class T>
std::string FormatValue(const T& value) {
  std::ostringstream out;
  if constexpr (std::is_same_v<T, Verbatim>) {
    return value.text;
  } else if constexpr (std::is_floating_point_v<T>) {
    char buffer[32];
    const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
    return std::string(buffer, result.ptr);
  } else if constexpr (std::is_convertible_v<const T&, std::string_view>) {
    return QuoteForMessage(value);
  } else {
    out << value;
  }
  return out.str();
}

[[noreturn]] void ThrowError(std::string_view op, std::string_view parameter, const std::string& value,
                             std::string_view rule);

// Throws unless `ok`: "[op] parameter = value: rule".
template <class T>
void Require(bool ok, std::string_view op, std::string_view parameter, const T& value, std::string_view rule) {
  if (!ok) ThrowError(op, parameter, FormatValue(value), rule);
}

// `part` itself, or what it returns when it is a function of no arguments.
template <class Part>
decltype(auto) MessagePart(const Part& part) {
  if constexpr (std::is_invocable_v<const Part&>) {
    return part();
  } else {
    return (part);
  }
}

// Whether any of a check's message parts is given as a function.
template <class... Parts>
inline constexpr bool kAnyPartBuiltLazily = (std::is_invocable_v<const Parts&> || ...);

// The same check with any of the parameter, the value and the rule given as
// a function that builds it, called only when the check fails: on a path
// that runs at every decode step ("tokens[" + i + "]", a rule with numbers),
// building messages that are thrown away costs more than the check.
//   Require(ok, "matmul", "x.size()", x.size(), [&] { return "must be " + std::to_string(n); });
template <class Parameter, class T, class Rule, std::enable_if_t<kAnyPartBuiltLazily<Parameter, T, Rule>, int> = 0>
void Require(bool ok, std::string_view op, const Parameter& parameter, const T& value, const Rule& rule) {
  if (!ok) ThrowError(op, MessagePart(parameter), FormatValue(MessagePart(value)), MessagePart(rule));
}

}  // namespace posenc
