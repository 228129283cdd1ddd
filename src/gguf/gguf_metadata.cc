#include "posenc/gguf_metadata.h"

#include <cmath>
#include <string>

#include "posenc/error.h"

namespace posenc {
namespace {

template <class T>
constexpr const char* TypeName() {
  if constexpr (std::is_same_v<T, bool>) return "a bool";
  if constexpr (std::is_same_v<T, std::int64_t>) return "an integer";
  if constexpr (std::is_same_v<T, double>) return "a float";
  if constexpr (std::is_same_v<T, std::string>) return "a string";
  if constexpr (std::is_same_v<T, std::vector<std::int64_t>>) return "a list of integers";
  if constexpr (std::is_same_v<T, std::vector<double>>) return "a list of floats";
  if constexpr (std::is_same_v<T, std::vector<std::string>>) return "a list of strings";
}

[[noreturn]] void Missing(std::string_view key, std::string_view op, std::string_view why) {
  ThrowError(op, key, "missing", why);
}

}  // namespace

template <class T>
const T* GgufFind(const GgufMetadata& metadata, std::string_view key, std::string_view op) {
  const auto it = metadata.find(key);
  if (it == metadata.end()) return nullptr;
  const T* value = std::get_if<T>(&it->second);
  Require(value != nullptr, op, key, Verbatim{"a value of another type"}, std::string("must be ") + TypeName<T>());
  return value;
}

std::optional<double> GgufNumber(const GgufMetadata& metadata, std::string_view key, std::string_view op) {
  const auto it = metadata.find(key);
  if (it == metadata.end()) return std::nullopt;
  if (const auto* i = std::get_if<std::int64_t>(&it->second)) return static_cast<double>(*i);
  if (const auto* d = std::get_if<double>(&it->second)) return *d;
  ThrowError(op, key, "non-numeric", "must be a number");
}

std::optional<std::int64_t> GgufWholeNumber(const GgufMetadata& metadata, std::string_view key, std::string_view op,
                                            std::int64_t low) {
  const std::string rule = "must be a whole number >= " + std::to_string(low);
  const auto it = metadata.find(key);
  if (it != metadata.end()) {
    if (const auto* exact = std::get_if<std::int64_t>(&it->second)) {
      Require(*exact >= low, op, key, *exact, rule);
      return *exact;
    }
  }
  const auto value = GgufNumber(metadata, key, op);
  if (!value) return std::nullopt;
  // Below 2^53 every whole double is exact; no count comes near it.
  Require(*value >= static_cast<double>(low) && *value == std::floor(*value) && *value < 9007199254740992.0, op, key,
          *value, rule);
  return static_cast<std::int64_t>(*value);
}

std::optional<std::int64_t> GgufCount(const GgufMetadata& metadata, std::string_view key, std::string_view op) {
  return GgufWholeNumber(metadata, key, op, 1);
}

std::optional<std::string> GgufString(const GgufMetadata& metadata, std::string_view key, std::string_view op) {
  const std::string* value = GgufFind<std::string>(metadata, key, op);
  if (value == nullptr) return std::nullopt;
  return *value;
}

double RequireGgufNumber(const GgufMetadata& metadata, std::string_view key, std::string_view op,
                         std::string_view why) {
  const auto value = GgufNumber(metadata, key, op);
  if (!value) Missing(key, op, why);
  return *value;
}

std::int64_t RequireGgufWholeNumber(const GgufMetadata& metadata, std::string_view key, std::string_view op,
                                    std::int64_t low, std::string_view why) {
  const auto value = GgufWholeNumber(metadata, key, op, low);
  if (!value) Missing(key, op, why);
  return *value;
}

std::int64_t RequireGgufCount(const GgufMetadata& metadata, std::string_view key, std::string_view op,
                              std::string_view why) {
  return RequireGgufWholeNumber(metadata, key, op, 1, why);
}

template <class T>
const T& RequireGgufValue(const GgufMetadata& metadata, std::string_view key, std::string_view op,
                          std::string_view why) {
  const T* value = GgufFind<T>(metadata, key, op);
  if (value == nullptr) Missing(key, op, why);
  return *value;
}

#define POSENC_GGUF_TYPE(T)                                                               \
  template const T* GgufFind<T>(const GgufMetadata&, std::string_view, std::string_view); \
  template const T& RequireGgufValue<T>(const GgufMetadata&, std::string_view, std::string_view, std::string_view);
POSENC_GGUF_TYPE(bool)
POSENC_GGUF_TYPE(std::int64_t)
POSENC_GGUF_TYPE(double)
POSENC_GGUF_TYPE(std::string)
POSENC_GGUF_TYPE(std::vector<std::int64_t>)
POSENC_GGUF_TYPE(std::vector<double>)
POSENC_GGUF_TYPE(std::vector<std::string>)
#undef POSENC_GGUF_TYPE

}  // namespace posenc
