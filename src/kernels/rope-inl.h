// Per-target RoPE kernel (compiled once per SIMD target via foreach_target).
//
// For each token: cos/sin of its angles are computed once into float32
// tables, then every head of every operand (q, k, ...) is rotated with
// float32 FMAs. The inverse direction is the same code with the sine negated.
//
// Angles: p * w is formed and reduced to a quarter turn in double,
//   p w = n pi/2 + r,  |r| <= pi/4,
// so position 10^6 loses nothing; sin r and cos r then come from short
// Taylor polynomials in float32 (max |error| 6.8e-8 measured over positions
// up to 1.2e8, about one float32 rounding), and the quadrant n mod 4 swaps
// and negates them. This costs a fraction of double-precision sin and cos
// (which took ~280 ns a token for 64 pairs and made bf16 compute-bound;
// now ~65 ns).
//
// Results depend only on (input, position, frequency): any split of the tokens
// across threads gives bitwise the same output.
#if defined(POSENC_ROPE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_ROPE_INL_H_
#undef POSENC_ROPE_INL_H_
#else
#define POSENC_ROPE_INL_H_
#endif

#include <cstring>
#include <type_traits>

#include "kernels/angle_reduction-inl.h"
#include "hwy/aligned_allocator.h"
#include "hwy/highway.h"
#include "kernels/rope_kernel.h"
#include "kernels/simd_io-inl.h"

HWY_BEFORE_NAMESPACE();
namespace posenc::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Angles p * f for Lanes(df) frequencies, reduced in double to
// p f = n pi/2 + r with |r| <= pi/4; returns r and n mod 4 as float32.
template <class DF>
HWY_INLINE void ReduceQuarterTurns(DF df, const double* HWY_RESTRICT freq, double position, hn::Vec<DF>& r_out,
                                   hn::Vec<DF>& q_out) {
#if HWY_TARGET == HWY_SCALAR
  const DF dh;  // one lane: nothing to combine
#else
  const hn::Half<DF> dh;  // float halves; their double vectors are full width
#endif
  const hn::Rebind<double, decltype(dh)> dd;
  using VH = hn::Vec<decltype(dh)>;
  const auto reduce = [&](const double* f, VH& r_half, VH& q_half) {
    const auto angle = hn::Mul(hn::Set(dd, position), hn::LoadU(dd, f));
    hn::Vec<decltype(dd)> turns;
    const auto r = ReduceAngle(dd, angle, kQuarterTurn, turns);
    // n mod 4 = n - 4 floor(n / 4), exact in double.
    const auto q = hn::NegMulAdd(hn::Set(dd, 4.0), hn::Floor(hn::Mul(turns, hn::Set(dd, 0.25))), turns);
    r_half = hn::DemoteTo(dh, r);
    q_half = hn::DemoteTo(dh, q);
  };
#if HWY_TARGET == HWY_SCALAR
  (void)df;
  reduce(freq, r_out, q_out);
#else
  VH r_lo, r_hi, q_lo, q_hi;
  reduce(freq, r_lo, q_lo);
  reduce(freq + hn::Lanes(dh), r_hi, q_hi);
  r_out = hn::Combine(df, r_hi, r_lo);
  q_out = hn::Combine(df, q_hi, q_lo);
#endif
}

