// The 6-bit scales and mins of the Q4_K / Q5_K super-block: shared by the
// exact dequantization (ggml_types.cc) and the SIMD kernels that read the
// blocks in registers (kernels/weight_blocks-inl.h).
#pragma once

#include <cstdint>

namespace posenc {

// Scale and min of sub-block j (< 8) from the 12 packed bytes: the first
// four sub-blocks use the low 6 bits of bytes 0..7; the last four take 4
// bits from bytes 8..11 and 2 high bits from bytes 0..7.
inline void ScaleMinK4(int j, const std::uint8_t* packed, int& scale, int& min) {
  if (j < 4) {
    scale = packed[j] & 63;
    min = packed[j + 4] & 63;
  } else {
    scale = (packed[j + 4] & 0x0F) | ((packed[j - 4] >> 6) << 4);
    min = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
  }
}

}  // namespace posenc
