// Quantized rows unpacked for the integer prefill kernel, and the plain
// product it is tested against (see int8_panels.h). Scalar and readable on
// purpose: a row is unpacked once and reused for hundreds of rows of x.
#include "kernels/int8_panels.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "gguf/k_quant_scales.h"
#include "posenc/dtype.h"

namespace posenc::detail {
namespace {

float HalfAt(const std::byte* p) {
  std::uint16_t bits;
  std::memcpy(&bits, p, 2);
  return F16ToF32(bits);
}
const std::uint8_t* Bytes(const std::byte* p) { return reinterpret_cast<const std::uint8_t*>(p); }

// Q4_0, Q4_1, Q5_0, Q5_1 (ggml_types.cc): [d][m][32 fifth bits][16 nibble
// bytes]; value j < 16 is the low nibble of byte j, value j + 16 the high.
void SmallBlock(const std::byte* block, bool has_min, bool five_bits, std::uint8_t* codes, float* scale, float* min) {
  *scale = HalfAt(block);
  if (has_min) *min = HalfAt(block + 2);
  const std::byte* rest = block + (has_min ? 4 : 2);
  std::uint32_t high = 0;
  if (five_bits) {
    std::memcpy(&high, rest, 4);
    rest += 4;
  }
  const std::uint8_t* q = Bytes(rest);
  for (int j = 0; j < 16; ++j) {
    codes[j] = static_cast<std::uint8_t>((q[j] & 0x0F) | (((high >> j) & 1) << 4));
    codes[j + 16] = static_cast<std::uint8_t>((q[j] >> 4) | (((high >> (j + 16)) & 1) << 4));
  }
}

// Q4_K / Q5_K: [d][dmin][12 scale bytes][Q5_K: 32 fifth-bit bytes][128
// nibble bytes]; sub-block s of 32 is the low (s even) or high nibbles of
// bytes 32 (s / 2) .. + 31, its fifth bits bit s of the 32 high bytes;
// w = (d sc) c - (dmin m).
void KBlock(const std::byte* block, bool five_bits, std::uint8_t* codes, float* scale, float* min) {
  const float d = HalfAt(block), dmin = HalfAt(block + 2);
  const std::uint8_t* scales = Bytes(block + 4);
  const std::uint8_t* high = Bytes(block + 16);
  const std::uint8_t* q = Bytes(block + (five_bits ? 48 : 16));
  for (int s = 0; s < 8; ++s) {
    int sc, m;
    ScaleMinK4(s, scales, sc, m);
    scale[s] = d * static_cast<float>(sc);
    min[s] = -(dmin * static_cast<float>(m));
    for (int l = 0; l < 32; ++l) {
      const std::uint8_t byte = q[32 * (s / 2) + l];
      const int nibble = s % 2 == 0 ? byte & 0x0F : byte >> 4;
      const int fifth = five_bits ? (high[l] >> s) & 1 : 0;
      codes[32 * s + l] = static_cast<std::uint8_t>(nibble | (fifth << 4));
    }
  }
}

// Q6_K: [128 low-nibble bytes][64 bytes of 2-bit highs][16 int8 scales][d];
// in half h, value 128 h + 32 g + l takes a nibble of low[l] (g even) or
// low[l + 32], low (g < 2) or high, and bits 2g, 2g + 1 of high[l]; its
// sub-block of 16 is 8 h + 2 g + l / 16, scale d sc.
void Q6KBlock(const std::byte* block, std::uint8_t* codes, float* scale) {
  const float d = HalfAt(block + 208);
  const auto* scales = reinterpret_cast<const std::int8_t*>(block + 192);
  for (int s = 0; s < 16; ++s) scale[s] = d * static_cast<float>(scales[s]);
  for (std::int64_t h = 0; h < 2; ++h) {
    const std::uint8_t* low = Bytes(block + 64 * h);
    const std::uint8_t* high = Bytes(block + 128 + 32 * h);
    for (std::int64_t g = 0; g < 4; ++g) {
      for (std::int64_t l = 0; l < 32; ++l) {
        const std::uint8_t byte = low[l + 32 * (g % 2)];
        const int nibble = g < 2 ? byte & 0x0F : byte >> 4;
        codes[128 * h + 32 * g + l] = static_cast<std::uint8_t>(nibble | (((high[l] >> (2 * g)) & 3) << 4));
      }
    }
  }
}

}  // namespace

std::optional<Int8Form> Int8FormOf(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0: return Int8Form{.sub = 32, .offset = 8, .has_min = false, .largest_code = 15};
    case GgmlType::kQ4_1: return Int8Form{.sub = 32, .offset = 0, .has_min = true, .largest_code = 15};
    case GgmlType::kQ5_0: return Int8Form{.sub = 32, .offset = 16, .has_min = false, .largest_code = 31};
    case GgmlType::kQ5_1: return Int8Form{.sub = 32, .offset = 0, .has_min = true, .largest_code = 31};
    case GgmlType::kQ8_0: return Int8Form{.sub = 32, .offset = 128, .has_min = false, .largest_code = 255};
    case GgmlType::kQ4_K: return Int8Form{.sub = 32, .offset = 0, .has_min = true, .largest_code = 15};
    case GgmlType::kQ5_K: return Int8Form{.sub = 32, .offset = 0, .has_min = true, .largest_code = 31};
    case GgmlType::kQ6_K: return Int8Form{.sub = 16, .offset = 32, .has_min = false, .largest_code = 63};
    default: return std::nullopt;
  }
}

