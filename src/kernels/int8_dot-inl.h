// Per-target integer dot products of GGUF weight rows with int8 activations
// (compiled once per SIMD target, included by matmul-inl.h): the decode
// product with DotActivations::kInt8.
//
// x arrives quantized in blocks of 32 (matmul_kernel.h, Int8Rows): x ~ d q,
// q in [-127, 127]. A weight block (or a K-quant's sub-block of 32) has a
// scale and either an offset folded into signed codes (Q4_0: q - 8, Q5_0:
// q - 16, Q6_K: q - 32, Q8_0) or a min (Q4_1, Q5_1, Q4_K, Q5_K: w = d c + m,
// codes c >= 0). For 32 weights and 32 activations:
//   sum w x = d_w d_x sum(c q)        [+ m d_x sum(q)]
// where sum(c q) is exact in int32 (|c| <= 128, |q| <= 127), computed by
// byte multiplies that add pairs into int16 and then into int32 lanes: x86's
// pmaddubsw (unsigned x signed; a signed weight goes in as |c| with its
// sign moved onto q) and pmaddwd. Eight int32 lanes per 32 weights, four
// bytes each, are converted to float and added to one of four float
// accumulators with the block's scale d_w d_x (Q6_K: one scale per 16
// weights, so per half of the lanes); the min terms go to scalar
// accumulators. So a weight costs about an eighth of the float32 kernel's
// operations. That row-by-row form (DotRows) still pays a reduction per
// row and scalar scale work per block, which bound it below memory speed
// for K-quants; the types a model loaded for int8 keeps in groups of 8
// rows (row_groups.h: Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q5_K, Q6_K) take
// DotGroups, which does that work for 8 rows at once.
//
// Only x86 with AVX2 (and its successors, on 256-bit vectors) has the
// integer kernel (DotSegment); other targets take the float32 kernel over
// the dequantized activations d q instead (matmul-inl.h), the same value to
// float32 rounding. Element types (F32, F16, BF16) have no integer form and
// always take the float32 kernel.
#if defined(POSENC_INT8_DOT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_INT8_DOT_INL_H_
#undef POSENC_INT8_DOT_INL_H_
#else
#define POSENC_INT8_DOT_INL_H_
#endif

#include <cstddef>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "gguf/k_quant_scales.h"
#include "hwy/highway.h"
#include "kernels/matmul_kernel.h"

HWY_BEFORE_NAMESPACE();
namespace posenc::HWY_NAMESPACE::int8_dot {
namespace hn = hwy::HWY_NAMESPACE;

// x [m, k] (k a multiple of 32) quantized into `out` as Int8Rows documents:
// per block, d = max|x| / 127 (NaN if the block holds a NaN or an
// infinity), q = x (1 / d) rounded to nearest, ties to even (0 where d is 0
// or NaN). Written only where not null: `sums16` the sum of q over each 16,
// `dequantized` d q, its rows PaddedK(k) apart (padding left as it is).
// Every operation is exact or correctly rounded, so every target gives the
// same bytes; rows are independent (the caller may split them).
inline void Quantize(const float* HWY_RESTRICT x, std::int64_t m, std::int64_t k, std::int8_t* HWY_RESTRICT q,
                     float* HWY_RESTRICT scale, float* HWY_RESTRICT scaled_sum, std::int32_t* HWY_RESTRICT sums16,
                     float* HWY_RESTRICT dequantized) {
  const hn::CappedTag<float, 8> df;  // lanes divide 16 on every target
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<std::int8_t, decltype(df)> d8;
  const auto lanes = static_cast<std::int64_t>(hn::Lanes(df));
  constexpr std::int64_t kBlock = detail::Int8Rows::kBlock;
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t b = 0; b < k / kBlock; ++b) {
      const float* block = x + i * k + b * kBlock;
      auto largest = hn::Zero(df);
      auto finite = hn::Zero(df);  // 0 * x: 0 for a finite x, NaN otherwise
      for (std::int64_t l = 0; l < kBlock; l += lanes) {
        const auto v = hn::LoadU(df, block + l);
        largest = hn::Max(largest, hn::Abs(v));
        finite = hn::Add(finite, hn::Mul(hn::Zero(df), v));
      }
      const float nan_or_zero = hn::GetLane(hn::SumOfLanes(df, finite));
      const float d = hn::GetLane(hn::MaxOfLanes(df, largest)) / 127.0f + nan_or_zero;
      const bool usable = d != 0.0f && d == d;
      const auto inverse = hn::Set(df, usable ? 1.0f / d : 0.0f);
      auto sum = hn::Zero(di), sum16 = hn::Zero(di);
      for (std::int64_t l = 0; l < kBlock; l += lanes) {
        const auto codes = hn::NearestInt(hn::Mul(hn::LoadU(df, block + l), inverse));
        sum = hn::Add(sum, codes);
        sum16 = hn::Add(sum16, codes);
        if ((l + lanes) % 16 == 0) {  // the end of a 16
          if (sums16 != nullptr) sums16[(i * k + b * kBlock + l) / 16] = hn::GetLane(hn::SumOfLanes(di, sum16));
          sum16 = hn::Zero(di);
        }
        hn::StoreU(hn::DemoteTo(d8, codes), d8, q + i * k + b * kBlock + l);
        if (dequantized != nullptr) {
          hn::StoreU(hn::Mul(hn::ConvertTo(df, codes), hn::Set(df, d)), df,
                     dequantized + i * detail::PaddedK(k) + b * kBlock + l);
        }
      }
      scale[i * (k / kBlock) + b] = d;
      scaled_sum[i * (k / kBlock) + b] = d * static_cast<float>(hn::GetLane(hn::SumOfLanes(di, sum)));
    }
  }
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
using I = __m256i;  // 32 codes (int8 or uint8), or 8 int32 dot lanes
using F = __m256;   // 8 float lanes, one per int32 lane

