// libFuzzer target for the GGUF reader: any bytes must parse or raise
// posenc::Error — never crash, hang or read out of bounds (run under ASan).
// Built by the `fuzz` preset (clang); ./scripts/test runs it for a while.
#include <cstddef>
#include <cstdint>
#include <span>

#include "posenc/error.h"
#include "posenc/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto file = posenc::GgufFile::Parse(std::as_bytes(std::span(data, size)));
    for (const auto& tensor : file.tensors()) {
      if (tensor.Elements() <= (1 << 16) && posenc::TraitsOf(tensor.type).dequantizable) {
        (void)file.Dequantize(tensor);
      }
    }
  } catch (const posenc::Error&) {
  }
  return 0;
}
