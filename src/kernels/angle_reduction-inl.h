// Per-target angle reduction shared by the kernels that evaluate sin and cos
// of p * w (RoPE in rope-inl.h, the sinusoid in embedding_add-inl.h).
//
// Cody-Waite: angle = n * step + r with n = round(angle / step), the step
// split in two doubles (step_hi + step_lo) so that n * step_hi is
// subtracted by one FMA exactly enough that r keeps ~1e-16 absolute
// accuracy for angles up to ~1e9 — where Highway's Sin/Cos (and any short
// polynomial) are accurate only near zero. Double precision only: angles
// are never formed or reduced in a narrower type.
#if defined(POSENC_ANGLE_REDUCTION_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_ANGLE_REDUCTION_INL_H_
#undef POSENC_ANGLE_REDUCTION_INL_H_
#else
#define POSENC_ANGLE_REDUCTION_INL_H_
#endif

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace posenc::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// A step of the circle as 1/step and two doubles summing to it.
struct AngleStep {
  double inverse, hi, lo;
};
inline constexpr AngleStep kQuarterTurn{0.6366197723675814, 1.5707963267948966, 6.123233995736766e-17};  // pi/2
inline constexpr AngleStep kFullTurn{0.15915494309189535, 6.283185307179586, 2.4492935982947064e-16};    // 2 pi

// Returns r = angle - n * step and sets n (a whole number, in double).
template <class DD>
HWY_INLINE hn::Vec<DD> ReduceAngle(DD dd, hn::Vec<DD> angle, const AngleStep& step, hn::Vec<DD>& n) {
  n = hn::Round(hn::Mul(angle, hn::Set(dd, step.inverse)));
  return hn::NegMulAdd(n, hn::Set(dd, step.lo), hn::NegMulAdd(n, hn::Set(dd, step.hi), angle));
}

}  // namespace posenc::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // POSENC_ANGLE_REDUCTION_INL_H_
