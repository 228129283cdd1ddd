// Per-target loads and stores of f32/f16/bf16 as float32 vectors, with
// partial (tail) variants that never touch memory past `count` elements.
// Included by kernels inside HWY_NAMESPACE; re-included once per target.
#if defined(POSENC_SIMD_IO_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_SIMD_IO_INL_H_
#undef POSENC_SIMD_IO_INL_H_
#else
#define POSENC_SIMD_IO_INL_H_
#endif

#include <cstring>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace posenc::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class DF>
HWY_INLINE hn::Vec<DF> LoadF32(DF df, const float* HWY_RESTRICT p) {
  return hn::LoadU(df, p);
}
template <class DF>
HWY_INLINE hn::Vec<DF> LoadF32(DF df, const hwy::float16_t* HWY_RESTRICT p) {
  return hn::PromoteTo(df, hn::LoadU(hn::Rebind<hwy::float16_t, DF>(), p));
}
// bf16 is the top half of a float32.
template <class DF>
HWY_INLINE hn::Vec<DF> LoadF32(DF df, const hwy::bfloat16_t* HWY_RESTRICT p) {
  const hn::Rebind<uint16_t, DF> du16;
  const hn::Rebind<uint32_t, DF> du32;
  const auto bits = hn::LoadU(du16, reinterpret_cast<const uint16_t*>(p));
  return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(du32, bits)));
}

template <class DF>
HWY_INLINE void StoreF32(DF df, hn::Vec<DF> v, float* HWY_RESTRICT p) {
  hn::StoreU(v, df, p);
}
template <class DF>
HWY_INLINE void StoreF32(DF, hn::Vec<DF> v, hwy::float16_t* HWY_RESTRICT p) {
  const hn::Rebind<hwy::float16_t, DF> df16;
  hn::StoreU(hn::DemoteTo(df16, v), df16, p);
}
// float32 -> bf16 rounding to nearest, ties to even (Highway 1.0's DemoteTo
// truncates): add 0x7FFF plus the lowest kept bit, keep the top half.
template <class DF>
HWY_INLINE void StoreF32(DF df, hn::Vec<DF> v, hwy::bfloat16_t* HWY_RESTRICT p) {
  const hn::RebindToSigned<DF> di32;
  const hn::Rebind<uint16_t, DF> du16;
  const auto bits = hn::BitCast(di32, v);
  const auto lsb = hn::And(hn::ShiftRight<16>(bits), hn::Set(di32, 1));
  const auto rounded = hn::Add(hn::Add(bits, hn::Set(di32, 0x7FFF)), lsb);
  // Logical shift: the arithmetic one would smear the sign into the top.
  const auto top = hn::BitCast(di32, hn::ShiftRight<16>(hn::BitCast(hn::RebindToUnsigned<DF>(), rounded)));
  hn::StoreU(hn::DemoteTo(du16, top), du16, reinterpret_cast<uint16_t*>(p));
  (void)df;
}

// Partial variants for the last `count` < Lanes(df) elements: they go
// through a zero-padded stack buffer, so no byte past `count` is read or written.
template <class DF, typename T>
HWY_INLINE hn::Vec<DF> LoadPartialF32(DF df, const T* HWY_RESTRICT p, size_t count) {
  HWY_ALIGN T buffer[HWY_MAX_BYTES / sizeof(float)] = {};
  std::memcpy(buffer, p, count * sizeof(T));
  return LoadF32(df, buffer);
}
template <class DF, typename T>
HWY_INLINE void StorePartialF32(DF df, hn::Vec<DF> v, T* HWY_RESTRICT p, size_t count) {
  HWY_ALIGN T buffer[HWY_MAX_BYTES / sizeof(float)];
  StoreF32(df, v, buffer);
  std::memcpy(p, buffer, count * sizeof(T));
}

}  // namespace posenc::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // POSENC_SIMD_IO_INL_H_
