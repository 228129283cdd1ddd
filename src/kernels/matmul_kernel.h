// Internal: the packed weight layout and the plan the dispatched matmul
// kernel (matmul-inl.h) runs.
#pragma once

#include <cstdint>

#include "hwy/aligned_allocator.h"
#include "posenc/matmul.h"

namespace posenc {

// W [n, k] as column panels of kPanelWidth outputs, k-major inside a panel:
//   data[(p * k + kk) * kPanelWidth + c] = W[p * kPanelWidth + c, kk]
// and 0 for columns past n, so the kernel never branches on the n tail.
// The width is fixed (not the target's vector width) so that weights packed
// once serve every SIMD target: 2 AVX2 vectors, 4 SSE4/NEON vectors, one
// AVX-512 vector; a panel row is one 64-byte cache line.
struct PackedWeights::Layout {
  static constexpr std::int64_t kPanelWidth = 16;
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::int64_t panels = 0;  // ceil(n / kPanelWidth)
  hwy::AlignedFreeUniquePtr<float[]> data;

  const float* Panel(std::int64_t p) const { return data.get() + p * k * kPanelWidth; }
};

namespace detail {

// Blocking, independent of the thread count and of the SIMD target (so only
// the target, never the threads, decides the rounding): work items are
// blocks of kBlockRows rows x kBlockPanels panels; inside a block, k is
// walked in equal slices of at most kSliceK, partial sums kept in y between
// slices.
// Every y[i, j] is one float32 FMA chain over kk = 0, 1, ..., k-1 whatever
// the split.
// Sizes at k = 576: a tile's 6 rows of x are 13.5 KiB (L1) and are reused
// across the block's 4 panels (36 KiB each, from L2); the block's x rows
// (216 KiB) and panels (144 KiB) share the 512 KiB L2 of a Zen 3 core.
// Slicing k = 576 into 256-wide slices measured 2-7% slower (more stores
// and reloads of y, shorter streams), so k is sliced only past 1024.
constexpr std::int64_t kBlockRows = 96;  // a multiple of every target's tile rows (1, 3, 6, 8)
constexpr std::int64_t kBlockPanels = 4;
constexpr std::int64_t kSliceK = 1024;
// k in equal slices of at most kSliceK (1536 -> 2 x 768, not 1024 + 512).
constexpr std::int64_t SliceK(std::int64_t k) {
  const std::int64_t slices = (k + kSliceK - 1) / kSliceK;
  return (k + slices - 1) / slices;
}

struct MatMulPlan {
  const float* x;  // [m, k]
  std::int64_t m;
  const PackedWeights::Layout* w;
  float* y;                   // [m, n]
  std::int64_t row_blocks;    // ceil(m / kBlockRows)
  std::int64_t panel_blocks;  // ceil(panels / kBlockPanels)
  // Order of the work items, so that a thread's consecutive items share the
  // larger operand: with n > m (the 113 MiB logits matrix against 4.7 MiB of
  // activations) items go panel block by panel block and the weights are read
  // from memory once, x re-read from L3; otherwise row block by row block.
  bool panel_major;
  std::int64_t Blocks() const { return row_blocks * panel_blocks; }
  std::int64_t RowBlock(std::int64_t item) const { return panel_major ? item % row_blocks : item / panel_blocks; }
  std::int64_t PanelBlock(std::int64_t item) const { return panel_major ? item / row_blocks : item % panel_blocks; }
};

// Computes work items [begin, end) of plan.Blocks().
void MatMulBlocks(const MatMulPlan& plan, std::int64_t begin, std::int64_t end);

}  // namespace detail
}  // namespace posenc
