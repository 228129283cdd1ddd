// Random GGUF rows of any type posenc reads, for tests of code that reads
// blocks as stored: random block bytes with finite f16 scales where the
// format has them, sized so that the weights are of magnitude about `scale`
// (the scale divided by the typical |code| times sub-block scale, with a
// random sign), random element values of magnitude up to `scale` otherwise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "posenc/dtype.h"
#include "posenc/gguf.h"

namespace posenc::testing {

inline std::vector<std::byte> RandomBlocks(GgmlType type, std::int64_t rows, std::int64_t k, std::uint32_t seed,
                                           float scale = 0.5f) {
  const GgmlTypeTraits& traits = TraitsOf(type);
  const std::int64_t blocks = rows * k / traits.block_elements;
  std::vector<std::byte> bytes(static_cast<std::size_t>(blocks * traits.block_bytes));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const auto put16 = [&](std::size_t at, std::uint16_t bits) { std::memcpy(bytes.data() + at, &bits, 2); };
  if (traits.block_elements == 1) {
    for (std::int64_t i = 0; i < blocks; ++i) {
      const float v = scale * dist(rng);
      const auto at = static_cast<std::size_t>(i * traits.block_bytes);
      if (type == GgmlType::kF32) std::memcpy(bytes.data() + at, &v, 4);
      if (type == GgmlType::kF16) put16(at, F32ToF16(v));
      if (type == GgmlType::kBF16) put16(at, F32ToBF16(v));
    }
    return bytes;
  }
  for (std::byte& b : bytes) b = static_cast<std::byte>(rng() & 0xFF);
  // Offsets of the f16 scales in a block.
  std::vector<std::size_t> scales{0};
  if (type == GgmlType::kQ4_1 || type == GgmlType::kQ5_1 || type == GgmlType::kQ4_K || type == GgmlType::kQ5_K) {
    scales.push_back(2);
  }
  if (type == GgmlType::kQ6_K) scales = {208};
  if (type == GgmlType::kQ2_K) scales = {80, 82};
  if (type == GgmlType::kQ3_K) scales = {108};
  float typical_code = 8;  // 4-bit codes
  if (type == GgmlType::kQ5_0 || type == GgmlType::kQ5_1) typical_code = 16;
  if (type == GgmlType::kQ8_0) typical_code = 64;
  if (type == GgmlType::kQ2_K) typical_code = 2 * 8;   // times 4-bit sub-block scales
  if (type == GgmlType::kQ3_K) typical_code = 4 * 32;  // times signed 6-bit sub-block scales
  if (type == GgmlType::kQ4_K) typical_code = 8 * 32;  // times 6-bit sub-block scales
  if (type == GgmlType::kQ5_K) typical_code = 16 * 32;
  if (type == GgmlType::kQ6_K) typical_code = 32 * 64;  // times signed 8-bit sub-block scales
  for (std::int64_t b = 0; b < blocks; ++b) {
    for (const std::size_t at : scales) {
      put16(static_cast<std::size_t>(b * traits.block_bytes) + at, F32ToF16(scale * dist(rng) / typical_code));
    }
  }
  return bytes;
}

}  // namespace posenc::testing