HWY_INLINE float Half(const std::byte* p) {
  std::uint16_t h;
  std::memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}
// Two consecutive f16 values (a block's d and m) in one conversion: lanes 0, 1.
HWY_INLINE __m128 HalfPair(const std::byte* p) {
  std::int32_t pair;
  std::memcpy(&pair, p, 4);
  return _mm_cvtph_ps(_mm_cvtsi32_si128(pair));
}
HWY_INLINE __m128i Load16(const std::byte* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
HWY_INLINE I Load32(const void* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// 16 bytes of nibble pairs at p as 32 codes: the 16 low nibbles, then the 16
// high: the bytes in both halves, the upper half shifted right by 4.
HWY_INLINE I SplitNibbles(const std::byte* p) {
  const I both = _mm256_broadcastsi128_si256(Load16(p));
  return _mm256_and_si256(_mm256_srlv_epi32(both, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)), _mm256_set1_epi8(0x0F));
}
// 32 bytes of nibble pairs: their low (high) nibbles as 32 codes.
HWY_INLINE I LowNibbles(I b) { return _mm256_and_si256(b, _mm256_set1_epi8(0x0F)); }
HWY_INLINE I HighNibbles(I b) { return _mm256_and_si256(_mm256_srli_epi16(b, 4), _mm256_set1_epi8(0x0F)); }

// Byte j: 0x10 if bit j of the 32-bit mask at p is set, else 0 (the fifth
// bit of Q5_0/Q5_1 codes). Each byte of the mask is copied to 8 lanes, and
// lane j keeps bit j % 8 by an OR with every other bit set.
HWY_INLINE I FifthBits(const std::byte* p) {
  std::int32_t bits;
  std::memcpy(&bits, p, 4);
  const I spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(bits), _mm256_setr_epi64x(0, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
  const I all_but_bit = _mm256_set1_epi64x(0x7FBFDFEFF7FBFDFE);
  const I set = _mm256_cmpeq_epi8(_mm256_or_si256(spread, all_but_bit), _mm256_set1_epi64x(-1));
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// 8 int32 lanes, lane l = sum over bytes 4l..4l+3 of c q.
HWY_INLINE I DotUnsigned(I c, I q) { return _mm256_madd_epi16(_mm256_maddubs_epi16(c, q), _mm256_set1_epi16(1)); }
HWY_INLINE I DotSigned(I c, I q) { return DotUnsigned(_mm256_abs_epi8(c), _mm256_sign_epi8(q, c)); }

// One format's block: Block(block, visit) calls visit(offset, codes, scale,
// min) for each run of 32 weights, offset its first weight's place in the
// block (a constant after unrolling), codes as kSigned says, scale the
// weights' d (a float, or Q6_K's per int32 lane: 8 lanes) and min their m
// (0 without).
struct Q4_0 {
  static constexpr std::int64_t kElements = 32, kBytes = 18;
  static constexpr bool kSigned = true, kMin = false;
  template <class Visit>
  static HWY_INLINE void Block(const std::byte* b, const Visit& visit) {
    visit(0, _mm256_sub_epi8(SplitNibbles(b + 2), _mm256_set1_epi8(8)), Half(b), 0.0f);
  }
};
struct Q4_1 {
  static constexpr std::int64_t kElements = 32, kBytes = 20;
  static constexpr bool kSigned = false, kMin = true;
  template <class Visit>
  static HWY_INLINE void Block(const std::byte* b, const Visit& visit) {
    const __m128 dm = HalfPair(b);
    visit(0, SplitNibbles(b + 4), _mm_cvtss_f32(dm), _mm_cvtss_f32(_mm_movehdup_ps(dm)));
  }
};
template <bool kHasMin>
struct Q5 {
  static constexpr std::int64_t kElements = 32, kBytes = kHasMin ? 24 : 22;
  static constexpr bool kSigned = !kHasMin, kMin = kHasMin;
  template <class Visit>
  static HWY_INLINE void Block(const std::byte* b, const Visit& visit) {
    const std::byte* rest = b + (kHasMin ? 4 : 2);
    const I codes = _mm256_or_si256(SplitNibbles(rest + 4), FifthBits(rest));
    if constexpr (kHasMin) {
      const __m128 dm = HalfPair(b);
      visit(0, codes, _mm_cvtss_f32(dm), _mm_cvtss_f32(_mm_movehdup_ps(dm)));
    } else {
      visit(0, _mm256_sub_epi8(codes, _mm256_set1_epi8(16)), Half(b), 0.0f);
    }
  }
};
struct Q8_0 {
  static constexpr std::int64_t kElements = 32, kBytes = 34;
  static constexpr bool kSigned = true, kMin = false;
  template <class Visit>
  static HWY_INLINE void Block(const std::byte* b, const Visit& visit) {
    visit(0, Load32(b + 2), Half(b), 0.0f);
  }
};

// Q4_K / Q5_K (weight_blocks-inl.h's layout): sub-block s of 32 has scale
// d sc_s and min -dmin m_s; its codes are the low (s even) or high (s odd)
// nibbles of chunk s / 2, plus (Q5_K) bit s of each of the 32 high bytes.
template <bool kFiveBits>
struct QK {
  static constexpr std::int64_t kElements = 256, kBytes = kFiveBits ? 176 : 144;
  static constexpr bool kSigned = false, kMin = true;
  template <class Visit>
  static HWY_INLINE void Block(const std::byte* b, const Visit& visit) {
    const __m128 dm = HalfPair(b);
    const float d = _mm_cvtss_f32(dm), dmin = _mm_cvtss_f32(_mm_movehdup_ps(dm));
    const auto* scales = reinterpret_cast<const std::uint8_t*>(b + 4);
    const std::byte* q = b + (kFiveBits ? 48 : 16);
    const I high = kFiveBits ? Load32(b + 16) : _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int s = 0; s < 8; ++s) {
      const I nibble_pairs = Load32(q + 32 * (s / 2));
      I codes = s % 2 == 0 ? LowNibbles(nibble_pairs) : HighNibbles(nibble_pairs);
      if constexpr (kFiveBits) {
        const I bit = _mm256_set1_epi8(static_cast<char>(1 << s));
        const I set = _mm256_cmpeq_epi8(_mm256_and_si256(high, bit), bit);
        codes = _mm256_or_si256(codes, _mm256_and_si256(set, _mm256_set1_epi8(0x10)));
      }
      int sc, m;
      ScaleMinK4(s, scales, sc, m);
      visit(32 * s, codes, d * static_cast<float>(sc), -dmin * static_cast<float>(m));
    }
  }
};

// Q6_K: value l + 32 g of each half (l < 32, g < 4) has code (a nibble of
// low[l] or low[l + 32]) | (bits 2g, 2g + 1 of high[l]) << 4, minus 32, and
// the signed scale of its 16 values: lanes 0-3 of the dot cover l < 16.
struct Q6_K {
  static constexpr std::int64_t kElements = 256, kBytes = 210;
  static constexpr bool kSigned = true, kMin = false;
  template <class Visit>
  static HWY_INLINE void Block(const std::byte* b, const Visit& visit) {
    const float d = Half(b + 208);
    const auto* scales = reinterpret_cast<const std::int8_t*>(b + 192);
    const I three = _mm256_set1_epi8(3), thirty_two = _mm256_set1_epi8(32);
#pragma GCC unroll 2
    for (int half = 0; half < 2; ++half) {
      const I a = Load32(b + 64 * half), c = Load32(b + 64 * half + 32), h = Load32(b + 128 + 32 * half);
      const I low[4] = {LowNibbles(a), LowNibbles(c), HighNibbles(a), HighNibbles(c)};
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        const I top = _mm256_and_si256(_mm256_srli_epi16(h, 2 * g), three);
        const I codes = _mm256_sub_epi8(_mm256_or_si256(low[g], _mm256_slli_epi16(top, 4)), thirty_two);
        const std::int8_t* sc = scales + 8 * half + 2 * g;
        const F scale =
            _mm256_set_m128(_mm_set1_ps(d * static_cast<float>(sc[1])), _mm_set1_ps(d * static_cast<float>(sc[0])));
        visit(128 * half + 32 * g, codes, scale, 0.0f);
      }
    }
  }
};

// Calls body(Format{}) for a type with an integer kernel; false otherwise.
template <class Body>
HWY_INLINE bool WithFormat(GgmlType type, Body&& body) {
  switch (type) {
    case GgmlType::kQ4_0: body(Q4_0{}); return true;
    case GgmlType::kQ4_1: body(Q4_1{}); return true;
    case GgmlType::kQ5_0: body(Q5<false>{}); return true;
    case GgmlType::kQ5_1: body(Q5<true>{}); return true;
    case GgmlType::kQ8_0: body(Q8_0{}); return true;
    case GgmlType::kQ4_K: body(QK<false>{}); return true;
    case GgmlType::kQ5_K: body(QK<true>{}); return true;
    case GgmlType::kQ6_K: body(Q6_K{}); return true;
    default: return false;
  }
}

// y[i, j] = W row j . x row i for rows [begin, end) of one segment and M
// rows of x. Blocks go four at a time so that accumulator (block + run) % 4
// is a constant; every sum has one fixed order.
template <std::int64_t M, class Format>
HWY_INLINE void DotRows(const PackedWeights::Layout& w, const PackedWeights::Layout::Segment& segment,
                        const detail::Int8Rows& x, float* HWY_RESTRICT y, std::int64_t begin, std::int64_t end) {
  const std::int64_t k = w.k, runs = k / 32, blocks = k / Format::kElements;
  for (std::int64_t j = begin; j < end; ++j) {
    F acc[M][4];
    float min_acc[M][4];
    for (std::int64_t i = 0; i < M; ++i) {
      for (int s = 0; s < 4; ++s) {
        acc[i][s] = _mm256_setzero_ps();
        min_acc[i][s] = 0.0f;
      }
    }
    const std::byte* row = w.BytesFrom(segment, j);
    const auto block_at = [&](std::int64_t block, auto slot0) HWY_ATTR {
      const std::int64_t first = block * Format::kElements;
      Format::Block(row + block * Format::kBytes, [&](std::int64_t offset, I codes, auto scale, float min) HWY_ATTR {
        const std::int64_t slot = (decltype(slot0)::value + offset / 32) % 4;
        const std::int64_t run = (first + offset) / 32;  // the activations' block
        for (std::int64_t i = 0; i < M; ++i) {
          const I q = Load32(x.q + i * k + first + offset);
          const I dot = Format::kSigned ? DotSigned(codes, q) : DotUnsigned(codes, q);
          F scales;  // d_w d_x per int32 lane: one scalar product, or Q6_K's two
          if constexpr (std::is_same_v<decltype(scale), float>) {
            scales = _mm256_set1_ps(scale * x.scale[i * runs + run]);
          } else {
            scales = _mm256_mul_ps(scale, _mm256_set1_ps(x.scale[i * runs + run]));
          }
          acc[i][slot] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scales, acc[i][slot]);
          if constexpr (Format::kMin) min_acc[i][slot] = std::fma(min, x.scaled_sum[i * runs + run], min_acc[i][slot]);
        }
      });
    };
    std::int64_t block = 0;
    for (; block + 4 <= blocks; block += 4) {
      block_at(block, std::integral_constant<int, 0>());
      block_at(block + 1, std::integral_constant<int, 1>());
      block_at(block + 2, std::integral_constant<int, 2>());
      block_at(block + 3, std::integral_constant<int, 3>());
    }
    for (; block < blocks; ++block) block_at(block, std::integral_constant<int, 0>());
    for (std::int64_t i = 0; i < M; ++i) {
      const F sum = _mm256_add_ps(_mm256_add_ps(acc[i][0], acc[i][1]), _mm256_add_ps(acc[i][2], acc[i][3]));
      const __m128 four = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
      const __m128 two = _mm_add_ps(four, _mm_movehl_ps(four, four));
      const float lanes = _mm_cvtss_f32(_mm_add_ss(two, _mm_movehdup_ps(two)));
      y[i * w.n + j] = lanes + ((min_acc[i][0] + min_acc[i][1]) + (min_acc[i][2] + min_acc[i][3]));
    }
  }
}

