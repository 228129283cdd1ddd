#include "posenc/error.h"

#include <cstdio>

namespace posenc {

std::string EscapeControlBytes(std::string_view text) {
  std::string escaped;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      char escape[5];
      std::snprintf(escape, sizeof(escape), "\\x%02x", byte);
      escaped += escape;
    } else {
      escaped += c;
    }
  }
  return escaped;
}

std::string QuoteForMessage(std::string_view text) {
  std::string quoted(1, '"');
  quoted += EscapeControlBytes(text);
  quoted += '"';
  return quoted;
}

void ThrowError(std::string_view op, std::string_view parameter, const std::string& value, std::string_view rule) {
  std::string message;
  message.append("[").append(op).append("] ").append(EscapeControlBytes(parameter)).append(" = ").append(value);
  message.append(": ").append(rule);
  throw Error(message);
}

}  // namespace posenc
