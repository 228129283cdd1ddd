// ggml element types: block geometry and dequantization to float32, in the
// arithmetic order of the format's definition so results are exact.
#include <cmath>
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

// The 2-bit quant of value i (0..255) in the 64 quant bytes of Q2_K and Q3_K:
// each 128-value half has 32 bytes, and value 32 s + l of a half is bits
// 2 s..2 s + 1 of byte l.
int TwoBitsK(const std::uint8_t* q, int i) { return (q[i / 128 * 32 + i % 32] >> (2 * (i / 32 % 4))) & 3; }

// Q2_K: 16 scale bytes (one per 16-value sub-block: low nibble scale, high
// nibble min), 64 bytes of 2-bit quants, d, dmin (f16): x = (d sc) q - (dmin m).
void Q2_K(const std::byte* block, float* out) {
  const std::uint8_t* scales = Bytes(block);
  const std::uint8_t* q = Bytes(block + 16);
  const float d = HalfAt(block + 80), dmin = HalfAt(block + 82);
  for (int sub = 0; sub < 16; ++sub) {
    const float scale = d * static_cast<float>(scales[sub] & 0x0F);
    const float offset = dmin * static_cast<float>(scales[sub] >> 4);
    for (int i = 16 * sub; i < 16 * sub + 16; ++i) out[i] = scale * static_cast<float>(TwoBitsK(q, i)) - offset;
  }
}

// Q3_K: 32 bytes of high bits (bit s of byte l for value 32 s + l), 64 bytes
// of 2-bit low quants, 12 bytes of sub-block scales, d (f16). A value is its
// low quant, minus 4 where its high bit is 0: q in -4..3, x = (d sc) q.
void Q3_K(const std::byte* block, float* out) {
  const std::uint8_t* high = Bytes(block);
  const std::uint8_t* q = Bytes(block + 32);
  const std::uint8_t* scales = Bytes(block + 96);
  const float d = HalfAt(block + 108);
  for (int sub = 0; sub < 16; ++sub) {
    const float scale = d * static_cast<float>(ScaleK3(sub, scales));
    for (int i = 16 * sub; i < 16 * sub + 16; ++i) {
      const int value = TwoBitsK(q, i) - (((high[i % 32] >> (i / 32)) & 1) ? 0 : 4);
      out[i] = scale * static_cast<float>(value);
    }
  }
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

// An f16 scale (or min) of a block, at `offset` from the block's start.
struct ScaleField {
  std::int64_t offset;
  std::string_view name;  // as ggml names the field; empty: no field
};

struct TypeEntry {
  GgmlType type;
  GgmlTypeTraits traits;
  void (*block)(const std::byte*, float*);
  // Every scale the block function reads: DequantizeRow checks them all
  // before it writes anything.
  ScaleField scales[2];
};

const TypeEntry kTypes[] = {
    {GgmlType::kF32, {"F32", 1, 4, true}, nullptr, {}},
    {GgmlType::kF16, {"F16", 1, 2, true}, nullptr, {}},
    {GgmlType::kBF16, {"BF16", 1, 2, true}, nullptr, {}},
    {GgmlType::kQ4_0, {"Q4_0", 32, 18, true}, Q4_0, {{0, "d"}}},
    {GgmlType::kQ4_1, {"Q4_1", 32, 20, true}, Q4_1, {{0, "d"}, {2, "m"}}},
    {GgmlType::kQ5_0, {"Q5_0", 32, 22, true}, Q5<false>, {{0, "d"}}},
    {GgmlType::kQ5_1, {"Q5_1", 32, 24, true}, Q5<true>, {{0, "d"}, {2, "m"}}},
    {GgmlType::kQ8_0, {"Q8_0", 32, 34, true}, Q8_0, {{0, "d"}}},
    {GgmlType::kQ2_K, {"Q2_K", kSuperBlock, 84, true}, Q2_K, {{80, "d"}, {82, "dmin"}}},
    {GgmlType::kQ3_K, {"Q3_K", kSuperBlock, 110, true}, Q3_K, {{108, "d"}}},
    {GgmlType::kQ4_K, {"Q4_K", kSuperBlock, 144, true}, QK<false>, {{0, "d"}, {2, "dmin"}}},
    {GgmlType::kQ5_K, {"Q5_K", kSuperBlock, 176, true}, QK<true>, {{0, "d"}, {2, "dmin"}}},
    {GgmlType::kQ6_K, {"Q6_K", kSuperBlock, 210, true}, Q6_K, {{208, "d"}}},
    // Q8_K (float32 d, 256 int8 quants, 16 int16 sums of 16 quants) is ggml's
    // intermediate for K-quant dot products; gguf-py cannot dequantize it, so
    // there is no oracle to hold a decoder to.
    {GgmlType::kQ8_K, {"Q8_K", kSuperBlock, 292, false}, nullptr, {}},
};

const TypeEntry& EntryOf(GgmlType type) {
  for (const TypeEntry& e : kTypes) {
    if (e.type == type) return e;
  }
  ThrowError("gguf", "tensor type", std::to_string(static_cast<std::uint32_t>(type)),
             "unsupported ggml type (posenc reads F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, "
             "Q2_K..Q6_K, Q8_K)");
}

// An inf or NaN scale turns a whole block into inf or NaN: a corrupt file, not
// weights. Every block is checked before anything is written, so that an
// error never leaves output half filled.
void RequireFiniteBlockScales(const TypeEntry& e, const std::byte* blocks, std::int64_t count,
                              std::string_view tensor) {
  const bool k_quant = e.traits.block_elements == kSuperBlock;
  for (const ScaleField& field : e.scales) {
    if (field.name.empty()) break;
    for (std::int64_t b = 0; b < count; ++b) {
      const float value = HalfAt(blocks + b * e.traits.block_bytes + field.offset);
      if (!std::isfinite(value)) {
        ThrowError("gguf",
                   std::string(tensor) + " (" + std::string(e.traits.name) + ") block " + std::to_string(b) + " " +
                       std::string(field.name),
                   FormatValue(value),
                   k_quant ? "a K-quant super-block scale must be finite" : "a block's scale and min must be finite");
      }
    }
  }
}

}  // namespace

const GgmlTypeTraits& TraitsOf(GgmlType type) { return EntryOf(type).traits; }

void RequireFiniteScales(GgmlType type, const std::byte* blocks, std::int64_t elements, std::string_view tensor) {
  const TypeEntry& e = EntryOf(type);
  RequireFiniteBlockScales(e, blocks, elements / e.traits.block_elements, tensor);
}

void DequantizeRow(GgmlType type, const std::byte* blocks, float* out, std::int64_t elements, std::string_view tensor) {
  const TypeEntry& e = EntryOf(type);
  Require(e.traits.dequantizable, "gguf", std::string(tensor) + ".type", e.traits.name,
          "cannot be dequantized by posenc yet");
  Require(elements % e.traits.block_elements == 0, "gguf", "elements", elements,
          "must be a multiple of the " + std::string(e.traits.name) + " block size");
  RequireFiniteBlockScales(e, blocks, elements / e.traits.block_elements, tensor);
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
