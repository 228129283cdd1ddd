// Dynamic dispatch of the matmul kernel (matmul-inl.h), weight packing and
// the public entry point.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matmul.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/matmul-inl.h"

#if HWY_ONCE
#include <algorithm>
#include <string>

#include "posenc/error.h"
#include "posenc/parallel.h"

namespace posenc {
namespace detail {

HWY_EXPORT(MatMulBlocksImpl);

void MatMulBlocks(const MatMulPlan& plan, std::int64_t begin, std::int64_t end) {
  HWY_DYNAMIC_DISPATCH(MatMulBlocksImpl)(plan, begin, end);
}

}  // namespace detail

using Layout = PackedWeights::Layout;

PackedWeights::PackedWeights(std::unique_ptr<Layout> layout) : layout_(std::move(layout)) {}
PackedWeights::PackedWeights(PackedWeights&&) noexcept = default;
PackedWeights& PackedWeights::operator=(PackedWeights&&) noexcept = default;
PackedWeights::~PackedWeights() = default;

std::int64_t PackedWeights::rows() const { return layout_->n; }
std::int64_t PackedWeights::cols() const { return layout_->k; }

PackedWeights PackedWeights::Pack(std::span<const float> w, std::int64_t n, std::int64_t k) {
  Require(n >= 1, "matmul", "n", n, "must be at least 1");
  Require(k >= 1, "matmul", "k", k, "must be at least 1");
  Require(static_cast<std::int64_t>(w.size()) / k == n && static_cast<std::int64_t>(w.size()) % k == 0, "matmul",
          "w.size()", w.size(), "must be n * k = " + std::to_string(n) + " * " + std::to_string(k));
  auto layout = std::make_unique<Layout>();
  layout->n = n;
  layout->k = k;
  layout->panels = (n + Layout::kPanelWidth - 1) / Layout::kPanelWidth;
  layout->data = hwy::AllocateAligned<float>(static_cast<std::size_t>(layout->panels * k * Layout::kPanelWidth));
  Require(layout->data != nullptr, "matmul", "n * k", n * k, "allocation of the packed weights failed");
  // Panel p, row kk: W[16p .. 16p+15, kk], zero past n. Panels are written by
  // the threads that will read them first.
  ParallelFor(layout->panels, 1, [&](std::int64_t begin, std::int64_t end) {
    constexpr std::int64_t kWidth = Layout::kPanelWidth;
    for (std::int64_t p = begin; p < end; ++p) {
      float* panel = layout->data.get() + p * k * kWidth;
      const std::int64_t cols = std::min(kWidth, n - p * kWidth);
      for (std::int64_t kk = 0; kk < k; ++kk) {
        for (std::int64_t c = 0; c < kWidth; ++c) {
          panel[kk * kWidth + c] = c < cols ? w[static_cast<std::size_t>((p * kWidth + c) * k + kk)] : 0.0f;
        }
      }
    }
  });
  return PackedWeights(std::move(layout));
}

void MatMul(std::span<const float> x, std::int64_t m, const PackedWeights& w, std::span<float> y) {
  const Layout& layout = w.layout();
  const std::int64_t n = layout.n, k = layout.k;
  Require(m >= 0, "matmul", "m", m, "must be at least 0");
  Require(static_cast<std::int64_t>(x.size()) == m * k, "matmul", "x.size()", x.size(),
          "must be m * k = " + std::to_string(m) + " * " + std::to_string(k));
  Require(static_cast<std::int64_t>(y.size()) == m * n, "matmul", "y.size()", y.size(),
          "must be m * n = " + std::to_string(m) + " * " + std::to_string(n));
  if (m == 0) return;
  const detail::MatMulPlan plan{
      .x = x.data(),
      .m = m,
      .w = &layout,
      .y = y.data(),
      .row_blocks = (m + detail::kBlockRows - 1) / detail::kBlockRows,
      .panel_blocks = (layout.panels + detail::kBlockPanels - 1) / detail::kBlockPanels,
      .panel_major = n > m,
  };
  // Small products stay on one thread: at least ~2 MFLOP per piece.
  const double block_flops = 2.0 * static_cast<double>(std::min(m, detail::kBlockRows)) *
                             static_cast<double>(detail::kBlockPanels * Layout::kPanelWidth * k);
  const auto min_chunk = static_cast<std::int64_t>(std::max(1.0, 2e6 / block_flops));
  ParallelFor(plan.Blocks(), min_chunk,
              [&](std::int64_t begin, std::int64_t end) { detail::MatMulBlocks(plan, begin, end); });
}

}  // namespace posenc
#endif  // HWY_ONCE
