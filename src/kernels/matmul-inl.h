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
#include <optional>
#include <vector>

#include "hwy/highway.h"
#include "kernels/int8_dot-inl.h"
#include "kernels/int8_prefill-inl.h"
#include "kernels/matmul_kernel.h"
#include "kernels/weight_blocks-inl.h"

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

// Rows [row_begin, row_end) of y against panels [panel_begin, panel_end),
// panel p at panel(p): tiles of kTileRows rows, k in slices.
template <class PanelAt>
HWY_INLINE void RunBlock(const detail::MatMulPlan& plan, std::int64_t row_begin, std::int64_t row_end,
                         std::int64_t panel_begin, std::int64_t panel_end, const PanelAt& panel) {
  const std::int64_t k = plan.w->k, n = plan.w->n;
  const std::int64_t slice = detail::SliceK(k);
  for (std::int64_t k0 = 0; k0 < k; k0 += slice) {
    const std::int64_t kc = std::min(slice, k - k0);
    for (std::int64_t i = row_begin; i < row_end; i += kTileRows) {
      const std::int64_t rows = std::min(kTileRows, row_end - i);
      for (std::int64_t p = panel_begin; p < panel_end; ++p) {
        const std::int64_t cols = std::min(kPanel, n - p * kPanel);
        TileRows<kTileRows>(rows, plan.x + i * k + k0, k, panel(p) + k0 * kPanel, kc, plan.Y(i, p * kPanel), plan.ldy,
                            cols, k0 > 0);
      }
    }
  }
}

// Work item `block` of the plan: its rows and panels.
template <class Body>
HWY_INLINE void ForBlock(const detail::MatMulPlan& plan, std::int64_t block, const Body& body) {
  const std::int64_t row_begin = plan.RowBlock(block) * plan.block_rows;
  const std::int64_t panel_begin = plan.PanelBlock(block) * detail::kBlockPanels;
  body(row_begin, std::min(plan.m, row_begin + plan.block_rows), panel_begin,
       std::min(plan.w->panels, panel_begin + detail::kBlockPanels));
}

inline void MatMulBlocksImpl(const detail::MatMulPlan& plan, std::int64_t begin, std::int64_t end) {
  for (std::int64_t block = begin; block < end; ++block) {
    ForBlock(plan, block, [&](std::int64_t r0, std::int64_t r1, std::int64_t p0, std::int64_t p1) {
      RunBlock(plan, r0, r1, p0, p1, [&](std::int64_t p) { return plan.w->Panel(p); });
    });
  }
}

// Stored rows: W row j dequantized into `out` (k floats; PaddedK(k) writable).
inline void DequantizeStoredRow(const PackedWeights::Layout& w, std::int64_t j, float* HWY_RESTRICT out) {
  const PackedWeights::Layout::Segment& segment = w.SegmentOf(j);
  static thread_local std::vector<std::byte> scratch;  // a row of a group, in the GGUF's layout
  const std::byte* row = w.RowBytes(segment, j, scratch);
#if HWY_HAVE_SCALABLE
  DequantizeRow(segment.type, row, out, w.k, "row");
#else
  weight_blocks::WithFormat(segment.type, [&](auto format) {
    weight_blocks::VisitRow<decltype(format)>(row, w.k,
                                              [&](std::int64_t base, std::int64_t offset, weight_blocks::V v) HWY_ATTR {
                                                hn::StoreU(v, weight_blocks::DF(), out + base + offset);
                                              });
  });
#endif
}

// Whether the stored-rows kernels read `type` (one list: WithFormat's).
inline bool HasStoredFormatImpl(GgmlType type) {
  return weight_blocks::WithFormat(type, [](auto) {});
}

// This thread's float32 panels [p0, p1) of stored rows, dequantized (the
// panel layout of matmul_kernel.h: [kk][16] per panel, zero past n).
inline float* DequantizePanels(const PackedWeights::Layout& w, std::int64_t p0, std::int64_t p1) {
  const std::int64_t k = w.k;
  static thread_local hwy::AlignedFreeUniquePtr<float[]> panels, row;
  static thread_local std::int64_t panels_size = 0, row_size = 0;
  if (panels_size < detail::kBlockPanels * kPanel * k) {
    panels_size = detail::kBlockPanels * kPanel * k;
    panels = hwy::AllocateAligned<float>(static_cast<std::size_t>(panels_size));
  }
  if (row_size < detail::PaddedK(k)) {
    row_size = detail::PaddedK(k);
    row = hwy::AllocateAligned<float>(static_cast<std::size_t>(row_size));
  }
  for (std::int64_t p = p0; p < p1; ++p) {
    float* panel = panels.get() + (p - p0) * kPanel * k;
    for (std::int64_t c = 0; c < kPanel; ++c) {
      const std::int64_t j = p * kPanel + c;
      if (j < w.n) DequantizeStoredRow(w, j, row.get());
      for (std::int64_t kk = 0; kk < k; ++kk) panel[kk * kPanel + c] = j < w.n ? row[kk] : 0.0f;
    }
  }
  return panels.get();
}

