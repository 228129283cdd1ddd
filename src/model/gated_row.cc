// The gated unit's elementwise part (gated_row.h): per-target code and its
// dispatch.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "model/gated_row.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/activations-inl.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "model/model_ops.h"

HWY_BEFORE_NAMESPACE();
namespace posenc::model::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using posenc::HWY_NAMESPACE::GeluTanh;
using posenc::HWY_NAMESPACE::Silu;

void GatedRowImpl(const float* HWY_RESTRICT gate, const float* HWY_RESTRICT up, std::int64_t n,
                  GateActivation activation, float* HWY_RESTRICT out) {
  const hn::ScalableTag<float> df;
  const auto lanes = static_cast<std::int64_t>(hn::Lanes(df));
  const auto act = [&](auto g) HWY_ATTR { return activation == GateActivation::kSilu ? Silu(df, g) : GeluTanh(df, g); };
  std::int64_t j = 0;
  for (; j + lanes <= n; j += lanes) {
    hn::StoreU(hn::Mul(act(hn::LoadU(df, gate + j)), hn::LoadU(df, up + j)), df, out + j);
  }
  if (j < n) {
    // The tail through the same vector code (copied into a whole vector),
    // so that an element's result does not depend on where a thread's run
    // of the row ends.
    HWY_ALIGN float g[HWY_MAX_BYTES / sizeof(float)] = {}, u[HWY_MAX_BYTES / sizeof(float)] = {};
    std::copy(gate + j, gate + n, g);
    std::copy(up + j, up + n, u);
    hn::Store(hn::Mul(act(hn::Load(df, g)), hn::Load(df, u)), df, g);
    std::copy(g, g + (n - j), out + j);
  }
}

}  // namespace posenc::model::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "model/gated_row.h"

namespace posenc::model {

HWY_EXPORT(GatedRowImpl);

void GatedRow(const float* gate, const float* up, std::int64_t n, GateActivation activation, float* out) {
  HWY_DYNAMIC_DISPATCH(GatedRowImpl)(gate, up, n, activation, out);
}

void GatedRowReference(const float* gate, const float* up, std::int64_t n, GateActivation activation, float* out) {
  for (std::int64_t j = 0; j < n; ++j) {
    const float g = gate[j];
    // 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))) for GELU.
    const float act = activation == GateActivation::kSilu
                          ? g / (1.0f + std::exp(-g))
                          : 0.5f * g * (1.0f + std::tanh(0.7978845608028654f * (g + 0.044715f * g * g * g)));
    out[j] = act * up[j];
  }
}

}  // namespace posenc::model
#endif  // HWY_ONCE