// Rows in groups of 8 (row_groups.h), rows [begin, end) whole groups: row
// r of a group in int32 lane r. Per block, code vector v holds each row's
// code bytes 4v..4v+3, so `pmaddubsw` against those 4 bytes of x broadcast
// to every lane gives each row's products in its own lane:
// - 4-bit codes (Q4_0, Q4_1): the low nibbles are weights 4v..4v+3 and the
//   high ones 16+4v..16+4v+3; all 8 products of a block fit in int16
//   (8 x 2 x 15 x 127 < 2^15), then one `pmaddwd` makes them int32. Q4_0's
//   codes are c - 8 with c in [0, 15]: its min is -8 d.
// - Q5_0: the same nibbles (from vector 1 on) with each weight's fifth bit
//   (FifthBitsOf) as 0x10; codes c - 16 with c in [0, 31], min -16 d; 4
//   products of 5-bit codes fit in int16 (4 x 2 x 31 x 127 < 2^15), so
//   `pmaddwd` runs after each half of the block.
// - Q8_0: signed codes as in DotSigned, each vector's pairs into int32.
// - Q4_K, Q5_K: super-blocks of 256 with a scale and a min a sub-block of
//   32 (QKSuper); Q6_K: super-blocks of 256 with a signed scale a sub-block
//   of 16 (Q6KSuper).
// Then per block, for the 8 rows at once: y += float(dot) (d_w d_x) (two
// accumulators, blocks alternating) and the min terms m_w (d_x sum q), in a
// fixed order: a row's sum does not depend on how the rows are split.
template <GgmlType kType>
constexpr detail::GroupedBlock kGroupedBlock = *detail::GroupedBlockOf(kType);

// A shift count for the _mm256_s?l_epi* shifts, which take it from a
// register: the K-quant kernels run their sub-blocks as a loop, not as
// copies of the code for each (a function of several thousand instructions
// under the sanitizers' instrumentation took minutes to compile).
HWY_INLINE __m128i Bits(int count) { return _mm_cvtsi32_si128(count); }

// Q5_0's fifth bits of weights first .. first+3 of each row, from the rows'
// 32-bit masks (lane r: row r's, bit j for weight j): byte b of lane r is
// 0x10 if bit first + b is set. The multiply by the sum of 2^(7b + 4) moves
// bit b of the 4 bits to bit 8b + 4, and no two partial products meet
// (7b + c = 7b2 + c2 for b, c, b2, c2 in [0, 3] only where b = b2, c = c2).
HWY_INLINE I FifthBitsOf(I masks, int first) {
  const I four = _mm256_and_si256(_mm256_srl_epi32(masks, Bits(first)), _mm256_set1_epi32(0xF));
  return _mm256_and_si256(_mm256_mullo_epi32(four, _mm256_set1_epi32(0x02040810)), _mm256_set1_epi32(0x10101010));
}

// The 4 bytes of x row i's block b (of 32) from byte `at`, in every int32
// lane (x's rows k apart).
HWY_INLINE I XWord(const detail::Int8Rows& x, std::int64_t k, std::int64_t i, std::int64_t b, std::int64_t at) {
  std::int32_t word;
  std::memcpy(&word, x.q + i * k + 32 * b + at, 4);
  return _mm256_set1_epi32(word);
}

// Sub-block s's 6-bit scale and min for the 8 rows of a group (lane r: row
// r), from the rows' 12 scale bytes as three vectors of 4: ScaleMinK4 lane
// by lane.
HWY_INLINE void ScaleMinK4Lanes(const I (&bytes)[3], int s, I& scale, I& min) {
  const I six_bits = _mm256_set1_epi32(63), four_bits = _mm256_set1_epi32(0xF), two_bits = _mm256_set1_epi32(3);
  if (s < 4) {
    scale = _mm256_and_si256(_mm256_srl_epi32(bytes[0], Bits(8 * s)), six_bits);
    min = _mm256_and_si256(_mm256_srl_epi32(bytes[1], Bits(8 * s)), six_bits);
  } else {
    const int t = s - 4;
    const I scale_high = _mm256_and_si256(_mm256_srl_epi32(bytes[0], Bits(8 * t + 6)), two_bits);
    const I min_high = _mm256_and_si256(_mm256_srl_epi32(bytes[1], Bits(8 * t + 6)), two_bits);
    scale = _mm256_or_si256(_mm256_and_si256(_mm256_srl_epi32(bytes[2], Bits(8 * t)), four_bits),
                            _mm256_slli_epi32(scale_high, 4));
    min = _mm256_or_si256(_mm256_and_si256(_mm256_srl_epi32(bytes[2], Bits(8 * t + 4)), four_bits),
                          _mm256_slli_epi32(min_high, 4));
  }
}

// One Q4_K or Q5_K super-block of a group (row_groups.h: d and dmin, then
// the 12 scale bytes as vectors 0-2, Q5_K's 32 bytes of fifth bits as
// vectors 3-10, and 4 chunks of 32 nibble bytes as vectors kCodes + 8c + u)
// against M rows of x. Chunk c's low nibbles are sub-block 2c, its high
// ones sub-block 2c + 1, weights 4u..4u+3 of each in vector kCodes + 8c +
// u; Q5_K's fifth bit of those weights is bit s of the bytes of fifth-bit
// vector 3 + u. A sub-block's int16 sums take 8 products a lane of 4-bit
// codes (8 x 2 x 15 x 127 < 2^15), 4 of 5-bit ones, then go to int32; its
// scale and min are unpacked for the 8 rows at once; it adds float(dot)
// (d sc) d_x to accumulator s % 2 and -(dmin m) (d_x sum q) to the min's.
template <std::int64_t M, bool kFiveBits>
struct QKSuper {
  static constexpr detail::GroupedBlock kBlock = *detail::GroupedBlockOf(kFiveBits ? GgmlType::kQ5_K : GgmlType::kQ4_K);
  static constexpr std::int64_t kCodes = kFiveBits ? 11 : 3;  // the first nibble vector
  static constexpr std::int64_t kRun = kFiveBits ? 4 : 8;     // words a run of int16 sums takes
  const std::byte* block;
  const I (&scale_bytes)[3];
  F d, dmin;
  const detail::Int8Rows& x;
  std::int64_t k, first_run;  // x's block of sub-block 0

  HWY_INLINE void Chunk(int chunk, F (&acc)[M][2], F (&min_acc)[M]) const {
    const I nibble = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1), bit = _mm256_set1_epi8(1);
    const std::int64_t run = first_run + 2 * chunk;
    I low[M], high[M];  // int32 sums of the products of sub-blocks 2c and 2c + 1
    for (std::int64_t i = 0; i < M; ++i) low[i] = high[i] = _mm256_setzero_si256();
#pragma GCC unroll 2
    for (std::int64_t first = 0; first < 8; first += kRun) {
      I low_pairs[M], high_pairs[M];  // int16 sums of the run's products
      for (std::int64_t i = 0; i < M; ++i) low_pairs[i] = high_pairs[i] = _mm256_setzero_si256();
#pragma GCC unroll 8
      for (std::int64_t u = first; u < first + kRun; ++u) {
        const I codes = Load32(block + kBlock.WordAt(kCodes + 8 * chunk + u, 0));
        I low_codes = _mm256_and_si256(codes, nibble);
        I high_codes = _mm256_and_si256(_mm256_srli_epi16(codes, 4), nibble);
        if constexpr (kFiveBits) {
          const I fifth = Load32(block + kBlock.WordAt(3 + u, 0));
          low_codes = _mm256_or_si256(
              low_codes, _mm256_slli_epi32(_mm256_and_si256(_mm256_srl_epi32(fifth, Bits(2 * chunk)), bit), 4));
          high_codes = _mm256_or_si256(
              high_codes, _mm256_slli_epi32(_mm256_and_si256(_mm256_srl_epi32(fifth, Bits(2 * chunk + 1)), bit), 4));
        }
        for (std::int64_t i = 0; i < M; ++i) {
          low_pairs[i] = _mm256_add_epi16(low_pairs[i], _mm256_maddubs_epi16(low_codes, XWord(x, k, i, run, 4 * u)));
          high_pairs[i] =
              _mm256_add_epi16(high_pairs[i], _mm256_maddubs_epi16(high_codes, XWord(x, k, i, run + 1, 4 * u)));
        }
      }
      for (std::int64_t i = 0; i < M; ++i) {
        low[i] = _mm256_add_epi32(low[i], _mm256_madd_epi16(low_pairs[i], ones));
        high[i] = _mm256_add_epi32(high[i], _mm256_madd_epi16(high_pairs[i], ones));
      }
    }
    SubBlock<0>(2 * chunk, low, acc, min_acc);
    SubBlock<1>(2 * chunk + 1, high, acc, min_acc);
  }

  // Sub-block s into accumulator kSlot = s % 2.
  template <int kSlot>
  HWY_INLINE void SubBlock(int s, const I (&dots)[M], F (&acc)[M][2], F (&min_acc)[M]) const {
    I scale_code, min_code;
    ScaleMinK4Lanes(scale_bytes, s, scale_code, min_code);
    const F scale = _mm256_mul_ps(d, _mm256_cvtepi32_ps(scale_code));  // exact: 11 x 6 bits
    const F min = _mm256_mul_ps(dmin, _mm256_cvtepi32_ps(min_code));
    const std::int64_t runs = k / 32, b = first_run + s;
    for (std::int64_t i = 0; i < M; ++i) {
      acc[i][kSlot] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots[i]),
                                      _mm256_mul_ps(scale, _mm256_set1_ps(x.scale[i * runs + b])), acc[i][kSlot]);
      min_acc[i] = _mm256_fnmadd_ps(min, _mm256_set1_ps(x.scaled_sum[i * runs + b]), min_acc[i]);
    }
  }
};

// One Q6_K super-block of a group (row_groups.h: d, then vectors 0-3 of
// signed scales, and per half h (weights 128h ..) 8 vectors of high bits
// from 4 + 24h and 16 of low nibbles from 12 + 24h) against M rows of x.
// Quarter g of half h takes the low (g < 2) or high nibbles of low vector
// 8 (g % 2) + u and bits 2g, 2g + 1 of high vector u: codes c in [0, 63]
// for weights 128h + 32g + 4u .. 4u+3, weighing d sc (c - 32). Each
// sub-block of 16 (u < 4, u >= 4) has its own signed scale sc; its products
// fit in int16 (4 x 2 x 32 x 127 < 2^15), the signed codes going in as
// DotSigned's; it adds float(dot) (d sc) d_x to accumulator u / 4.
template <std::int64_t M>
struct Q6KSuper {
  static constexpr detail::GroupedBlock kBlock = *detail::GroupedBlockOf(GgmlType::kQ6_K);
  const std::byte* block;
  F d;
  const detail::Int8Rows& x;
  std::int64_t k, first_run;  // x's block of the super-block's first 32 weights

  HWY_INLINE void Quarter(int half, int quarter, F (&acc)[M][2]) const {
    SubBlock<0>(half, quarter, acc);
    SubBlock<1>(half, quarter, acc);
  }

  template <int kSub>
  HWY_INLINE void SubBlock(int half, int quarter, F (&acc)[M][2]) const {
    const I nibble = _mm256_set1_epi8(0x0F), three = _mm256_set1_epi8(3), thirty_two = _mm256_set1_epi8(32);
    const std::int64_t run = first_run + 4 * half + quarter;
    I pairs[M];  // int16 sums of the sub-block's products
    for (I& pair : pairs) pair = _mm256_setzero_si256();
#pragma GCC unroll 4
    for (std::int64_t u = 4 * kSub; u < 4 * kSub + 4; ++u) {
      const I nibbles = Load32(block + kBlock.WordAt(12 + 24 * half + 8 * (quarter % 2) + u, 0));
      const I low = _mm256_and_si256(_mm256_srl_epi16(nibbles, Bits(quarter < 2 ? 0 : 4)), nibble);
      const I top = _mm256_and_si256(
          _mm256_srl_epi16(Load32(block + kBlock.WordAt(4 + 24 * half + u, 0)), Bits(2 * quarter)), three);
      const I codes = _mm256_sub_epi8(_mm256_or_si256(low, _mm256_slli_epi16(top, 4)), thirty_two);
      const I magnitude = _mm256_abs_epi8(codes);
      for (std::int64_t i = 0; i < M; ++i) {
        pairs[i] = _mm256_add_epi16(
            pairs[i], _mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(XWord(x, k, i, run, 4 * u), codes)));
      }
    }
    // Byte s % 4 of scale vector s / 4, sign-extended.
    const int s = 8 * half + 2 * quarter + kSub;
    const I scales = Load32(block + kBlock.WordAt(s / 4, 0));
    const I code = _mm256_srai_epi32(_mm256_sll_epi32(scales, Bits(24 - 8 * (s % 4))), 24);
    const F scale = _mm256_mul_ps(d, _mm256_cvtepi32_ps(code));  // exact: 11 x 8 bits
    const std::int64_t runs = k / 32;
    for (std::int64_t i = 0; i < M; ++i) {
      const I dot = _mm256_madd_epi16(pairs[i], _mm256_set1_epi16(1));
      acc[i][kSub] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot),
                                     _mm256_mul_ps(scale, _mm256_set1_ps(x.scale[i * runs + run])), acc[i][kSub]);
    }
  }
};