inline void StoredMatMulBlocksImpl(const detail::MatMulPlan& plan, std::int64_t begin, std::int64_t end) {
  const std::int64_t k = plan.w->k;
  float* panels = nullptr;
  std::int64_t loaded = -1;  // the panel block in `panels`
  for (std::int64_t block = begin; block < end; ++block) {
    ForBlock(plan, block, [&](std::int64_t r0, std::int64_t r1, std::int64_t p0, std::int64_t p1) {
      if (p0 != loaded) {
        panels = DequantizePanels(*plan.w, p0, p1);
        loaded = p0;
      }
      RunBlock(plan, r0, r1, p0, p1, [&](std::int64_t p) { return panels + (p - p0) * kPanel * k; });
    });
  }
}

// Rows [r0, r1) of the quantized x as d q (the values Quantize writes as
// `dequantized`: float(q) d, exact) into this thread's buffer, k apart.
inline const float* DequantizeInt8Rows(const detail::Int8Rows& x, std::int64_t k, std::int64_t r0, std::int64_t r1) {
  static thread_local std::vector<float> rows;
  rows.resize(static_cast<std::size_t>((r1 - r0) * k));
  constexpr std::int64_t kBlock = detail::Int8Rows::kBlock;
  for (std::int64_t i = r0; i < r1; ++i) {
    for (std::int64_t t = 0; t < k; ++t) {
      rows[(i - r0) * k + t] = static_cast<float>(x.q[i * k + t]) * x.scale[(i * k + t) / kBlock];
    }
  }
  return rows.data();
}

// Int8 activations, many rows (int8_prefill-inl.h): a block of panels the
// integer kernel takes is unpacked once and run for the block's rows; any
// other runs the float32 kernel over x where all its rows are element
// types, over the block's rows of the dequantized activations d q otherwise.
inline void Int8MatMulBlocksImpl(const detail::MatMulPlan& plan, const detail::Int8Rows& x, std::int64_t begin,
                                 std::int64_t end) {
  const PackedWeights::Layout& w = *plan.w;
  static thread_local int8_prefill::Panels unpacked;
  float* panels = nullptr;  // dequantized, when the integer kernel does not take the block
  bool elements = false;    // all the block's rows of element types (F32, F16, BF16)
  std::int64_t loaded = -1;
  for (std::int64_t block = begin; block < end; ++block) {
    ForBlock(plan, block, [&](std::int64_t r0, std::int64_t r1, std::int64_t p0, std::int64_t p1) {
      if (p0 != loaded) {
        const std::optional<detail::Int8Form> form = int8_prefill::BlockForm(w, p0, p1);
        panels = nullptr;
        if (form) {
          unpacked.Unpack(w, *form, p0, p1);
        } else {
          panels = DequantizePanels(w, p0, p1);
          elements = true;
          for (std::int64_t j = p0 * kPanel; j < std::min(w.n, p1 * kPanel); ++j) {
            elements = elements && TraitsOf(w.SegmentOf(j).type).block_elements == 1;
          }
        }
        loaded = p0;
      }
      const auto panel = [&](std::int64_t p) { return panels + (p - p0) * kPanel * w.k; };
      detail::MatMulPlan fallback = plan;
      if (panels == nullptr) {
        int8_prefill::RunBlock(plan, x, unpacked, r0, r1, p0, p1);
      } else if (elements) {
        fallback.x = x.x_padded;
        RunBlock(fallback, r0, r1, p0, p1, panel);
      } else {  // a plan of the block's rows: its row 0 is row r0
        fallback.x = DequantizeInt8Rows(x, w.k, r0, r1);
        fallback.m = r1 - r0;
        fallback.y = plan.Y(r0, plan.first_col);
        RunBlock(fallback, 0, r1 - r0, p0, p1, panel);
      }
    });
  }
}

