// The packed sub-block scales of the K-quant super-blocks: shared by the
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

// Q3_K's signed 6-bit scale of sub-block j (0..15), stored + 32 in 12 bytes:
// the low 4 bits are nibble j / 8 of byte j % 8, the high 2 bits are bits
// 2 (j / 4)..2 (j / 4) + 1 of byte 8 + j % 4.
inline int ScaleK3(int j, const std::uint8_t* packed) {
  const int low = (packed[j % 8] >> (4 * (j / 8))) & 0x0F;
  const int high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (low | (high << 4)) - 32;
}

}  // namespace posenc
