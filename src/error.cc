#include "posenc/error.h"

namespace posenc {

void ThrowError(std::string_view op, std::string_view parameter, const std::string& value,
                std::string_view rule) {
  std::string message;
  message.append("[").append(op).append("] ").append(parameter).append(" = ").append(value);
  message.append(": ").append(rule);
  throw Error(message);
}

}  // namespace posenc
