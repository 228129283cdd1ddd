// Per-target matmul kernel (compiled once per SIMD target via foreach_target).
//
// y[i, j] = sum_k x[i, k] W[j, k] with W packed in panels of 16 outputs
// (matmul_kernel.h). A tile is R rows of x against one panel: for each kk,
// the panel's 16 values are loaded as V = 16 / lanes vectors, x[i, kk] is
// broadcast once per row, and R x V FMAs update the accumulators, which stay
// in registers for a whole k slice:
//   AVX2: 6 rows x 2 vectors = 12 accumulators + 2 panel vectors + 1
//   broadcast = 15 of 16 registers; 8 loads per 12 FMAs, so the two FMA
//   pipes, not the loads, set the pace.
// Every y[i, j] is a single float32 FMA chain over kk ascending: a slice
// after the first resumes from the partial sum stored in y (exact), so the
// result depends on the target only, not on the threads or the tile a row
// falls in.
#if defined(POSENC_MATMUL_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_MATMUL_INL_H_
#undef POSENC_MATMUL_INL_H_
#else
#define POSENC_MATMUL_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <cstring>

#include "hwy/highway.h"
#include "kernels/matmul_kernel.h"

HWY_BEFORE_NAMESPACE();
namespace posenc::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr std::int64_t kPanel = PackedWeights::Layout::kPanelWidth;
using DPanel = hn::CappedTag<float, kPanel>;

#if HWY_HAVE_SCALABLE
// Sizeless vectors (SVE, RVV) cannot live in arrays: a plain loop, correct
// but not tuned, with the same per-element order.
constexpr std::int64_t kTileRows = 1;

template <std::int64_t R>
HWY_INLINE void Tile(const float* HWY_RESTRICT x, std::int64_t ldx, const float* HWY_RESTRICT panel, std::int64_t kc,
                     float* HWY_RESTRICT y, std::int64_t ldy, std::int64_t cols, bool resume) {
  for (std::int64_t r = 0; r < R; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      float acc = resume ? y[r * ldy + c] : 0.0f;
      for (std::int64_t kk = 0; kk < kc; ++kk) acc = std::fma(x[r * ldx + kk], panel[kk * kPanel + c], acc);
      y[r * ldy + c] = acc;
    }
  }
}
#else
constexpr std::int64_t kLanes = static_cast<std::int64_t>(hn::MaxLanes(DPanel()));
constexpr std::int64_t kVectors = kPanel / kLanes;  // per panel row
// Rows per tile: R x V accumulators fill about 12 of 16 registers (8 of 32
// on AVX-512, where one vector holds the panel row and loads would bind).
constexpr std::int64_t kTileRows = kVectors == 1 ? 8 : kVectors == 2 ? 6 : kVectors == 4 ? 3 : 1;
static_assert(detail::kBlockRows % kTileRows == 0, "tiles never straddle two blocks");

