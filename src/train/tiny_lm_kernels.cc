// The tiny model's SIMD kernels (tiny_lm_kernels.h): one Highway module,
// compiled once per target. Vectors run over the n elements of a row; a
// row's tail past the last whole vector is done in scalar code.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "train/tiny_lm_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"
#include "kernels/activations-inl.h"
#include "train/tiny_lm_kernels.h"

#include <cmath>

HWY_BEFORE_NAMESPACE();
namespace posenc::tiny_lm::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// The forward's formula and constants are the model's (activations-inl.h).
using posenc::HWY_NAMESPACE::GeluTanh;
constexpr float kGeluC = posenc::HWY_NAMESPACE::kGeluCubic;
constexpr float kSqrt2OverPi = posenc::HWY_NAMESPACE::kGeluSqrt2OverPi;

float GeluTanhScalar(float x) { return std::tanh(kSqrt2OverPi * (x + kGeluC * x * x * x)); }

void GeluForwardImpl(const float* HWY_RESTRICT u, float* HWY_RESTRICT a, std::int64_t n) {
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
  std::int64_t e = 0;
  for (; e + lanes <= n; e += lanes) {
    hn::StoreU(GeluTanh(d, hn::LoadU(d, u + e)), d, a + e);
  }
  for (; e < n; ++e) a[e] = 0.5f * u[e] * (1.0f + GeluTanhScalar(u[e]));
}

// da/du = (1 + t)/2 + u/2 (1 - t^2) k (1 + 3 0.044715 u^2).
void GeluBackwardImpl(const float* HWY_RESTRICT u, const float* HWY_RESTRICT da, float* HWY_RESTRICT du,
                      std::int64_t n) {
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
  const auto k = hn::Set(d, kSqrt2OverPi), c = hn::Set(d, kGeluC), c3 = hn::Set(d, 3.0f * kGeluC);
  const auto half = hn::Set(d, 0.5f), one = hn::Set(d, 1.0f);
  std::int64_t e = 0;
  for (; e + lanes <= n; e += lanes) {
    const auto x = hn::LoadU(d, u + e);
    const auto x2 = hn::Mul(x, x);
    const auto t = hn::Tanh(d, hn::Mul(k, hn::MulAdd(hn::Mul(c, x), x2, x)));
    const auto left = hn::Mul(half, hn::Add(one, t));
    const auto right =
        hn::Mul(hn::Mul(hn::Mul(half, x), hn::NegMulAdd(t, t, one)), hn::Mul(k, hn::MulAdd(c3, x2, one)));
    hn::StoreU(hn::Mul(hn::LoadU(d, da + e), hn::Add(left, right)), d, du + e);
  }
  for (; e < n; ++e) {
    const float x = u[e], t = GeluTanhScalar(x);
    du[e] = da[e] * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kGeluC * x * x));
  }
}

void DotRowsImpl(const float* HWY_RESTRICT x, const float* rows, std::int64_t stride, std::int64_t count,
                 std::int64_t n, float* HWY_RESTRICT out) {
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
  const std::int64_t whole = n - n % lanes;
  for (std::int64_t j = 0; j < count; ++j) {
    const float* row = rows + j * stride;
    auto sum = hn::Zero(d);
    for (std::int64_t e = 0; e < whole; e += lanes) sum = hn::MulAdd(hn::LoadU(d, x + e), hn::LoadU(d, row + e), sum);
    float total = hn::GetLane(hn::SumOfLanes(d, sum));
    for (std::int64_t e = whole; e < n; ++e) total += x[e] * row[e];
    out[j] = total;
  }
}

void AddWeightedRowsImpl(const float* HWY_RESTRICT w, const float* rows, std::int64_t stride, std::int64_t count,
                         std::int64_t n, float* HWY_RESTRICT out) {
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
  std::int64_t e = 0;
  // Two vectors of out in registers while the rows stream by.
  for (; e + 2 * lanes <= n; e += 2 * lanes) {
    auto a0 = hn::LoadU(d, out + e), a1 = hn::LoadU(d, out + e + lanes);
    for (std::int64_t j = 0; j < count; ++j) {
      const float* row = rows + j * stride + e;
      const auto wj = hn::Set(d, w[j]);
      a0 = hn::MulAdd(wj, hn::LoadU(d, row), a0);
      a1 = hn::MulAdd(wj, hn::LoadU(d, row + lanes), a1);
    }
    hn::StoreU(a0, d, out + e);
    hn::StoreU(a1, d, out + e + lanes);
  }
  for (; e + lanes <= n; e += lanes) {
    auto a0 = hn::LoadU(d, out + e);
    for (std::int64_t j = 0; j < count; ++j) a0 = hn::MulAdd(hn::Set(d, w[j]), hn::LoadU(d, rows + j * stride + e), a0);
    hn::StoreU(a0, d, out + e);
  }
  for (; e < n; ++e) {
    float a = out[e];
    for (std::int64_t j = 0; j < count; ++j) a += w[j] * rows[j * stride + e];
    out[e] = a;
  }
}

void AddScaledToRowsImpl(const float* HWY_RESTRICT x, const float* HWY_RESTRICT w, float* rows, std::int64_t stride,
                         std::int64_t count, std::int64_t n) {
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<std::int64_t>(hn::Lanes(d));
  const std::int64_t whole = n - n % lanes;
  for (std::int64_t j = 0; j < count; ++j) {
    float* row = rows + j * stride;
    const auto wj = hn::Set(d, w[j]);
    for (std::int64_t e = 0; e < whole; e += lanes) {
      hn::StoreU(hn::MulAdd(wj, hn::LoadU(d, x + e), hn::LoadU(d, row + e)), d, row + e);
    }
    for (std::int64_t e = whole; e < n; ++e) row[e] += w[j] * x[e];
  }
}

}  // namespace posenc::tiny_lm::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace posenc::tiny_lm {

HWY_EXPORT(GeluForwardImpl);
HWY_EXPORT(GeluBackwardImpl);
HWY_EXPORT(DotRowsImpl);
HWY_EXPORT(AddWeightedRowsImpl);
HWY_EXPORT(AddScaledToRowsImpl);

void GeluForwardKernel(const float* u, float* a, std::int64_t n) { HWY_DYNAMIC_DISPATCH(GeluForwardImpl)(u, a, n); }

void GeluBackwardKernel(const float* u, const float* da, float* du, std::int64_t n) {
  HWY_DYNAMIC_DISPATCH(GeluBackwardImpl)(u, da, du, n);
}

void DotRows(const float* x, const float* rows, std::int64_t stride, std::int64_t count, std::int64_t n, float* out) {
  HWY_DYNAMIC_DISPATCH(DotRowsImpl)(x, rows, stride, count, n, out);
}

void AddWeightedRows(const float* w, const float* rows, std::int64_t stride, std::int64_t count, std::int64_t n,
                     float* out) {
  HWY_DYNAMIC_DISPATCH(AddWeightedRowsImpl)(w, rows, stride, count, n, out);
}

void AddScaledToRows(const float* x, const float* w, float* rows, std::int64_t stride, std::int64_t count,
                     std::int64_t n) {
  HWY_DYNAMIC_DISPATCH(AddScaledToRowsImpl)(x, w, rows, stride, count, n);
}

}  // namespace posenc::tiny_lm
#endif  // HWY_ONCE
