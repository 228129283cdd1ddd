// Per-target RoPE kernel (compiled once per SIMD target via foreach_target).
//
// For each token: cos/sin of its angles are computed once, in double with the
// angle reduced modulo 2*pi (so position 10^6 loses nothing), rounded to
// float32 tables, then every head of every operand (q, k, ...) is rotated
// with float32 FMAs. The inverse direction is the same code with the sine
// table negated.
#if defined(POSENC_ROPE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_ROPE_INL_H_
#undef POSENC_ROPE_INL_H_
#else
#define POSENC_ROPE_INL_H_
#endif

#include <cstring>
#include <numbers>

#include "hwy/aligned_allocator.h"
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "rope_kernel.h"
#include "simd_io-inl.h"

HWY_BEFORE_NAMESPACE();
namespace posenc::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// cos_table[k] = scale * cos(p w_k), sin_table[k] = sign * scale * sin(p w_k)
// for k < padded (inv_freq is zero-padded, so there is no tail).
inline void FillTrigTables(const detail::RopeKernelPlan& plan, double position, size_t padded,
                           float* HWY_RESTRICT cos_table, float* HWY_RESTRICT sin_table) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  // 2*pi split in two doubles: turns * 2pi is subtracted exactly enough that
  // the reduced angle keeps ~1e-16 absolute accuracy for angles up to ~1e9.
  const auto two_pi_hi = hn::Set(dd, 6.283185307179586);
  const auto two_pi_lo = hn::Set(dd, 2.4492935982947064e-16);
  const auto inv_two_pi = hn::Set(dd, 0.5 / std::numbers::pi);
  const auto pos = hn::Set(dd, position);
  const auto cos_scale = hn::Set(dd, plan.scale);
  const auto sin_scale = hn::Set(dd, static_cast<double>(plan.scale) * plan.sine_sign);
  for (size_t k = 0; k < padded; k += hn::Lanes(dd)) {
    const auto angle = hn::Mul(pos, hn::LoadU(dd, plan.inv_freq_padded.data() + k));
    const auto turns = hn::Round(hn::Mul(angle, inv_two_pi));
    const auto reduced = hn::NegMulAdd(turns, two_pi_lo, hn::NegMulAdd(turns, two_pi_hi, angle));
    hn::StoreU(hn::DemoteTo(df, hn::Mul(hn::Cos(dd, reduced), cos_scale)), df, cos_table + k);
    hn::StoreU(hn::DemoteTo(df, hn::Mul(hn::Sin(dd, reduced), sin_scale)), df, sin_table + k);
  }
}

// Half-split: y_k = x_k c_k - x_{k+P} s_k,  y_{k+P} = x_k s_k + x_{k+P} c_k.
template <typename T>
HWY_INLINE void RotateHalfSplit(const T* HWY_RESTRICT in, T* out, size_t pairs,
                                const float* HWY_RESTRICT c_table, const float* HWY_RESTRICT s_table) {
  const hn::ScalableTag<float> df;
  const size_t lanes = hn::Lanes(df);
  const auto rotate = [&](auto x1, auto x2, size_t k, auto&& store) {
    const auto c = hn::LoadU(df, c_table + k);
    const auto s = hn::LoadU(df, s_table + k);
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
    rotate(LoadPartialF32(df, in + k, count), LoadPartialF32(df, in + pairs + k, count), k,
           [&](auto y1, auto y2) {
             StorePartialF32(df, y1, out + k, count);
             StorePartialF32(df, y2, out + pairs + k, count);
           });
  }
}

// Interleaved: with c2 = [c0 c0 c1 c1 ...] and s2 = [-s0 s0 -s1 s1 ...],
// y = x * c2 + swap_pairs(x) * s2. Vectors hold whole pairs (even lane count).
template <typename T>
HWY_INLINE void RotateInterleaved(const T* HWY_RESTRICT in, T* out, size_t rotary_dim,
                                  const float* HWY_RESTRICT c2, const float* HWY_RESTRICT s2) {
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
    return hn::MulAdd(x, hn::LoadU(df, c2 + i), hn::Mul(hn::Reverse2(df, x), hn::LoadU(df, s2 + i)));
  };
  size_t i = 0;
  for (; i + lanes <= rotary_dim; i += lanes) StoreF32(df, rotate(LoadF32(df, in + i), i), out + i);
  if (i < rotary_dim) {
    const size_t count = rotary_dim - i;
    StorePartialF32(df, rotate(LoadPartialF32(df, in + i, count), i), out + i, count);
  }
}

template <typename T>
void RotateTokens(const detail::RopeKernelPlan& plan, int64_t begin, int64_t end) {
  const size_t pairs = static_cast<size_t>(plan.pairs);
  const size_t rotary_dim = static_cast<size_t>(plan.rotary_dim);
  const size_t padded = plan.inv_freq_padded.size();
  // Tables: cos/sin per pair, and their pair-expanded forms for interleaved.
  auto tables = hwy::AllocateAligned<float>(6 * padded);
  float* cos_table = tables.get();
  float* sin_table = cos_table + padded;
  float* cos2 = sin_table + padded;
  float* sin2 = cos2 + 2 * padded;
  const bool interleaved = plan.layout == RopeLayout::kInterleaved;

  for (int64_t token = begin; token < end; ++token) {
    const int64_t b = token / plan.seq, s = token % plan.seq;
    const auto position = static_cast<double>(plan.call->positions.At(b, s, plan.seq));
    FillTrigTables(plan, position, padded, cos_table, sin_table);
    if (interleaved) {
      for (size_t k = 0; k < pairs; ++k) {
        cos2[2 * k] = cos2[2 * k + 1] = cos_table[k];
        sin2[2 * k] = -sin_table[k];
        sin2[2 * k + 1] = sin_table[k];
      }
    }
    for (const RopeOperand& op : plan.call->operands) {
      const auto* in = static_cast<const T*>(op.in.data);
      auto* out = static_cast<T*>(op.out.data);
      const int64_t head_dim = op.in.head_dim();
      for (int64_t h = 0; h < op.in.heads(); ++h) {
        const T* x = in + op.in.Offset(b, s, h);
        T* y = out + op.out.Offset(b, s, h);
        if (interleaved) {
          RotateInterleaved(x, y, rotary_dim, cos2, sin2);
        } else {
          RotateHalfSplit(x, y, pairs, cos_table, sin_table);
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