template <GgmlType kType, std::int64_t M>
HWY_INLINE void DotGroups(const PackedWeights::Layout& w, const PackedWeights::Layout::Segment& segment,
                          const detail::Int8Rows& x, float* HWY_RESTRICT y, std::int64_t begin, std::int64_t end) {
  constexpr const detail::GroupedBlock& kBlock = kGroupedBlock<kType>;
  constexpr bool kNibbles = kType != GgmlType::kQ8_0, kMin = kType != GgmlType::kQ8_0;
  constexpr bool kFifth = kType == GgmlType::kQ5_0;
  constexpr std::int64_t kFirstCodes = kFifth ? 1 : 0;  // the first code vector
  // Code vectors a run of int16 sums may take (two pmaddubsw each).
  constexpr std::int64_t kRun = kFifth ? 2 : 4;
  const std::int64_t k = w.k, blocks = k / 32;
  const I nibble = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  for (std::int64_t j = begin; j < end; j += detail::kGroupRows) {
    const std::byte* group = w.BytesFrom(segment, j);
    F acc[M][2], min_acc[M];
    for (std::int64_t i = 0; i < M; ++i) acc[i][0] = acc[i][1] = min_acc[i] = _mm256_setzero_ps();
    if constexpr (kType == GgmlType::kQ4_K || kType == GgmlType::kQ5_K) {
      for (std::int64_t super = 0; super < k / 256; ++super) {
        const std::byte* block = group + super * detail::kGroupRows * kBlock.Bytes();
        const F d = _mm256_cvtph_ps(Load16(block)), dmin = _mm256_cvtph_ps(Load16(block + kBlock.FieldAt(1, 0)));
        const I scale_bytes[3] = {Load32(block + kBlock.WordAt(0, 0)), Load32(block + kBlock.WordAt(1, 0)),
                                  Load32(block + kBlock.WordAt(2, 0))};
        const QKSuper<M, kType == GgmlType::kQ5_K> at{block, scale_bytes, d, dmin, x, k, 8 * super};
        for (int chunk = 0; chunk < 4; ++chunk) at.Chunk(chunk, acc, min_acc);
      }
    } else if constexpr (kType == GgmlType::kQ6_K) {
      for (std::int64_t super = 0; super < k / 256; ++super) {
        const std::byte* block = group + super * detail::kGroupRows * kBlock.Bytes();
        const Q6KSuper<M> at{block, _mm256_cvtph_ps(Load16(block)), x, k, 8 * super};
        for (int half = 0; half < 2; ++half) {
          for (int quarter = 0; quarter < 4; ++quarter) at.Quarter(half, quarter, acc);
        }
      }
    } else {
      // Block b into accumulator `slot` (a constant, so that the accumulators
      // stay in registers).
      const auto block_at = [&](std::int64_t b, auto slot) HWY_ATTR {
        const std::byte* block = group + b * detail::kGroupRows * kBlock.Bytes();
        I dots[M];  // int32 sums of the products
        for (I& dot : dots) dot = _mm256_setzero_si256();
        if constexpr (kNibbles) {
          const I fifth = kFifth ? Load32(block + kBlock.WordAt(0, 0)) : _mm256_setzero_si256();
#pragma GCC unroll 4
          for (std::int64_t run = 0; run < 4; run += kRun) {
            I pairs[M];  // int16 sums of the run's products
            for (I& pair : pairs) pair = _mm256_setzero_si256();
#pragma GCC unroll 4
            for (std::int64_t v = run; v < run + kRun; ++v) {
              const I codes = Load32(block + kBlock.WordAt(kFirstCodes + v, 0));
              I low = _mm256_and_si256(codes, nibble), high = _mm256_and_si256(_mm256_srli_epi16(codes, 4), nibble);
              if constexpr (kFifth) {
                low = _mm256_or_si256(low, FifthBitsOf(fifth, static_cast<int>(4 * v)));
                high = _mm256_or_si256(high, FifthBitsOf(fifth, static_cast<int>(16 + 4 * v)));
              }
              for (std::int64_t i = 0; i < M; ++i) {
                pairs[i] = _mm256_add_epi16(pairs[i], _mm256_maddubs_epi16(low, XWord(x, k, i, b, 4 * v)));
                pairs[i] = _mm256_add_epi16(pairs[i], _mm256_maddubs_epi16(high, XWord(x, k, i, b, 16 + 4 * v)));
              }
            }
            for (std::int64_t i = 0; i < M; ++i) dots[i] = _mm256_add_epi32(dots[i], _mm256_madd_epi16(pairs[i], ones));
          }
        } else {
#pragma GCC unroll 8
          for (std::int64_t v = 0; v < kBlock.words; ++v) {
            const I codes = Load32(block + kBlock.WordAt(v, 0));
            for (std::int64_t i = 0; i < M; ++i)
              dots[i] = _mm256_add_epi32(dots[i], DotSigned(codes, XWord(x, k, i, b, 4 * v)));
          }
        }
        const F d = _mm256_cvtph_ps(Load16(block));
        F m = _mm256_setzero_ps();
        if constexpr (kType == GgmlType::kQ4_1) m = _mm256_cvtph_ps(Load16(block + kBlock.FieldAt(1, 0)));
        if constexpr (kType == GgmlType::kQ4_0) m = _mm256_mul_ps(d, _mm256_set1_ps(-8.0f));   // exact
        if constexpr (kType == GgmlType::kQ5_0) m = _mm256_mul_ps(d, _mm256_set1_ps(-16.0f));  // exact
        for (std::int64_t i = 0; i < M; ++i) {
          F& sum = acc[i][decltype(slot)::value];
          sum = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dots[i]), _mm256_mul_ps(d, _mm256_set1_ps(x.scale[i * blocks + b])),
                                sum);
          if constexpr (kMin) {
            min_acc[i] = _mm256_fmadd_ps(m, _mm256_set1_ps(x.scaled_sum[i * blocks + b]), min_acc[i]);
          }
        }
      };
      std::int64_t b = 0;
      for (; b + 2 <= blocks; b += 2) {
        block_at(b, std::integral_constant<int, 0>());
        block_at(b + 1, std::integral_constant<int, 1>());
      }
      if (b < blocks) block_at(b, std::integral_constant<int, 0>());
    }
    for (std::int64_t i = 0; i < M; ++i) {
      _mm256_storeu_ps(y + i * w.n + j, _mm256_add_ps(_mm256_add_ps(acc[i][0], acc[i][1]), min_acc[i]));
    }
  }
}