// The table of one token: cos_table[i] = cos_scale * cos(p f_i) and
// sin_table[i] = sin_scale * sin(p f_i), with sin_scale negated on even i when
// `alternate` (the [-s0 s0 -s1 s1 ...] form of the interleaved layout).
// n is a multiple of Lanes(float); freq is zero-padded up to it.
inline void FillTrigTables(const double* HWY_RESTRICT freq, size_t n, double position, float cos_scale, float sin_scale,
                           bool alternate, float* HWY_RESTRICT cos_table, float* HWY_RESTRICT sin_table) {
  const hn::ScalableTag<float> df;
  const auto one = hn::Set(df, 1.0f);
  const auto two = hn::Set(df, 2.0f);
  const auto three = hn::Set(df, 3.0f);
  // Taylor coefficients; on |r| <= pi/4 the first omitted terms are below
  // 2e-9 (sin) and 2e-10 (cos).
  const auto s3 = hn::Set(df, -1.0f / 6), s5 = hn::Set(df, 1.0f / 120);
  const auto s7 = hn::Set(df, -1.0f / 5040), s9 = hn::Set(df, 1.0f / 362880);
  const auto c2 = hn::Set(df, -0.5f), c4 = hn::Set(df, 1.0f / 24), c6 = hn::Set(df, -1.0f / 720);
  const auto c8 = hn::Set(df, 1.0f / 40320), c10 = hn::Set(df, -1.0f / 3628800);
  const auto cos_mult = hn::Set(df, cos_scale);
#if HWY_TARGET == HWY_SCALAR
  // One lane: the alternating sign goes by the entry's parity.
  const auto sin_multiplier = [&](size_t i) { return hn::Set(df, alternate && i % 2 == 0 ? -sin_scale : sin_scale); };
#else
  const auto sin_mult_all =
      alternate ? hn::OddEven(hn::Set(df, sin_scale), hn::Set(df, -sin_scale)) : hn::Set(df, sin_scale);
  const auto sin_multiplier = [&](size_t) { return sin_mult_all; };
#endif

  for (size_t i = 0; i < n; i += hn::Lanes(df)) {
    const auto sin_mult = sin_multiplier(i);
    hn::Vec<decltype(df)> r, q;
    ReduceQuarterTurns(df, freq + i, position, r, q);

    const auto r2 = hn::Mul(r, r);
    const auto sin_poly = hn::MulAdd(r2, hn::MulAdd(r2, hn::MulAdd(r2, s9, s7), s5), s3);
    const auto sin_r = hn::MulAdd(hn::Mul(r, r2), sin_poly, r);
    const auto cos_r =
        hn::MulAdd(r2, hn::MulAdd(r2, hn::MulAdd(r2, hn::MulAdd(r2, hn::MulAdd(r2, c10, c8), c6), c4), c2), one);

    // Quadrant: sin(r + n pi/2) = sin r, cos r, -sin r, -cos r for n mod 4 = 0..3.
    const auto q1 = hn::Eq(q, one);
    const auto q2 = hn::Eq(q, two);
    const auto q3 = hn::Eq(q, three);
    const auto swap = hn::Or(q1, q3);
    const auto sin_v = hn::IfThenElse(swap, cos_r, sin_r);
    const auto cos_v = hn::IfThenElse(swap, sin_r, cos_r);
    const auto sin_m = hn::IfThenElse(hn::Or(q2, q3), hn::Neg(sin_mult), sin_mult);
    const auto cos_m = hn::IfThenElse(hn::Or(q1, q2), hn::Neg(cos_mult), cos_mult);
    hn::Store(hn::Mul(cos_v, cos_m), df, cos_table + i);
    hn::Store(hn::Mul(sin_v, sin_m), df, sin_table + i);
  }
}

// Half-split: y_k = x_k c_k - x_{k+P} s_k,  y_{k+P} = x_k s_k + x_{k+P} c_k.
template <typename T>
HWY_INLINE void RotateHalfSplit(const T* HWY_RESTRICT in, T* out, size_t pairs, const float* HWY_RESTRICT cos_table,
                                const float* HWY_RESTRICT sin_table) {
  const hn::ScalableTag<float> df;
  const size_t lanes = hn::Lanes(df);
  const auto rotate = [&](auto x1, auto x2, size_t k, auto&& store) {
    const auto c = hn::Load(df, cos_table + k);
    const auto s = hn::Load(df, sin_table + k);
    store(hn::MulSub(x1, c, hn::Mul(x2, s)), hn::MulAdd(x1, s, hn::Mul(x2, c)));
  };
  size_t k = 0;
  for (; k + lanes <= pairs; k += lanes) {
    rotate(LoadF32(df, in + k), LoadF32(df, in + pairs + k), k, [&](auto y1, auto y2) {
      StoreF32(df, y1, out + k);
      StoreF32(df, y2, out + pairs + k);
    });
  }
  if (k < pairs) {
    const size_t count = pairs - k;
    rotate(LoadPartialF32(df, in + k, count), LoadPartialF32(df, in + pairs + k, count), k, [&](auto y1, auto y2) {
      StorePartialF32(df, y1, out + k, count);
      StorePartialF32(df, y2, out + pairs + k, count);
    });
  }
}

// Interleaved: with c2 = [c0 c0 c1 c1 ...] and s2 = [-s0 s0 -s1 s1 ...],
// y = x * c2 + swap_pairs(x) * s2. Vectors hold whole pairs (even lane count).
template <typename T>
HWY_INLINE void RotateInterleaved(const T* HWY_RESTRICT in, T* out, size_t rotary_dim, const float* HWY_RESTRICT c2,
                                  const float* HWY_RESTRICT s2) {
  const hn::ScalableTag<float> df;
#if HWY_TARGET == HWY_SCALAR
  // One lane cannot hold a pair: rotate pair by pair (c2[i] = c_k, s2[i+1] = s_k).
  for (size_t i = 0; i < rotary_dim; i += 2) {
    const auto x0 = LoadPartialF32(df, in + i, 1), x1 = LoadPartialF32(df, in + i + 1, 1);
    const auto c = hn::Set(df, c2[i]), s = hn::Set(df, s2[i + 1]);
    StorePartialF32(df, hn::MulSub(x0, c, hn::Mul(x1, s)), out + i, 1);
    StorePartialF32(df, hn::MulAdd(x0, s, hn::Mul(x1, c)), out + i + 1, 1);
  }
  return;
#endif
  const size_t lanes = hn::Lanes(df);
  const auto rotate = [&](auto x, size_t i) {
    return hn::MulAdd(x, hn::Load(df, c2 + i), hn::Mul(hn::Reverse2(df, x), hn::Load(df, s2 + i)));
  };
  size_t i = 0;
  for (; i + lanes <= rotary_dim; i += lanes) StoreF32(df, rotate(LoadF32(df, in + i), i), out + i);
  if (i < rotary_dim) {
    const size_t count = rotary_dim - i;
    StorePartialF32(df, rotate(LoadPartialF32(df, in + i, count), i), out + i, count);
  }
}

// bf16 without shuffles: a vector of 2N bf16 read as N uint32 holds the even
// elements in the low halves and the odd ones in the high halves, so
// `bits << 16` and `bits & 0xFFFF0000` are the even and odd elements as
// float32. Rotating those needs the tables in the same even/odd order, and
// writing back is two roundings and an OR, not a pack and a permute.
struct Bf16EvenOdd {
  using DU = hn::ScalableTag<uint32_t>;
  using DF = hn::ScalableTag<float>;
  template <class V>
  static HWY_INLINE hn::Vec<DF> Even(V bits) {
    return hn::BitCast(DF(), hn::ShiftLeft<16>(bits));
  }
  template <class V>
  static HWY_INLINE hn::Vec<DF> Odd(V bits) {
    return hn::BitCast(DF(), hn::And(bits, hn::Set(DU(), 0xFFFF0000u)));
  }
  // float32 -> bf16 bits in the top half, rounded to nearest even (as StoreF32).
  static HWY_INLINE hn::Vec<DU> Round(hn::Vec<DF> v) {
    const DU du;
    const auto bits = hn::BitCast(du, v);
    const auto lsb = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 1u));
    return hn::Add(hn::Add(bits, hn::Set(du, 0x7FFFu)), lsb);
  }
  static HWY_INLINE hn::Vec<DU> Pack(hn::Vec<DF> even, hn::Vec<DF> odd) {
    const DU du;
    return hn::Or(hn::ShiftRight<16>(Round(even)), hn::And(Round(odd), hn::Set(du, 0xFFFF0000u)));
  }
  static HWY_INLINE hn::Vec<DU> Load(const hwy::bfloat16_t* p) {
    return hn::LoadU(DU(), reinterpret_cast<const uint32_t*>(p));
  }
  static HWY_INLINE void Store(hn::Vec<DU> v, hwy::bfloat16_t* p) {
    hn::StoreU(v, DU(), reinterpret_cast<uint32_t*>(p));
  }
};

