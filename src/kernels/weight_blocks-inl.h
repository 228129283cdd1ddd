// Per-target dequantization of GGUF weight rows in registers (compiled once
// per SIMD target, included by matmul-inl.h).
//
// VisitRow<Format>(row, k, f) calls f(base, offset, w) for each vector w of
// N <= 16 consecutive weights of one row, base + offset the index of its
// first weight in the row (every index once, in a fixed order); offset is
// the place inside a block (or a group of four vectors), a constant once the
// block's loops are unrolled, so a caller can pick a register by it. The
// lanes of the last vector of an element type (F32, F16, BF16) past k are
// zero.
//
// Each weight is the float GgufFile::Dequantize returns for it (bit for bit):
// the same float operations in the same order as the format's definition
// (src/gguf/ggml_types.cc), which is why the kernel's sources are compiled
// with -ffp-contract=off (a fused multiply-add would round once where the
// definition rounds twice).
#if defined(POSENC_WEIGHT_BLOCKS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_WEIGHT_BLOCKS_INL_H_
#undef POSENC_WEIGHT_BLOCKS_INL_H_
#else
#define POSENC_WEIGHT_BLOCKS_INL_H_
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "gguf/k_quant_scales.h"
#include "hwy/highway.h"
#include "posenc/gguf.h"

HWY_BEFORE_NAMESPACE();
namespace posenc::HWY_NAMESPACE::weight_blocks {
namespace hn = hwy::HWY_NAMESPACE;

// Vectors of at most 16 floats: a block's 16-byte runs fill one vector.
using DF = hn::CappedTag<float, 16>;
using DI = hn::Rebind<std::int32_t, DF>;
using DU8 = hn::Rebind<std::uint8_t, DF>;
using DI8 = hn::Rebind<std::int8_t, DF>;
using V = hn::Vec<DF>;
using VI = hn::Vec<DI>;

// One f16 scale through the vector unit (exact, as F16ToF32, but without a
// call per block).
HWY_INLINE float HalfAt(const std::byte* p) {
  const hn::CappedTag<float, 1> d1;
  return hn::GetLane(hn::PromoteTo(
      d1, hn::LoadU(hn::Rebind<hwy::float16_t, decltype(d1)>(), reinterpret_cast<const hwy::float16_t*>(p))));
}
inline const std::uint8_t* Bytes(const std::byte* p) { return reinterpret_cast<const std::uint8_t*>(p); }

// N bytes at p as int32 lanes.
HWY_INLINE VI LoadBytes(const std::uint8_t* p) { return hn::PromoteTo(DI(), hn::LoadU(DU8(), p)); }
HWY_INLINE V ToFloat(VI v) { return hn::ConvertTo(DF(), v); }
HWY_INLINE VI Low4(VI v) { return hn::And(v, hn::Set(DI(), 0x0F)); }
HWY_INLINE VI High4(VI v) { return hn::ShiftRight<4>(v); }

// A 4-bit format's block (or sub-block) maps 16 codes to 16 floats. Where a
// vector holds 16 floats (AVX-512), the 16 are computed once, with the
// format's own operations, and each weight is a lane lookup by its code:
// the same floats for a quarter of the arithmetic. Elsewhere each weight is
// computed from its code.
constexpr bool kNibbleTable = hn::MaxLanes(DF()) == 16;
template <bool kTable = kNibbleTable>
class Nibbles {
 public:
  // value(codes) computes the floats of a vector of codes (int32 lanes).
  template <class Value>
  HWY_INLINE explicit Nibbles(const Value& value) {
    if constexpr (kTable) table_ = value(hn::Iota(DI(), 0));
  }
  template <class Value>
  HWY_INLINE V operator()(VI codes, const Value& value) const {
    if constexpr (kTable) return hn::TableLookupLanes(table_, hn::IndicesFromVec(DF(), codes));
    return value(codes);
  }

 private:
  V table_;
};

// Q4_0: d (f16), 16 nibble bytes: values j (low) and j + 16 (high); x = (q - 8) d.
struct Q4_0 {
  static constexpr std::int64_t kElements = 32, kBytes = 18;
  template <class F>
  static HWY_INLINE void Block(const std::byte* block, F&& f) {
    const V d = hn::Set(DF(), HalfAt(block));
    const auto value = [&](VI code) HWY_ATTR { return hn::Mul(ToFloat(hn::Sub(code, hn::Set(DI(), 8))), d); };
    const Nibbles<> nibbles(value);
    const std::uint8_t* q = Bytes(block + 2);
    for (std::int64_t j = 0; j < 16; j += hn::Lanes(DF())) {
      const VI b = LoadBytes(q + j);
      f(j, nibbles(Low4(b), value));
      f(j + 16, nibbles(High4(b), value));
    }
  }
};

// Q4_1: d, m (f16), nibbles; x = q d + m.
struct Q4_1 {
  static constexpr std::int64_t kElements = 32, kBytes = 20;
  template <class F>
  static HWY_INLINE void Block(const std::byte* block, F&& f) {
    const V d = hn::Set(DF(), HalfAt(block)), m = hn::Set(DF(), HalfAt(block + 2));
    const auto value = [&](VI code) HWY_ATTR { return hn::Add(hn::Mul(ToFloat(code), d), m); };
    const Nibbles<> nibbles(value);
    const std::uint8_t* q = Bytes(block + 4);
    for (std::int64_t j = 0; j < 16; j += hn::Lanes(DF())) {
      const VI b = LoadBytes(q + j);
      f(j, nibbles(Low4(b), value));
      f(j + 16, nibbles(High4(b), value));
    }
  }
};

// Q5_0 / Q5_1: as Q4 plus a fifth bit per value from a 32-bit mask (bit j
// for value j); Q5_0: x = (q - 16) d, Q5_1: x = q d + m.
template <bool kHasMin>
struct Q5 {
  static constexpr std::int64_t kElements = 32, kBytes = kHasMin ? 24 : 22;
  template <class F>
  static HWY_INLINE void Block(const std::byte* block, F&& f) {
    const V d = hn::Set(DF(), HalfAt(block));
    const V m = hn::Set(DF(), kHasMin ? HalfAt(block + 2) : 0.0f);
    const std::byte* rest = block + (kHasMin ? 4 : 2);
    std::uint32_t high_bits;
    std::memcpy(&high_bits, rest, 4);
    const std::uint8_t* q = Bytes(rest + 4);
    const VI high = hn::Set(DI(), static_cast<std::int32_t>(high_bits));
    const VI one = hn::Set(DI(), 1), sixteen = hn::Set(DI(), 16);
    const auto value = [&](VI nibble, std::int64_t first) {  // first: the value index of lane 0
      const VI bit = hn::And(hn::BitCast(DI(), hn::Shr(hn::BitCast(hn::RebindToUnsigned<DI>(), high),
                                                       hn::BitCast(hn::RebindToUnsigned<DI>(),
                                                                   hn::Iota(DI(), static_cast<std::int32_t>(first))))),
                             one);
      const VI q5 = hn::Or(nibble, hn::ShiftLeft<4>(bit));
      if constexpr (kHasMin) return hn::Add(hn::Mul(ToFloat(q5), d), m);
      return hn::Mul(ToFloat(hn::Sub(q5, sixteen)), d);
    };
    for (std::int64_t j = 0; j < 16; j += hn::Lanes(DF())) {
      const VI b = LoadBytes(q + j);
      f(j, value(Low4(b), j));
      f(j + 16, value(High4(b), j + 16));
    }
  }
};

// Q8_0: d (f16), 32 signed bytes; x = q d.
struct Q8_0 {
  static constexpr std::int64_t kElements = 32, kBytes = 34;
  template <class F>
  static HWY_INLINE void Block(const std::byte* block, F&& f) {
    const V d = hn::Set(DF(), HalfAt(block));
    const auto* q = reinterpret_cast<const std::int8_t*>(block + 2);
    for (std::int64_t j = 0; j < 32; j += hn::Lanes(DF())) {
      f(j, hn::Mul(ToFloat(hn::PromoteTo(DI(), hn::LoadU(DI8(), q + j))), d));
    }
  }
};

// Q2_K / Q3_K (ggml_types.cc's layouts): 16 sub-blocks of 16 values. Sub-
// block 8 h + 2 s + p takes bits 2 s, 2 s + 1 of bytes 16 p..16 p + 15 of
// half h's 32 quant bytes (values 128 h + 32 s + 16 p + l). Q2_K: x =
// (d sc) q - (dmin m), scale and min the low and high nibbles of a scale
// byte; Q3_K: q minus 4 where its bit 4 h + s of high byte 16 p + l is 0,
// x = (d sc) q with a signed 6-bit scale.
template <bool kThreeBits>
struct QK23 {
  static constexpr std::int64_t kElements = 256, kBytes = kThreeBits ? 110 : 84;
  template <class F>
  static HWY_INLINE void Block(const std::byte* block, F&& f) {
    const std::uint8_t* q = Bytes(block + (kThreeBits ? 32 : 16));
    const std::uint8_t* scales = Bytes(block + (kThreeBits ? 96 : 0));
    const std::uint8_t* high = Bytes(block);
    const float d = HalfAt(block + (kThreeBits ? 108 : 80));
    const float dmin = kThreeBits ? 0.0f : HalfAt(block + 82);
    const VI three = hn::Set(DI(), 3), one = hn::Set(DI(), 1);
    for (int half = 0; half < 2; ++half) {
      for (int s = 0; s < 4; ++s) {
        for (int part = 0; part < 2; ++part) {
          const int sub_block = 8 * half + 2 * s + part;
          const std::int64_t first = 128 * half + 32 * s + 16 * part;
          const std::int64_t part_bytes = 16 * static_cast<std::int64_t>(part);  // into a half's 32 bytes
          const float scale = kThreeBits ? d * static_cast<float>(ScaleK3(sub_block, scales))
                                         : d * static_cast<float>(scales[sub_block] & 0x0F);
          const float offset = dmin * static_cast<float>(scales[sub_block] >> 4);
          for (std::int64_t l = 0; l < 16; l += hn::Lanes(DF())) {
            VI code = hn::And(
                hn::ShiftRightSame(LoadBytes(q + 32 * static_cast<std::int64_t>(half) + part_bytes + l), 2 * s), three);
            if constexpr (kThreeBits) {
              const VI bit = hn::And(hn::ShiftRightSame(LoadBytes(high + part_bytes + l), 4 * half + s), one);
              code = hn::Sub(code, hn::ShiftLeft<2>(hn::Sub(one, bit)));
              f(first + l, hn::Mul(hn::Set(DF(), scale), ToFloat(code)));
            } else {
              f(first + l, hn::Sub(hn::Mul(hn::Set(DF(), scale), ToFloat(code)), hn::Set(DF(), offset)));
            }
          }
        }
      }
    }
  }
};

// Q4_K / Q5_K: d, dmin (f16), 12 bytes of 6-bit scales and mins, [Q5_K: 32
// bytes of fifth bits], 128 nibble bytes; four chunks of 64 values share 32
// bytes (low nibbles: sub-block 2c, high: 2c + 1); x = (d sc) q - (dmin m).
template <bool kFiveBits>
struct QK {
  static constexpr std::int64_t kElements = 256, kBytes = kFiveBits ? 176 : 144;
  template <class F>
  static HWY_INLINE void Block(const std::byte* block, F&& f) {
    const float d = HalfAt(block), dmin = HalfAt(block + 2);
    const std::uint8_t* scales = Bytes(block + 4);
    const std::uint8_t* high = Bytes(block + 16);
    const std::uint8_t* q = Bytes(block + (kFiveBits ? 48 : 16));
    const VI one = hn::Set(DI(), 1);
    for (int chunk = 0; chunk < 4; ++chunk, q += 32) {
      for (int half = 0; half < 2; ++half) {
        const int sub_block = 2 * chunk + half;
        const std::int64_t first = 32 * static_cast<std::int64_t>(sub_block);
        int sc, m;
        ScaleMinK4(sub_block, scales, sc, m);
        const V scale = hn::Set(DF(), d * static_cast<float>(sc));
        const V offset = hn::Set(DF(), dmin * static_cast<float>(m));
        const auto value = [&](VI code) HWY_ATTR { return hn::Sub(hn::Mul(scale, ToFloat(code)), offset); };
        const Nibbles<kNibbleTable && !kFiveBits> nibbles(value);  // Q5_K: 32 codes
        for (std::int64_t l = 0; l < 32; l += hn::Lanes(DF())) {
          const VI b = LoadBytes(q + l);
          VI code = half == 0 ? Low4(b) : High4(b);
          if constexpr (kFiveBits) {
            code = hn::Or(code, hn::ShiftLeft<4>(hn::And(hn::ShiftRightSame(LoadBytes(high + l), sub_block), one)));
          }
          f(first + l, nibbles(code, value));
        }
      }
    }
  }
};

// Q6_K: 128 low-nibble bytes, 64 bytes of 2-bit highs, 16 signed scales, d
// (f16). Each half of 128 values: value l + 32 g (g < 4) takes a nibble of
// low[l] or low[l + 32] and bits 2g, 2g + 1 of high[l]; x = (d sc) (q - 32)
// with the scale of its 16 values.
struct Q6_K {
  static constexpr std::int64_t kElements = 256, kBytes = 210;
  template <class F>
  static HWY_INLINE void Block(const std::byte* block, F&& f) {
    const std::uint8_t* low = Bytes(block);
    const std::uint8_t* high = Bytes(block + 128);
    const auto* scales = reinterpret_cast<const std::int8_t*>(block + 192);
    const float d = HalfAt(block + 208);
    const VI three = hn::Set(DI(), 3), thirty_two = hn::Set(DI(), 32);
    for (std::int64_t half = 0; half < 2; ++half, low += 64, high += 32, scales += 8) {
      for (std::int64_t l = 0; l < 32; l += hn::Lanes(DF())) {
        const VI a = LoadBytes(low + l), b = LoadBytes(low + l + 32), h = LoadBytes(high + l);
        const VI q[4] = {
            hn::Or(Low4(a), hn::ShiftLeft<4>(hn::And(h, three))),
            hn::Or(Low4(b), hn::ShiftLeft<4>(hn::And(hn::ShiftRight<2>(h), three))),
            hn::Or(High4(a), hn::ShiftLeft<4>(hn::And(hn::ShiftRight<4>(h), three))),
            hn::Or(High4(b), hn::ShiftLeft<4>(hn::And(hn::ShiftRight<6>(h), three))),
        };
        const std::int64_t group = l / 16;
        for (std::int64_t g = 0; g < 4; ++g) {
          const V scale = hn::Set(DF(), d * static_cast<float>(scales[group + 2 * g]));
          f(128 * half + l + 32 * g, hn::Mul(scale, ToFloat(hn::Sub(q[g], thirty_two))));
        }
      }
    }
  }
};

// Element types: N values at a time.
struct F16 {
  static constexpr std::int64_t kElements = 1, kBytes = 2;
  static HWY_INLINE V Load(const std::byte* p) {
    return hn::PromoteTo(DF(), hn::LoadU(hn::Rebind<hwy::float16_t, DF>(), reinterpret_cast<const hwy::float16_t*>(p)));
  }
};

struct BF16 {
  static constexpr std::int64_t kElements = 1, kBytes = 2;
  static HWY_INLINE V Load(const std::byte* p) {
    return hn::PromoteTo(DF(),
                         hn::LoadU(hn::Rebind<hwy::bfloat16_t, DF>(), reinterpret_cast<const hwy::bfloat16_t*>(p)));
  }
};

struct F32 {
  static constexpr std::int64_t kElements = 1, kBytes = 4;
  static HWY_INLINE V Load(const std::byte* p) { return hn::LoadU(DF(), reinterpret_cast<const float*>(p)); }
};

template <class Format, class F>
HWY_INLINE void VisitRow(const std::byte* row, std::int64_t k, F&& f) {
  if constexpr (Format::kElements > 1) {
    for (std::int64_t b = 0; b < k / Format::kElements; ++b) {
      Format::Block(row + b * Format::kBytes,
                    [&](std::int64_t offset, V w) HWY_ATTR { f(b * Format::kElements, offset, w); });
    }
  } else {
    // Four vectors at a time (the offsets inside a group are constants, as
    // in a block), then one at a time, then the zero-padded tail.
    constexpr auto kLanes = static_cast<std::int64_t>(hn::MaxLanes(DF()));
    std::int64_t o = 0;
    for (; o + 4 * kLanes <= k; o += 4 * kLanes) {
      for (std::int64_t v = 0; v < 4; ++v) f(o, v * kLanes, Format::Load(row + (o + v * kLanes) * Format::kBytes));
    }
    for (; o + kLanes <= k; o += kLanes) f(o, 0, Format::Load(row + o * Format::kBytes));
    if (o < k) {  // the tail's bytes, zero-padded to a whole vector (zero bits are 0.0 in every type)
      std::byte tail[16 * Format::kBytes] = {};
      std::memcpy(tail, row + o * Format::kBytes, static_cast<std::size_t>((k - o) * Format::kBytes));
      f(o, 0, Format::Load(tail));
    }
  }
}

// Calls body(Format{}) for the format of `type`; false for a type without one.
template <class Body>
HWY_INLINE bool WithFormat(GgmlType type, Body&& body) {
  switch (type) {
    case GgmlType::kF32: body(F32{}); return true;
    case GgmlType::kF16: body(F16{}); return true;
    case GgmlType::kBF16: body(BF16{}); return true;
    case GgmlType::kQ4_0: body(Q4_0{}); return true;
    case GgmlType::kQ4_1: body(Q4_1{}); return true;
    case GgmlType::kQ5_0: body(Q5<false>{}); return true;
    case GgmlType::kQ5_1: body(Q5<true>{}); return true;
    case GgmlType::kQ8_0: body(Q8_0{}); return true;
    case GgmlType::kQ2_K: body(QK23<false>{}); return true;
    case GgmlType::kQ3_K: body(QK23<true>{}); return true;
    case GgmlType::kQ4_K: body(QK<false>{}); return true;
    case GgmlType::kQ5_K: body(QK<true>{}); return true;
    case GgmlType::kQ6_K: body(Q6_K{}); return true;
    default: return false;
  }
}

}  // namespace posenc::HWY_NAMESPACE::weight_blocks
HWY_AFTER_NAMESPACE();

#endif  // include guard
