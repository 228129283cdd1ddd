// Internal: the packed weight layout and the plan the dispatched matmul
// kernel (matmul-inl.h) runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "hwy/aligned_allocator.h"
#include "kernels/row_groups.h"
#include "posenc/matmul.h"
#include "util/huge_pages.h"

namespace posenc {

// W [n, k] as column panels of kPanelWidth outputs, k-major inside a panel:
//   data[(p * k + kk) * kPanelWidth + c] = W[p * kPanelWidth + c, kk]
// and 0 for columns past n, so the kernel never branches on the n tail.
// The width is fixed (not the target's vector width) so that weights packed
// once serve every SIMD target: 2 AVX2 vectors, 4 SSE4/NEON vectors, one
// AVX-512 vector; a panel row is one 64-byte cache line.
// Or (stored rows) W as the GGUF's rows of blocks, in segments of one type
// each, and no panels (data is null).
struct PackedWeights::Layout {
  static constexpr std::int64_t kPanelWidth = 16;
  std::int64_t n = 0;
  std::int64_t k = 0;
  std::int64_t panels = 0;  // ceil(n / kPanelWidth)
  hwy::AlignedFreeUniquePtr<float[]> data;

  // How a segment's rows lie in memory.
  enum class RowOrder {
    kRows,       // the GGUF's: row after row
    kGroupsOf8,  // 8 rows interleaved (row_groups.h): Q4_0, Q4_1, Q8_0 for the integer decode kernel
  };
  // Rows [first_row, first_row + rows) of type `type`, row_bytes each, at
  // bytes + offset, in `order`.
  struct Segment {
    GgmlType type;
    std::int64_t first_row, rows, row_bytes, offset;
    RowOrder order = RowOrder::kRows;
  };
  std::vector<Segment> segments;
  PooledBytes bytes;  // the stored weights, on huge pages where the OS gives them