// Half-split bf16, pairs a multiple of 2N; tables in blocks of 2N pairs,
// each the N even pairs then the N odd ones.
HWY_INLINE void RotateHalfSplitBf16(const hwy::bfloat16_t* HWY_RESTRICT in, hwy::bfloat16_t* out, size_t pairs,
                                    const float* HWY_RESTRICT cos_table, const float* HWY_RESTRICT sin_table) {
  using B = Bf16EvenOdd;
  const hn::ScalableTag<float> df;
  const size_t lanes = hn::Lanes(df);
  for (size_t k = 0; k < pairs; k += 2 * lanes) {
    const auto v1 = B::Load(in + k), v2 = B::Load(in + pairs + k);
    const auto ce = hn::Load(df, cos_table + k), co = hn::Load(df, cos_table + k + lanes);
    const auto se = hn::Load(df, sin_table + k), so = hn::Load(df, sin_table + k + lanes);
    const auto x1e = B::Even(v1), x1o = B::Odd(v1), x2e = B::Even(v2), x2o = B::Odd(v2);
    const auto y1e = hn::MulSub(x1e, ce, hn::Mul(x2e, se));
    const auto y1o = hn::MulSub(x1o, co, hn::Mul(x2o, so));
    const auto y2e = hn::MulAdd(x1e, se, hn::Mul(x2e, ce));
    const auto y2o = hn::MulAdd(x1o, so, hn::Mul(x2o, co));
    B::Store(B::Pack(y1e, y1o), out + k);
    B::Store(B::Pack(y2e, y2o), out + pairs + k);
  }
}

// Interleaved bf16, pairs a multiple of N: the even/odd halves are exactly
// the two members of each pair, so the tables are per pair, in order.
HWY_INLINE void RotateInterleavedBf16(const hwy::bfloat16_t* HWY_RESTRICT in, hwy::bfloat16_t* out, size_t pairs,
                                      const float* HWY_RESTRICT cos_table, const float* HWY_RESTRICT sin_table) {
  using B = Bf16EvenOdd;
  const hn::ScalableTag<float> df;
  const size_t lanes = hn::Lanes(df);
  for (size_t k = 0; k < pairs; k += lanes) {
    const auto v = B::Load(in + 2 * k);
    const auto c = hn::Load(df, cos_table + k), s = hn::Load(df, sin_table + k);
    const auto e = B::Even(v), o = B::Odd(v);
    // The same roundings as RotateInterleaved: e c - o s and o c + e s.
    const auto ye = hn::MulSub(e, c, hn::Mul(o, s));
    const auto yo = hn::MulAdd(o, c, hn::Mul(e, s));
    B::Store(B::Pack(ye, yo), out + 2 * k);
  }
}

enum class TableForm {
  kPairs,        // entry k: pair k (half-split)
  kExpanded,     // entry i: pair i/2, sine negated on even i (interleaved)
  kEvenOddPairs  // blocks of 2N pairs: the even pairs, then the odd ones (half-split bf16)
};

