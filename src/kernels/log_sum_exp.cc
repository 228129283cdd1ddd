// log sum exp over a row (log_sum_exp.h): per-target code and its dispatch.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/log_sum_exp.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// foreach_target.h re-includes this file once per target: the math header
// goes after it, inside the per-target pass.
#include "hwy/contrib/math/math-inl.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/log_sum_exp.h"

HWY_BEFORE_NAMESPACE();
namespace posenc::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

detail::ExpSum ChunkExpSumImpl(const float* HWY_RESTRICT x, std::int64_t n) {
  const hn::ScalableTag<float> df;
  const auto lanes = static_cast<std::int64_t>(hn::Lanes(df));
  const std::int64_t whole = n / lanes * lanes;
  constexpr float kNaN = std::numeric_limits<float>::quiet_NaN(), kInf = std::numeric_limits<float>::infinity();
  float m = -kInf;
  bool nan = false;
  if (whole > 0) {
    auto top = hn::LoadU(df, x);
    auto nans = hn::IsNaN(top);
    for (std::int64_t i = lanes; i < whole; i += lanes) {
      const auto v = hn::LoadU(df, x + i);
      top = hn::Max(top, v);
      nans = hn::Or(nans, hn::IsNaN(v));
    }
    m = hn::GetLane(hn::MaxOfLanes(df, top));
    nan = !hn::AllFalse(df, nans);
  }
  for (std::int64_t i = whole; i < n; ++i) {
    nan = nan || std::isnan(x[i]);
    m = std::max(m, x[i]);
  }
  // Exp does not carry NaN through: the reference's NaNs (a NaN or +inf)
  // are decided here, and a chunk of -inf weighs nothing.
  if (nan || m == kInf) return {kNaN, 0.0};
  if (m == -kInf) return {m, 0.0};
  // x - m <= 0; below -88 the exponential is under 1e-38 (the largest term
  // is 1) and -inf logits give 0: Exp is valid from there.
  const auto shift = hn::Set(df, m), lowest = hn::Set(df, -88.0f);
  constexpr std::int64_t kBlockVectors = 16;  // float sums this long, then double
  double sum = 0;
  for (std::int64_t block = 0; block < whole; block += kBlockVectors * lanes) {
    const std::int64_t end = std::min(whole, block + kBlockVectors * lanes);
    auto acc = hn::Zero(df);
    for (std::int64_t i = block; i < end; i += lanes) {
      acc = hn::Add(acc, hn::Exp(df, hn::Max(hn::Sub(hn::LoadU(df, x + i), shift), lowest)));
    }
    sum += static_cast<double>(hn::GetLane(hn::SumOfLanes(df, acc)));
  }
  for (std::int64_t i = whole; i < n; ++i) sum += static_cast<double>(std::exp(x[i] - m));
  return {m, sum};
}

}  // namespace posenc::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace posenc::detail {

HWY_EXPORT(ChunkExpSumImpl);

ExpSum ChunkExpSum(const float* x, std::int64_t n) { return HWY_DYNAMIC_DISPATCH(ChunkExpSumImpl)(x, n); }

double CombineExpSums(std::span<const ExpSum> chunks) {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  double top = -std::numeric_limits<double>::infinity();
  for (const ExpSum& c : chunks) {
    if (std::isnan(c.max)) return kNaN;
    top = std::max(top, static_cast<double>(c.max));
  }
  if (std::isinf(top)) return kNaN;  // every value -inf
  double sum = 0;
  for (const ExpSum& c : chunks) {
    if (c.sum > 0) sum += c.sum * std::exp(static_cast<double>(c.max) - top);
  }
  return top + std::log(sum);
}

double LogSumExp(const float* x, std::int64_t n) {
  std::vector<ExpSum> chunks;
  chunks.reserve(static_cast<std::size_t>((n + kLogSumExpChunk - 1) / kLogSumExpChunk));
  for (std::int64_t first = 0; first < n; first += kLogSumExpChunk) {
    chunks.push_back(ChunkExpSum(x + first, std::min(kLogSumExpChunk, n - first)));
  }
  return CombineExpSums(chunks);
}

double LogSumExpReference(const float* x, std::int64_t n) {
  const float m = *std::max_element(x, x + n);
  double sum = 0;
  for (std::int64_t j = 0; j < n; ++j) sum += std::exp(static_cast<double>(x[j]) - m);
  return static_cast<double>(m) + std::log(sum);
}

}  // namespace posenc::detail
#endif  // HWY_ONCE
