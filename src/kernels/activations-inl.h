// Per-target activation functions in Highway vectors, one formula each,
// shared by the model's gated unit (model/gated_row.cc) and the tiny
// model's trainer (train/tiny_lm_kernels.cc). Included inside per-target
// code; re-included once per target.
#if defined(POSENC_ACTIVATIONS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_ACTIVATIONS_INL_H_
#undef POSENC_ACTIVATIONS_INL_H_
#else
#define POSENC_ACTIVATIONS_INL_H_
#endif

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace posenc::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// sqrt(2 / pi) and GELU's cubic coefficient (Hendrycks and Gimpel's tanh
// form, PyTorch's gelu(approximate="tanh")).
constexpr float kGeluSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

// x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))); Tanh is valid on every float.
template <class D>
HWY_INLINE hn::Vec<D> GeluTanh(D d, hn::Vec<D> x) {
  const auto inner = hn::MulAdd(hn::Mul(hn::Set(d, kGeluCubic), x), hn::Mul(x, x), x);
  const auto t = hn::Tanh(d, hn::Mul(hn::Set(d, kGeluSqrt2OverPi), inner));
  return hn::Mul(hn::Mul(hn::Set(d, 0.5f), x), hn::Add(hn::Set(d, 1.0f), t));
}

// x / (1 + e^-x) (SiLU, Swish-1). e^-x's argument is held to [-88, 88]:
// Exp is valid only to +104, and beyond 88 the result is x, or under 1e-36
// in magnitude, either way.
template <class D>
HWY_INLINE hn::Vec<D> Silu(D d, hn::Vec<D> x) {
  const auto e = hn::Exp(d, hn::Clamp(hn::Neg(x), hn::Set(d, -88.0f), hn::Set(d, 88.0f)));
  return hn::Div(x, hn::Add(hn::Set(d, 1.0f), e));
}

}  // namespace posenc::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard
