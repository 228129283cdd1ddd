// GGUF key/value metadata as a typed map, and the one set of typed reads
// every reader of it uses (the RoPE configuration, the Llama hyperparameters,
// the tokenizer). Errors name the reader, the key and the rule:
//   "[llama] llama.block_count = 2.5: must be a whole number >= 1".
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace posenc {

// All integer types widen to int64, both float types to double.
using GgufValue = std::variant<bool, std::int64_t, double, std::string, std::vector<std::int64_t>, std::vector<double>,
                               std::vector<std::string>>;
using GgufMetadata = std::map<std::string, GgufValue, std::less<>>;

// The value of `key` as T (one of GgufValue's alternatives): nullptr when
// absent, an Error "must be <type>" when present with another type.
template <class T>
const T* GgufFind(const GgufMetadata& metadata, std::string_view key, std::string_view op);

// Any number (integer or float): nullopt when absent.
std::optional<double> GgufNumber(const GgufMetadata& metadata, std::string_view key, std::string_view op);
// A whole number >= low: an integer exactly (an error prints it as stored,
// 9223372036854775807 included), a float below 2^53 (where every whole
// double is exact). nullopt when absent.
std::optional<std::int64_t> GgufWholeNumber(const GgufMetadata& metadata, std::string_view key, std::string_view op,
                                            std::int64_t low);
// A whole number >= 1 (counts, lengths): nullopt when absent.
std::optional<std::int64_t> GgufCount(const GgufMetadata& metadata, std::string_view key, std::string_view op);
std::optional<std::string> GgufString(const GgufMetadata& metadata, std::string_view key, std::string_view op);

// The same, present or an Error "missing: <why>".
double RequireGgufNumber(const GgufMetadata& metadata, std::string_view key, std::string_view op, std::string_view why);
std::int64_t RequireGgufWholeNumber(const GgufMetadata& metadata, std::string_view key, std::string_view op,
                                    std::int64_t low, std::string_view why);
std::int64_t RequireGgufCount(const GgufMetadata& metadata, std::string_view key, std::string_view op,
                              std::string_view why);
template <class T>
const T& RequireGgufValue(const GgufMetadata& metadata, std::string_view key, std::string_view op,
                          std::string_view why);

}  // namespace posenc