#if HWY_HAVE_SCALABLE
// Sizeless vectors cannot live in arrays: each row dequantized, then a
// plain dot product (correct, not tuned).
inline void StoredDotRowsImpl(const PackedWeights::Layout& w, const float* x, std::int64_t m, float* y,
                              std::int64_t begin, std::int64_t end) {
  std::vector<float> row(static_cast<std::size_t>(detail::PaddedK(w.k)));
  for (std::int64_t j = begin; j < end; ++j) {
    DequantizeStoredRow(w, j, row.data());
    for (std::int64_t i = 0; i < m; ++i) {
      float acc = 0;
      for (std::int64_t kk = 0; kk < w.k; ++kk) acc = std::fma(x[i * detail::PaddedK(w.k) + kk], row[kk], acc);
      y[i * w.n + j] = acc;
    }
  }
}
#else
// y[i, j] for W rows [begin, end) of one format and M rows of x: a weight
// vector at place `offset` of its block goes to accumulator (offset / N) % 4
// of each row of x (up to four independent FMA chains that hide the FMA
// latency; a register, as offset is a constant after unrolling), summed as
// (a0 + a1) + (a2 + a3), then across lanes.
template <std::int64_t M, class Format>
HWY_INLINE void DotRows(const PackedWeights::Layout& w, const PackedWeights::Layout::Segment& segment,
                        const float* HWY_RESTRICT x, float* HWY_RESTRICT y, std::int64_t begin, std::int64_t end) {
  using weight_blocks::DF;
  using weight_blocks::V;
  const DF df;
  const std::int64_t ldx = detail::PaddedK(w.k);
  std::vector<std::byte> scratch;  // a row of a group, in the GGUF's layout
  for (std::int64_t j = begin; j < end; ++j) {
    V acc[M][4];
    for (std::int64_t i = 0; i < M; ++i) {
      for (V& a : acc[i]) a = hn::Zero(df);
    }
    constexpr auto kLanes = static_cast<std::int64_t>(hn::MaxLanes(DF()));
    weight_blocks::VisitRow<Format>(
        w.RowBytes(segment, j, scratch), w.k, [&](std::int64_t base, std::int64_t offset, V v) HWY_ATTR {
          const std::int64_t slot = (offset / kLanes) & 3;
          for (std::int64_t i = 0; i < M; ++i) {
            acc[i][slot] = hn::MulAdd(hn::LoadU(df, x + i * ldx + base + offset), v, acc[i][slot]);
          }
        });
    for (std::int64_t i = 0; i < M; ++i) {
      const V sum = hn::Add(hn::Add(acc[i][0], acc[i][1]), hn::Add(acc[i][2], acc[i][3]));
      y[i * w.n + j] = hn::GetLane(hn::SumOfLanes(df, sum));
    }
  }
}

template <std::int64_t M>
HWY_INLINE void DotRowsOf(const PackedWeights::Layout& w, const float* x, float* y, std::int64_t begin,
                          std::int64_t end) {
  while (begin < end) {
    const PackedWeights::Layout::Segment& segment = w.SegmentOf(begin);
    const std::int64_t stop = std::min(end, segment.first_row + segment.rows);
    weight_blocks::WithFormat(segment.type,
                              [&](auto format) { DotRows<M, decltype(format)>(w, segment, x, y, begin, stop); });
    begin = stop;
  }
}

inline void StoredDotRowsImpl(const PackedWeights::Layout& w, const float* x, std::int64_t m, float* y,
                              std::int64_t begin, std::int64_t end) {
  switch (m) {
    case 1: return DotRowsOf<1>(w, x, y, begin, end);
    case 2: return DotRowsOf<2>(w, x, y, begin, end);
    case 3: return DotRowsOf<3>(w, x, y, begin, end);
    default: return DotRowsOf<4>(w, x, y, begin, end);
  }
}
#endif  // HWY_HAVE_SCALABLE

inline void QuantizeInt8Impl(const float* x, std::int64_t m, std::int64_t k, std::int8_t* q, float* scale,
                             float* scaled_sum, std::int32_t* sums16, float* dequantized) {
  int8_dot::Quantize(x, m, k, q, scale, scaled_sum, sums16, dequantized);
}

// Int8 activations: the integer kernel for the quantized segments where the
// target has one, the float32 kernel over d q for the other quantized ones
// and over x for the element types.
inline void Int8DotRowsImpl(const PackedWeights::Layout& w, const detail::Int8Rows& x, float* y, std::int64_t begin,
                            std::int64_t end) {
  while (begin < end) {
    const PackedWeights::Layout::Segment& segment = w.SegmentOf(begin);
    const std::int64_t stop = std::min(end, segment.first_row + segment.rows);
    if (!int8_dot::DotSegment(w, segment, x, y, begin, stop)) {
      const bool quantized = TraitsOf(segment.type).block_elements > 1;
      StoredDotRowsImpl(w, quantized ? x.dequantized : x.x_padded, x.m, y, begin, stop);
    }
    begin = stop;
  }
}

}  // namespace posenc::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard
