// ggml element types: block geometry and dequantization to float32, in the
// arithmetic order of the format's definition so results are exact.
#include <cstring>
#include <string>

#include "gguf/k_quant_scales.h"
#include "posenc/dtype.h"
#include "posenc/error.h"
#include "posenc/gguf.h"

namespace posenc {
namespace {

constexpr std::int64_t kSuperBlock = 256;  // K-quants

float HalfAt(const std::byte* p) {
  std::uint16_t bits;
  std::memcpy(&bits, p, 2);
  return F16ToF32(bits);
}

const std::uint8_t* Bytes(const std::byte* p) { return reinterpret_cast<const std::uint8_t*>(p); }

// Q4_0: d (f16), 16 bytes of nibbles; low nibbles are values 0..15, high 16..31.
void Q4_0(const std::byte* block, float* out) {
  const float d = HalfAt(block);
  const std::uint8_t* q = Bytes(block + 2);
  for (int j = 0; j < 16; ++j) {
    out[j] = static_cast<float>((q[j] & 0x0F) - 8) * d;
    out[j + 16] = static_cast<float>((q[j] >> 4) - 8) * d;
  }
}

// Q4_1: d, m (f16), nibbles; x = q d + m.
void Q4_1(const std::byte* block, float* out) {
  const float d = HalfAt(block), m = HalfAt(block + 2);
  const std::uint8_t* q = Bytes(block + 4);
  for (int j = 0; j < 16; ++j) {
    out[j] = static_cast<float>(q[j] & 0x0F) * d + m;
    out[j + 16] = static_cast<float>(q[j] >> 4) * d + m;
  }
}

// Q5_0/Q5_1: nibbles plus a fifth bit per value from a 32-bit mask
// (bit j for value j, bit j + 16 for value j + 16).
template <bool kHasMin>
void Q5(const std::byte* block, float* out) {
  const float d = HalfAt(block);
  const float m = kHasMin ? HalfAt(block + 2) : 0.0f;
  const std::byte* rest = block + (kHasMin ? 4 : 2);
  std::uint32_t high;
  std::memcpy(&high, rest, 4);
  const std::uint8_t* q = Bytes(rest + 4);
  for (int j = 0; j < 16; ++j) {
    const int lo = (q[j] & 0x0F) | (((high >> j) & 1) << 4);
    const int hi = (q[j] >> 4) | (((high >> (j + 16)) & 1) << 4);
    if constexpr (kHasMin) {
      out[j] = static_cast<float>(lo) * d + m;
      out[j + 16] = static_cast<float>(hi) * d + m;
    } else {
      out[j] = static_cast<float>(lo - 16) * d;
      out[j + 16] = static_cast<float>(hi - 16) * d;
    }
  }
}

// Q8_0: d, 32 signed bytes.
void Q8_0(const std::byte* block, float* out) {
  const float d = HalfAt(block);
  for (int j = 0; j < 32; ++j) out[j] = static_cast<float>(static_cast<std::int8_t>(Bytes(block + 2)[j])) * d;
}

// Q4_K / Q5_K: d, dmin (f16), 12 scale bytes, [Q5_K: 32 high-bit bytes], 128
// nibble bytes; 8 sub-blocks of 32 values: x = (d sc) q - (dmin m).
template <bool kFiveBits>
void QK(const std::byte* block, float* out) {
  const float d = HalfAt(block), dmin = HalfAt(block + 2);
  const std::uint8_t* scales = Bytes(block + 4);
  const std::uint8_t* high = Bytes(block + 16);
  const std::uint8_t* q = Bytes(block + (kFiveBits ? 48 : 16));
  for (int chunk = 0; chunk < 4; ++chunk) {  // 64 values: two sub-blocks sharing 32 bytes
    for (int half = 0; half < 2; ++half) {
      int sc, m;
      ScaleMinK4(2 * chunk + half, scales, sc, m);
      const float scale = d * static_cast<float>(sc), offset = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l) {
        int value = half == 0 ? (q[l] & 0x0F) : (q[l] >> 4);
        if constexpr (kFiveBits) value += ((high[l] >> (2 * chunk + half)) & 1) << 4;
        *out++ = scale * static_cast<float>(value) - offset;
      }
    }
    q += 32;
  }
}

// Q6_K: 128 low-nibble bytes, 64 bytes of 2-bit highs, 16 signed scales, d.
// Each 128-value half: four groups of 32 share 32 high bytes (2 bits each).
void Q6_K(const std::byte* block, float* out) {
  const std::uint8_t* low = Bytes(block);
  const std::uint8_t* high = Bytes(block + 128);
  const auto* scales = reinterpret_cast<const std::int8_t*>(block + 192);
  const float d = HalfAt(block + 208);
  for (int half = 0; half < 2; ++half) {
    for (int l = 0; l < 32; ++l) {
      const int group = l / 16;
      const int q[4] = {
          ((low[l] & 0x0F) | (((high[l] >> 0) & 3) << 4)) - 32,
          ((low[l + 32] & 0x0F) | (((high[l] >> 2) & 3) << 4)) - 32,
          ((low[l] >> 4) | (((high[l] >> 4) & 3) << 4)) - 32,
          ((low[l + 32] >> 4) | (((high[l] >> 6) & 3) << 4)) - 32,
      };
      for (int g = 0; g < 4; ++g) {
        out[l + 32 * g] = d * static_cast<float>(scales[group + 2 * g]) * static_cast<float>(q[g]);
      }
    }
    out += 128;
    low += 64;
    high += 32;
    scales += 8;
  }
}

struct TypeEntry {
  GgmlType type;
  GgmlTypeTraits traits;
  void (*block)(const std::byte*, float*);
};

const TypeEntry kTypes[] = {
    {GgmlType::kF32, {"F32", 1, 4, true}, nullptr},
    {GgmlType::kF16, {"F16", 1, 2, true}, nullptr},
    {GgmlType::kBF16, {"BF16", 1, 2, true}, nullptr},
    {GgmlType::kQ4_0, {"Q4_0", 32, 18, true}, Q4_0},
    {GgmlType::kQ4_1, {"Q4_1", 32, 20, true}, Q4_1},
    {GgmlType::kQ5_0, {"Q5_0", 32, 22, true}, Q5<false>},
    {GgmlType::kQ5_1, {"Q5_1", 32, 24, true}, Q5<true>},
    {GgmlType::kQ8_0, {"Q8_0", 32, 34, true}, Q8_0},
    {GgmlType::kQ2_K, {"Q2_K", kSuperBlock, 84, false}, nullptr},
    {GgmlType::kQ3_K, {"Q3_K", kSuperBlock, 110, false}, nullptr},
    {GgmlType::kQ4_K, {"Q4_K", kSuperBlock, 144, true}, QK<false>},
    {GgmlType::kQ5_K, {"Q5_K", kSuperBlock, 176, true}, QK<true>},
    {GgmlType::kQ6_K, {"Q6_K", kSuperBlock, 210, true}, Q6_K},
};

const TypeEntry& EntryOf(GgmlType type) {
  for (const TypeEntry& e : kTypes) {
    if (e.type == type) return e;
  }
  ThrowError("gguf", "tensor type", std::to_string(static_cast<std::uint32_t>(type)),
             "unsupported ggml type (posenc reads F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, "
             "Q2_K..Q6_K)");
}

}  // namespace

const GgmlTypeTraits& TraitsOf(GgmlType type) { return EntryOf(type).traits; }

void DequantizeRow(GgmlType type, const std::byte* blocks, float* out, std::int64_t elements) {
  const TypeEntry& e = EntryOf(type);
  Require(e.traits.dequantizable, "gguf", "tensor type", e.traits.name, "cannot be dequantized by posenc yet");
  Require(elements % e.traits.block_elements == 0, "gguf", "elements", elements,
          "must be a multiple of the " + std::string(e.traits.name) + " block size");
  switch (type) {
    case GgmlType::kF32: std::memcpy(out, blocks, static_cast<std::size_t>(elements) * 4); return;
    case GgmlType::kF16:
      for (std::int64_t i = 0; i < elements; ++i) out[i] = HalfAt(blocks + 2 * i);
      return;
    case GgmlType::kBF16:
      for (std::int64_t i = 0; i < elements; ++i) {
        std::uint16_t bits;
        std::memcpy(&bits, blocks + 2 * i, 2);
        out[i] = BF16ToF32(bits);
      }
      return;
    default:
      for (std::int64_t b = 0; b < elements / e.traits.block_elements; ++b) {
        e.block(blocks + b * e.traits.block_bytes, out + b * e.traits.block_elements);
      }
  }
}

}  // namespace posenc
