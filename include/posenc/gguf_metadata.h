// GGUF key/value metadata as a typed map. The GGUF file reader fills it; the
// RoPE configuration reads `{arch}.rope.*` keys from it.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace posenc {

// All integer types widen to int64, both float types to double.
using GgufValue = std::variant<bool, std::int64_t, double, std::string, std::vector<std::int64_t>,
                               std::vector<double>, std::vector<std::string>>;
using GgufMetadata = std::map<std::string, GgufValue, std::less<>>;

}  // namespace posenc