  bool Stored() const { return data == nullptr; }
  const float* Panel(std::int64_t p) const { return data.get() + p * k * kPanelWidth; }
  // The segment holding row j.
  const Segment& SegmentOf(std::int64_t j) const {
    std::size_t s = 0;
    while (j >= segments[s].first_row + segments[s].rows) ++s;
    return segments[s];
  }
  // The bytes of row j in the GGUF's layout: in place, or (a row of a
  // group) copied into `scratch`.
  const std::byte* RowBytes(const Segment& s, std::int64_t j, std::vector<std::byte>& scratch) const {
    if (s.order == RowOrder::kRows) return BytesFrom(s, j);
    scratch.resize(static_cast<std::size_t>(s.row_bytes));
    const std::int64_t r = (j - s.first_row) % detail::kGroupRows;
    detail::UngroupRow(s.type, BytesFrom(s, j - r), r, s.row_bytes, scratch.data());
    return scratch.data();
  }
  // The stored bytes from row j on: row j itself in a segment of rows; in a
  // segment of groups of 8, the group whose first row is j.
  const std::byte* BytesFrom(const Segment& s, std::int64_t j) const {
    return bytes.get() + s.offset + (j - s.first_row) * s.row_bytes;
  }
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
static_assert(kColumnChunkAlignment == kBlockPanels * PackedWeights::Layout::kPanelWidth,
              "a chunk of columns is whole work items");
// k in equal slices of at most kSliceK (1536 -> 2 x 768, not 1024 + 512).
constexpr std::int64_t SliceK(std::int64_t k) {
  const std::int64_t slices = (k + kSliceK - 1) / kSliceK;
  return (k + slices - 1) / slices;
}

struct MatMulPlan {
  const float* x;  // [m, k]
  std::int64_t m;
  const PackedWeights::Layout* w;
  // Output columns [first_col, first_col + ldy) of y [m, n] (all of them, or
  // a chunk of MatMulColumnChunks): y[i, j] is at y + i * ldy + j - first_col.
  float* y;
  std::int64_t ldy;
  std::int64_t first_col;          // first_panel_block * kBlockPanels * kPanelWidth
  std::int64_t first_panel_block;  // the items' panel blocks count from here
  std::int64_t block_rows;         // kBlockRows, or kStoredBlockRows for stored rows
  std::int64_t row_blocks;         // ceil(m / block_rows)
  std::int64_t panel_blocks;       // of the columns: ceil(their panels / kBlockPanels)
  // Order of the work items, so that a thread's consecutive items share the
  // larger operand: with n > m (the 113 MiB logits matrix against 4.7 MiB of
  // activations) items go panel block by panel block and the weights are read
  // from memory once, x re-read from L3; otherwise row block by row block.
  bool panel_major;
  std::int64_t Blocks() const { return row_blocks * panel_blocks; }
  std::int64_t RowBlock(std::int64_t item) const { return panel_major ? item % row_blocks : item / panel_blocks; }
  std::int64_t PanelBlock(std::int64_t item) const {
    return first_panel_block + (panel_major ? item / row_blocks : item % panel_blocks);
  }
  float* Y(std::int64_t i, std::int64_t j) const { return y + i * ldy + (j - first_col); }
};

// Computes work items [begin, end) of plan.Blocks().
void MatMulBlocks(const MatMulPlan& plan, std::int64_t begin, std::int64_t end);

// Stored rows, many rows of x (m > kDotRows): work items are blocks of
// kStoredBlockRows rows x kBlockPanels panels; each dequantizes its panels
// (kBlockPanels * 16 rows of W, whole k) into a per-thread float32 buffer
// and runs the float32 tiles over them, in the same k slices: the result
// is bitwise MatMulBlocks' on the dequantized weights. Dequantizing costs
// about as much as 16 rows of FMAs (measured), once per weight and 768 rows.
constexpr std::int64_t kStoredBlockRows = 8 * kBlockRows;
void StoredMatMulBlocks(const MatMulPlan& plan, std::int64_t begin, std::int64_t end);

// Stored rows, few rows of x (decode): y[i, j] for W rows [begin, end) and
// i < m <= kDotRows, each a dot product of x row i with W row j dequantized
// in registers (four accumulators, summed in a fixed order). x_padded holds
// the m rows of x with k rounded up to kPanelWidth, zero-filled.
constexpr std::int64_t kDotRows = 4;
// Whether the stored-rows kernels read `type` (PackedWeights::HasKernel).
bool HasStoredFormat(GgmlType type);
void StoredDotRows(const PackedWeights::Layout& w, const float* x_padded, std::int64_t m, float* y, std::int64_t begin,
                   std::int64_t end);
// The rows of x for the integer products (DotActivations::kInt8: decode,
// m <= kDotRows, int8_dot-inl.h; prefill, int8_prefill-inl.h):
// each row also in blocks of 32 values, q = x (1 / d) rounded to nearest
// (ties to even) with d = max|x| / 127 (q = 0 for an all-zero block), as
// llama.cpp quantizes x to Q8_0 but with d kept in float32. k is a multiple of 32
// (every quantized format's block). Element-type rows (F32, F16, BF16) read
// x as it is (x_padded); the quantized rows of a target without an integer
// kernel read d q (dequantized).
struct Int8Rows {
  static constexpr std::int64_t kBlock = 32;
  std::int64_t m;                        // rows of x
  const std::int8_t* q;                  // [m, k]
  const float* scale;                    // [m, k / 32]: d
  const float* scaled_sum;               // [m, k / 32]: d * sum of the block's q (the min terms)
  const float* x_padded;                 // [m, PaddedK(k)]: x, zero-padded
  const float* dequantized;              // [m, PaddedK(k)]: d q, zero-padded (decode; null for the panels)
  const std::int32_t* sums16 = nullptr;  // [m, k / 16]: sum of q over each 16 (prefill: the codes' offsets)
};
// Fills the arrays of an Int8Rows from x [m, k] (int8_dot-inl.h); sums16 and
// dequantized only where not null.
void QuantizeInt8(const float* x, std::int64_t m, std::int64_t k, std::int8_t* q, float* scale, float* scaled_sum,
                  std::int32_t* sums16, float* dequantized);
// The product over W rows [begin, end).
void Int8DotRows(const PackedWeights::Layout& w, const Int8Rows& x, float* y, std::int64_t begin, std::int64_t end);
// Stored rows, many rows of x (m > kDotRows, or FewRows::kPanels) with int8 activations
// (DotActivations::kInt8, x.sums16 set): the work items of StoredMatMulBlocks,
// each block of panels of one quantized type run by the integer kernel
// (int8_prefill-inl.h; bitwise Int8ProductReference of int8_panels.h), the
// others by the float32 kernel.
void Int8MatMulBlocks(const MatMulPlan& plan, const Int8Rows& x, std::int64_t begin, std::int64_t end);
// k rounded up to whole panel rows: the padded x's row length.
constexpr std::int64_t PaddedK(std::int64_t k) {
  return (k + PackedWeights::Layout::kPanelWidth - 1) / PackedWeights::Layout::kPanelWidth *
         PackedWeights::Layout::kPanelWidth;
}

}  // namespace detail
}  // namespace posenc