template <typename T>
void RotateTokens(const detail::RopeKernelPlan& plan, int64_t begin, int64_t end) {
  const hn::ScalableTag<float> df;
  const size_t lanes = hn::Lanes(df);
  const size_t pairs = static_cast<size_t>(plan.pairs);
  const size_t rotary_dim = static_cast<size_t>(plan.rotary_dim);
  const bool interleaved = plan.layout == RopeLayout::kInterleaved;
  constexpr bool kBf16 = std::is_same_v<T, hwy::bfloat16_t>;
  const bool bf16_even_odd = kBf16 && pairs % (interleaved ? lanes : 2 * lanes) == 0;
  const TableForm form = bf16_even_odd ? (interleaved ? TableForm::kPairs : TableForm::kEvenOddPairs)
                                       : (interleaved ? TableForm::kExpanded : TableForm::kPairs);

  // The frequencies in table order, zero-padded to whole vectors.
  const size_t entries = form == TableForm::kExpanded ? rotary_dim : pairs;
  const size_t padded = (entries + lanes - 1) / lanes * lanes;
  auto freq = hwy::AllocateAligned<double>(padded);
  auto tables = hwy::AllocateAligned<float>(2 * padded);
  float* cos_table = tables.get();
  float* sin_table = cos_table + padded;
  const double* w = plan.inv_freq.data();
  for (size_t i = 0; i < padded; ++i) {
    double f = 0.0;
    if (i < entries) {
      switch (form) {
        case TableForm::kPairs: f = w[i]; break;
        case TableForm::kExpanded: f = w[i / 2]; break;
        case TableForm::kEvenOddPairs: {
          const size_t block = i / (2 * lanes) * (2 * lanes), j = i % (2 * lanes);
          f = w[block + (j < lanes ? 2 * j : 2 * (j - lanes) + 1)];
          break;
        }
      }
    }
    freq[i] = f;
  }
  const float sin_scale = plan.scale * plan.sine_sign;

  for (int64_t token = begin; token < end; ++token) {
    const int64_t b = token / plan.seq, s = token % plan.seq;
    const auto position = static_cast<double>(plan.call->positions.At(b, s, plan.seq));
    FillTrigTables(freq.get(), padded, position, plan.scale, sin_scale, form == TableForm::kExpanded, cos_table,
                   sin_table);
    for (const RopeOperand& op : plan.call->operands) {
      const auto* in = static_cast<const T*>(op.in.data);
      auto* out = static_cast<T*>(op.out.data);
      const int64_t head_dim = op.in.head_dim();
      for (int64_t h = 0; h < op.in.heads(); ++h) {
        const T* x = in + op.in.Offset(b, s, h);
        T* y = out + op.out.Offset(b, s, h);
        if constexpr (kBf16) {
          if (bf16_even_odd) {
            if (interleaved) {
              RotateInterleavedBf16(x, y, pairs, cos_table, sin_table);
            } else {
              RotateHalfSplitBf16(x, y, pairs, cos_table, sin_table);
            }
          }
        }
        if (!bf16_even_odd) {
          if (interleaved) {
            RotateInterleaved(x, y, rotary_dim, cos_table, sin_table);
          } else {
            RotateHalfSplit(x, y, pairs, cos_table, sin_table);
          }
        }
        if (x != y && plan.rotary_dim < head_dim) {  // partial rotary: the rest as is
          std::memcpy(y + rotary_dim, x + rotary_dim, (head_dim - plan.rotary_dim) * sizeof(T));
        }
      }
    }
  }
}

inline void RopeTokenRangeImpl(const detail::RopeKernelPlan& plan, int64_t begin, int64_t end) {
  switch (plan.call->operands.front().in.dtype) {
    case DType::kF32: return RotateTokens<float>(plan, begin, end);
    case DType::kF16: return RotateTokens<hwy::float16_t>(plan, begin, end);
    case DType::kBF16: return RotateTokens<hwy::bfloat16_t>(plan, begin, end);
  }
}

}  // namespace posenc::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // POSENC_ROPE_INL_H_