template <GgmlType kType>
HWY_INLINE void DotGroupsOf(const PackedWeights::Layout& w, const PackedWeights::Layout::Segment& segment,
                            const detail::Int8Rows& x, float* y, std::int64_t begin, std::int64_t end) {
  switch (x.m) {
    case 1: return DotGroups<kType, 1>(w, segment, x, y, begin, end);
    case 2: return DotGroups<kType, 2>(w, segment, x, y, begin, end);
    case 3: return DotGroups<kType, 3>(w, segment, x, y, begin, end);
    default: return DotGroups<kType, 4>(w, segment, x, y, begin, end);
  }
}

// W rows [begin, end) of `segment` against x; false (nothing done) for a
// type without an integer kernel.
HWY_INLINE bool DotSegment(const PackedWeights::Layout& w, const PackedWeights::Layout::Segment& segment,
                           const detail::Int8Rows& x, float* y, std::int64_t begin, std::int64_t end) {
  if (segment.order == PackedWeights::Layout::RowOrder::kGroupsOf8) {
    switch (segment.type) {
      case GgmlType::kQ4_0: DotGroupsOf<GgmlType::kQ4_0>(w, segment, x, y, begin, end); return true;
      case GgmlType::kQ4_1: DotGroupsOf<GgmlType::kQ4_1>(w, segment, x, y, begin, end); return true;
      case GgmlType::kQ5_0: DotGroupsOf<GgmlType::kQ5_0>(w, segment, x, y, begin, end); return true;
      case GgmlType::kQ4_K: DotGroupsOf<GgmlType::kQ4_K>(w, segment, x, y, begin, end); return true;
      case GgmlType::kQ5_K: DotGroupsOf<GgmlType::kQ5_K>(w, segment, x, y, begin, end); return true;
      case GgmlType::kQ6_K: DotGroupsOf<GgmlType::kQ6_K>(w, segment, x, y, begin, end); return true;
      default: DotGroupsOf<GgmlType::kQ8_0>(w, segment, x, y, begin, end); return true;
    }
  }
  return WithFormat(segment.type, [&](auto format) HWY_ATTR {
    using Format = decltype(format);
    switch (x.m) {
      case 1: return DotRows<1, Format>(w, segment, x, y, begin, end);
      case 2: return DotRows<2, Format>(w, segment, x, y, begin, end);
      case 3: return DotRows<3, Format>(w, segment, x, y, begin, end);
      default: return DotRows<4, Format>(w, segment, x, y, begin, end);
    }
  });
}

#else
HWY_INLINE bool DotSegment(const PackedWeights::Layout&, const PackedWeights::Layout::Segment&, const detail::Int8Rows&,
                           float*, std::int64_t, std::int64_t) {
  return false;
}
#endif  // HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2

}  // namespace posenc::HWY_NAMESPACE::int8_dot
HWY_AFTER_NAMESPACE();

#endif  // include guard