void UnpackInt8Row(GgmlType type, const std::byte* row, std::int64_t k, std::uint8_t* codes, float* scale, float* min) {
  const GgmlTypeTraits& traits = TraitsOf(type);
  const std::int64_t per_block = traits.block_elements, blocks = k / per_block;
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::byte* block = row + b * traits.block_bytes;
    std::uint8_t* c = codes + b * per_block;
    float* s = scale + b * (per_block / 32);
    float* m = min + b * (per_block / 32);
    switch (type) {
      case GgmlType::kQ4_0: SmallBlock(block, false, false, c, s, m); break;
      case GgmlType::kQ4_1: SmallBlock(block, true, false, c, s, m); break;
      case GgmlType::kQ5_0: SmallBlock(block, false, true, c, s, m); break;
      case GgmlType::kQ5_1: SmallBlock(block, true, true, c, s, m); break;
      case GgmlType::kQ8_0:
        *s = HalfAt(block);
        for (int j = 0; j < 32; ++j) {
          c[j] = static_cast<std::uint8_t>(static_cast<int>(reinterpret_cast<const std::int8_t*>(block + 2)[j]) + 128);
        }
        break;
      case GgmlType::kQ4_K: KBlock(block, false, c, s, m); break;
      case GgmlType::kQ5_K: KBlock(block, true, c, s, m); break;
      case GgmlType::kQ6_K: Q6KBlock(block, c, scale + b * 16); break;
      default: break;  // no form: callers check Int8FormOf first
    }
  }
}

void Int8ProductReference(const PackedWeights::Layout& w, const Int8Rows& x, float* y) {
  const std::int64_t k = w.k, blocks = k / Int8Rows::kBlock;
  std::vector<std::uint8_t> codes(static_cast<std::size_t>(k));
  std::vector<float> scale(static_cast<std::size_t>(k / 16)), min(static_cast<std::size_t>(blocks));
  std::vector<std::byte> scratch;
  for (std::int64_t j = 0; j < w.n; ++j) {
    const PackedWeights::Layout::Segment& segment = w.SegmentOf(j);
    const Int8Form form = *Int8FormOf(segment.type);
    UnpackInt8Row(segment.type, w.RowBytes(segment, j, scratch), k, codes.data(), scale.data(), min.data());
    for (std::int64_t i = 0; i < x.m; ++i) {
      const std::int8_t* q = x.q + i * k;
      float sum = 0.0f;
      for (std::int64_t s = 0; s < k / form.sub; ++s) {
        const std::int64_t block = s * form.sub / Int8Rows::kBlock;
        std::int32_t dot = 0;
        for (std::int64_t t = s * form.sub; t < (s + 1) * form.sub; ++t) {
          dot += (static_cast<std::int32_t>(codes[static_cast<std::size_t>(t)]) - form.offset) * q[t];
        }
        const float scale_dx = scale[static_cast<std::size_t>(s)] * x.scale[i * blocks + block];
        sum = std::fma(static_cast<float>(dot), scale_dx, sum);
        // The min term once per block of 32, after its last sub-block.
        if (form.has_min && ((s + 1) * form.sub) % Int8Rows::kBlock == 0) {
          sum = std::fma(min[static_cast<std::size_t>(block)], x.scaled_sum[i * blocks + block], sum);
        }
      }
      y[i * w.n + j] = sum;
    }
  }
}

}  // namespace posenc::detail