// y[0..R)[0..cols) (+)= x[0..R)[0..kc) * panel slice [kc][16]; x rows have
// stride ldx, y rows ldy. resume: y holds the sums of the previous slices.
template <std::int64_t R>
HWY_INLINE void Tile(const float* HWY_RESTRICT x, std::int64_t ldx, const float* HWY_RESTRICT panel, std::int64_t kc,
                     float* HWY_RESTRICT y, std::int64_t ldy, std::int64_t cols, bool resume) {
  const DPanel d;
  using V = hn::Vec<DPanel>;
  V acc[R][kVectors];
  HWY_ALIGN float edge[R * kPanel];  // the n tail goes through here
  const bool full = cols == kPanel;
  if (!resume) {
    for (std::int64_t r = 0; r < R; ++r) {
      for (std::int64_t v = 0; v < kVectors; ++v) acc[r][v] = hn::Zero(d);
    }
  } else if (full) {
    for (std::int64_t r = 0; r < R; ++r) {
      for (std::int64_t v = 0; v < kVectors; ++v) acc[r][v] = hn::LoadU(d, y + r * ldy + v * kLanes);
    }
  } else {
    for (std::int64_t r = 0; r < R; ++r) {
      std::memcpy(edge + r * kPanel, y + r * ldy, static_cast<size_t>(cols) * sizeof(float));
      std::fill(edge + r * kPanel + cols, edge + (r + 1) * kPanel, 0.0f);
      for (std::int64_t v = 0; v < kVectors; ++v) acc[r][v] = hn::Load(d, edge + r * kPanel + v * kLanes);
    }
  }

  for (std::int64_t kk = 0; kk < kc; ++kk) {
    V b[kVectors];
    for (std::int64_t v = 0; v < kVectors; ++v) b[v] = hn::Load(d, panel + kk * kPanel + v * kLanes);
    for (std::int64_t r = 0; r < R; ++r) {
      const V a = hn::Set(d, x[r * ldx + kk]);
      for (std::int64_t v = 0; v < kVectors; ++v) acc[r][v] = hn::MulAdd(a, b[v], acc[r][v]);
    }
  }

  if (full) {
    for (std::int64_t r = 0; r < R; ++r) {
      for (std::int64_t v = 0; v < kVectors; ++v) hn::StoreU(acc[r][v], d, y + r * ldy + v * kLanes);
    }
  } else {
    for (std::int64_t r = 0; r < R; ++r) {
      for (std::int64_t v = 0; v < kVectors; ++v) hn::Store(acc[r][v], d, edge + r * kPanel + v * kLanes);
      std::memcpy(y + r * ldy, edge + r * kPanel, static_cast<size_t>(cols) * sizeof(float));
    }
  }
}
#endif  // HWY_HAVE_SCALABLE

// Tile<rows> for a run-time rows in [1, R]: the m tail uses the same chain.
template <std::int64_t R>
HWY_INLINE void TileRows(std::int64_t rows, const float* HWY_RESTRICT x, std::int64_t ldx,
                         const float* HWY_RESTRICT panel, std::int64_t kc, float* HWY_RESTRICT y, std::int64_t ldy,
                         std::int64_t cols, bool resume) {
  if constexpr (R > 1) {
    if (rows < R) return TileRows<R - 1>(rows, x, ldx, panel, kc, y, ldy, cols, resume);
  }
  Tile<R>(x, ldx, panel, kc, y, ldy, cols, resume);
}

inline void MatMulBlocksImpl(const detail::MatMulPlan& plan, std::int64_t begin, std::int64_t end) {
  const PackedWeights::Layout& w = *plan.w;
  const std::int64_t k = w.k, n = w.n;
  for (std::int64_t block = begin; block < end; ++block) {
    const std::int64_t row_begin = plan.RowBlock(block) * detail::kBlockRows;
    const std::int64_t row_end = std::min(plan.m, row_begin + detail::kBlockRows);
    const std::int64_t panel_begin = plan.PanelBlock(block) * detail::kBlockPanels;
    const std::int64_t panel_end = std::min(w.panels, panel_begin + detail::kBlockPanels);
    const std::int64_t slice = detail::SliceK(k);
    for (std::int64_t k0 = 0; k0 < k; k0 += slice) {
      const std::int64_t kc = std::min(slice, k - k0);
      for (std::int64_t i = row_begin; i < row_end; i += kTileRows) {
        const std::int64_t rows = std::min(kTileRows, row_end - i);
        for (std::int64_t p = panel_begin; p < panel_end; ++p) {
          const std::int64_t cols = std::min(kPanel, n - p * kPanel);
          TileRows<kTileRows>(rows, plan.x + i * k + k0, k, w.Panel(p) + k0 * kPanel, kc, plan.y + i * n + p * kPanel,
                              n, cols, k0 > 0);
        }
      }
    }
  }
}

}  // namespace posenc::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard
