// Dynamic dispatch of the matmul kernel (matmul-inl.h), weight packing and
// the public entry point.
// AVX3_DL (AVX-512 with VNNI, Ice Lake and Zen 4 on) is compiled here too:
// the integer prefill kernel's vpdpbusd (int8_prefill-inl.h).
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matmul.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/matmul-inl.h"

#if HWY_ONCE
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "hwy/aligned_allocator.h"
#include "posenc/error.h"
#include "posenc/parallel.h"

namespace posenc {
namespace detail {

HWY_EXPORT(MatMulBlocksImpl);
HWY_EXPORT(StoredMatMulBlocksImpl);
HWY_EXPORT(StoredDotRowsImpl);
HWY_EXPORT(HasStoredFormatImpl);
HWY_EXPORT(Int8DotRowsImpl);
HWY_EXPORT(QuantizeInt8Impl);
HWY_EXPORT(Int8MatMulBlocksImpl);

void MatMulBlocks(const MatMulPlan& plan, std::int64_t begin, std::int64_t end) {
  HWY_DYNAMIC_DISPATCH(MatMulBlocksImpl)(plan, begin, end);
}
void StoredMatMulBlocks(const MatMulPlan& plan, std::int64_t begin, std::int64_t end) {
  HWY_DYNAMIC_DISPATCH(StoredMatMulBlocksImpl)(plan, begin, end);
}
bool HasStoredFormat(GgmlType type) { return HWY_DYNAMIC_DISPATCH(HasStoredFormatImpl)(type); }
void StoredDotRows(const PackedWeights::Layout& w, const float* x_padded, std::int64_t m, float* y, std::int64_t begin,
                   std::int64_t end) {
  HWY_DYNAMIC_DISPATCH(StoredDotRowsImpl)(w, x_padded, m, y, begin, end);
}

void QuantizeInt8(const float* x, std::int64_t m, std::int64_t k, std::int8_t* q, float* scale, float* scaled_sum,
                  std::int32_t* sums16, float* dequantized) {
  HWY_DYNAMIC_DISPATCH(QuantizeInt8Impl)(x, m, k, q, scale, scaled_sum, sums16, dequantized);
}
void Int8DotRows(const PackedWeights::Layout& w, const Int8Rows& x, float* y, std::int64_t begin, std::int64_t end) {
  HWY_DYNAMIC_DISPATCH(Int8DotRowsImpl)(w, x, y, begin, end);
}
void Int8MatMulBlocks(const MatMulPlan& plan, const Int8Rows& x, std::int64_t begin, std::int64_t end) {
  HWY_DYNAMIC_DISPATCH(Int8MatMulBlocksImpl)(plan, x, begin, end);
}

}  // namespace detail

using Layout = PackedWeights::Layout;

PackedWeights::PackedWeights(std::unique_ptr<Layout> layout) : layout_(std::move(layout)) {}
PackedWeights::PackedWeights(PackedWeights&&) noexcept = default;
PackedWeights& PackedWeights::operator=(PackedWeights&&) noexcept = default;
PackedWeights::~PackedWeights() = default;

std::int64_t PackedWeights::rows() const { return layout_->n; }
std::int64_t PackedWeights::cols() const { return layout_->k; }

namespace {

constexpr const char* kOp = "matmul";

// Which kernel reads the quantized x, and so which of Int8Rows' optional
// arrays it needs.
enum class Int8Reader {
  kDotRows,  // decode's dot products: dequantized (for a type without an integer kernel), no sums16
  kPanels,   // the prefill's panels: sums16 (the codes' offsets); a block the integer kernel does
             // not take dequantizes its own rows
};

// m rows of x [m, k] quantized for the integer product (detail::Int8Rows:
// the format and the rounding), rows split over the threads (each row is
// quantized alone, so the bytes do not depend on the split). k is a
// multiple of 32 when a quantized format's rows are stored.
class Int8Quantized {
 public:
  static constexpr std::int64_t kBlock = detail::Int8Rows::kBlock;
  // Rows a thread quantizes at least: ~20 KiB of x at k = 320.
  static constexpr std::int64_t kMinRows = 16;
  Int8Quantized(std::span<const float> x, std::int64_t m, std::int64_t k, Int8Reader reader)
      : m_(m), q_(Allocate<std::int8_t>(m * k)), scale_(Allocate<float>(m * k / kBlock)),
        scaled_sum_(Allocate<float>(m * k / kBlock)),
        sums16_(reader == Int8Reader::kPanels ? Allocate<std::int32_t>(m * k / 16) : nullptr),
        dequantized_(reader == Int8Reader::kDotRows ? Allocate<float>(m * detail::PaddedK(k)) : nullptr) {
    const std::int64_t ldx = detail::PaddedK(k);
    if (dequantized_) std::fill_n(dequantized_.get(), m * ldx, 0.0f);  // the padding
    ParallelFor(m, kMinRows, [&](std::int64_t begin, std::int64_t end) {
      detail::QuantizeInt8(x.data() + begin * k, end - begin, k, q_.get() + begin * k,
                           scale_.get() + begin * (k / kBlock), scaled_sum_.get() + begin * (k / kBlock),
                           sums16_ ? sums16_.get() + begin * (k / 16) : nullptr,
                           dequantized_ ? dequantized_.get() + begin * ldx : nullptr);
    });
  }
  detail::Int8Rows Rows(const float* x_padded) const {
    return {.m = m_,
            .q = q_.get(),
            .scale = scale_.get(),
            .scaled_sum = scaled_sum_.get(),
            .x_padded = x_padded,
            .dequantized = dequantized_.get(),
            .sums16 = sums16_.get()};
  }

 private:
  template <class T>
  static hwy::AlignedFreeUniquePtr<T[]> Allocate(std::int64_t count) {  // uninitialized: every value is written
    return hwy::AllocateAligned<T>(static_cast<std::size_t>(count));
  }
  std::int64_t m_;
  hwy::AlignedFreeUniquePtr<std::int8_t[]> q_;
  hwy::AlignedFreeUniquePtr<float[]> scale_, scaled_sum_;
  hwy::AlignedFreeUniquePtr<std::int32_t[]> sums16_;
  hwy::AlignedFreeUniquePtr<float[]> dequantized_;
};

// Float32 panels of w [n, k] (the layout in matmul_kernel.h).
std::unique_ptr<Layout> PanelsOf(std::span<const float> w, std::int64_t n, std::int64_t k) {
  auto layout = std::make_unique<Layout>();
  layout->n = n;
  layout->k = k;
  layout->panels = (n + Layout::kPanelWidth - 1) / Layout::kPanelWidth;
  layout->data = hwy::AllocateAligned<float>(static_cast<std::size_t>(layout->panels * k * Layout::kPanelWidth));
  Require(layout->data != nullptr, kOp, "n * k", n * k, "allocation of the packed weights failed");
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
  return layout;
}

}  // namespace

PackedWeights PackedWeights::Pack(std::span<const float> w, std::int64_t n, std::int64_t k) {
  Require(n >= 1, kOp, "n", n, "must be at least 1");
  Require(k >= 1, kOp, "k", k, "must be at least 1");
  Require(static_cast<std::int64_t>(w.size()) / k == n && static_cast<std::int64_t>(w.size()) % k == 0, kOp, "w.size()",
          w.size(), "must be n * k = " + std::to_string(n) + " * " + std::to_string(k));
  return PackedWeights(PanelsOf(w, n, k));
}

bool PackedWeights::HasKernel(GgmlType type) { return detail::HasStoredFormat(type); }

PackedWeights PackedWeights::FromRows(std::span<const WeightRows> parts, std::int64_t k, WeightStorage storage,
                                      DotActivations decode) {
  Require(k >= 1, kOp, "k", k, "must be at least 1");
  Require(!parts.empty(), kOp, "parts", Verbatim{"empty"}, "a matrix needs at least one part");
  auto layout = std::make_unique<Layout>();
  layout->k = k;
  bool all_f32 = true;
  std::int64_t bytes = 0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const WeightRows& part = parts[i];
    const GgmlTypeTraits& traits = TraitsOf(part.type);
    const std::string name = part.name.empty() ? "parts[" + std::to_string(i) + "]" : std::string(part.name);
    Require(part.rows >= 1, kOp, name + ".rows", part.rows, "must be at least 1");
    Require(k % traits.block_elements == 0, kOp, "k", k,
            "must be whole " + std::string(traits.name) + " blocks of " + std::to_string(traits.block_elements) +
                " values (" + name + ")");
    Require(storage == WeightStorage::kFloat32 ? traits.dequantizable : HasKernel(part.type), kOp, name + ".type",
            traits.name,
            storage == WeightStorage::kFloat32 ? "cannot be dequantized by posenc"
                                               : "has no matmul kernel (keep the weights as float32)");
    const std::int64_t row_bytes = k / traits.block_elements * traits.block_bytes;
    Require(static_cast<std::int64_t>(part.data.size()) == part.rows * row_bytes, kOp, name + ".data.size()",
            part.data.size(),
            "must be rows * row bytes = " + std::to_string(part.rows) + " * " + std::to_string(row_bytes));
    RequireFiniteScales(part.type, part.data.data(), part.rows * k, name);
    layout->segments.push_back(Layout::Segment{part.type, layout->n, part.rows, row_bytes, bytes});
    layout->n += part.rows;
    bytes += part.rows * row_bytes;
    all_f32 = all_f32 && part.type == GgmlType::kF32;
  }
  if (storage == WeightStorage::kFloat32 || all_f32) {
    std::vector<float> w(static_cast<std::size_t>(layout->n * k));
    for (std::size_t i = 0; i < parts.size(); ++i) {
      DequantizeRow(parts[i].type, parts[i].data.data(), w.data() + layout->segments[i].first_row * k,
                    parts[i].rows * k, parts[i].name);
    }
    return PackedWeights(PanelsOf(w, layout->n, k));
  }
  layout->panels = (layout->n + Layout::kPanelWidth - 1) / Layout::kPanelWidth;
  layout->bytes = PooledBytes(static_cast<std::size_t>(bytes));
  for (std::size_t i = 0; i < parts.size(); ++i) {
    Layout::Segment& segment = layout->segments[i];
    std::byte* at = layout->bytes.get() + segment.offset;
    std::memcpy(at, parts[i].data.data(), parts[i].data.size());
    if (decode == DotActivations::kInt8 && detail::GroupsRows(segment.type, segment.first_row, segment.rows)) {
      detail::GroupRows(segment.type, at, segment.rows, segment.row_bytes);
      segment.order = Layout::RowOrder::kGroupsOf8;
    }
  }
  return PackedWeights(std::move(layout));
}

double PackedWeights::Bytes() const {
  const Layout& w = *layout_;
  if (!w.Stored()) return 4.0 * static_cast<double>(w.panels * w.k * Layout::kPanelWidth);
  const Layout::Segment& last = w.segments.back();
  return static_cast<double>(last.offset + last.rows * last.row_bytes);
}

void PackedWeights::Row(std::int64_t j, std::span<float> out) const {
  const Layout& w = *layout_;
  Require(j >= 0 && j < w.n, kOp, "row", j, "must be in [0, n = " + std::to_string(w.n) + ")");
  Require(static_cast<std::int64_t>(out.size()) == w.k, kOp, "out.size()", out.size(),
          "must be k = " + std::to_string(w.k));
  if (w.Stored()) {
    const Layout::Segment& segment = w.SegmentOf(j);
    std::vector<std::byte> scratch;
    DequantizeRow(segment.type, w.RowBytes(segment, j, scratch), out.data(), w.k, "row");
    return;
  }
  const float* panel = w.Panel(j / Layout::kPanelWidth);
  for (std::int64_t kk = 0; kk < w.k; ++kk) out[kk] = panel[kk * Layout::kPanelWidth + j % Layout::kPanelWidth];
}

namespace {

// MatMul's and MatMulColumnChunks' x: m >= 0 rows of k values.
void RequireRowsOfX(std::span<const float> x, std::int64_t m, std::int64_t k) {
  Require(m >= 0, "matmul", "m", m, "must be at least 0");
  // The rule built only when the check fails: a decode step makes ~120 products.
  Require(static_cast<std::int64_t>(x.size()) == m * k, "matmul", "x.size()", x.size(),
          [&] { return "must be m * k = " + std::to_string(m) + " * " + std::to_string(k); });
}

// x in blocks of 32 for the integer kernels, when the activations are int8
// and some rows of w are of a quantized type (k is then whole blocks, so the
// padded rows are x's); nothing otherwise.
std::optional<Int8Quantized> Int8Of(std::span<const float> x, std::int64_t m, const Layout& layout,
                                    DotActivations activations, Int8Reader reader) {
  const bool quantized = std::any_of(layout.segments.begin(), layout.segments.end(),
                                     [](const Layout::Segment& s) { return TraitsOf(s.type).block_elements > 1; });
  if (activations != DotActivations::kInt8 || !quantized) return std::nullopt;
  return std::make_optional<Int8Quantized>(x, m, layout.k, reader);
}

// The products of many rows for y's columns [first, first + width) into y
// [m, width]: first a multiple of kColumnChunkAlignment, so that the items
// are those of the whole product's plan over these columns.
detail::MatMulPlan PlanColumns(std::span<const float> x, std::int64_t m, const Layout& layout, float* y,
                               std::int64_t first, std::int64_t width) {
  const std::int64_t block_rows = layout.Stored() ? detail::kStoredBlockRows : detail::kBlockRows;
  const std::int64_t first_panel = first / Layout::kPanelWidth;
  const std::int64_t panels = std::min(layout.panels, (first + width + Layout::kPanelWidth - 1) / Layout::kPanelWidth);
  return {
      .x = x.data(),
      .m = m,
      .w = &layout,
      .y = y,
      .ldy = width,
      .first_col = first,
      .first_panel_block = first_panel / detail::kBlockPanels,
      .block_rows = block_rows,
      .row_blocks = (m + block_rows - 1) / block_rows,
      .panel_blocks = (panels - first_panel + detail::kBlockPanels - 1) / detail::kBlockPanels,
      // Stored rows: a thread's consecutive items share their panels, which
      // it dequantizes once.
      .panel_major = layout.Stored() || width > m,
  };
}

// The plan's items on every thread; with int8 activations when q holds them.
void RunPlan(const detail::MatMulPlan& plan, const std::optional<Int8Quantized>& q) {
  const Layout& layout = *plan.w;
  // Small products stay on one thread: at least ~2 MFLOP per piece.
  const double block_flops = 2.0 * static_cast<double>(std::min(plan.m, plan.block_rows)) *
                             static_cast<double>(detail::kBlockPanels * Layout::kPanelWidth * layout.k);
  const auto min_chunk = static_cast<std::int64_t>(std::max(1.0, 2e6 / block_flops));
  if (q) {
    const detail::Int8Rows rows = q->Rows(plan.x);
    ParallelFor(plan.Blocks(), min_chunk,
                [&](std::int64_t begin, std::int64_t end) { detail::Int8MatMulBlocks(plan, rows, begin, end); });
    return;
  }
  ParallelFor(plan.Blocks(), min_chunk, [&](std::int64_t begin, std::int64_t end) {
    if (layout.Stored()) {
      detail::StoredMatMulBlocks(plan, begin, end);
    } else {
      detail::MatMulBlocks(plan, begin, end);
    }
  });
}

}  // namespace

void MatMul(std::span<const float> x, std::int64_t m, const PackedWeights& w, std::span<float> y,
            DotActivations activations, FewRows few) {
  const Layout& layout = w.layout();
  const std::int64_t n = layout.n, k = layout.k;
  RequireRowsOfX(x, m, k);
  Require(static_cast<std::int64_t>(y.size()) == m * n, "matmul", "y.size()", y.size(),
          [&] { return "must be m * n = " + std::to_string(m) + " * " + std::to_string(n); });
  if (m == 0) return;
  if (layout.Stored() && m <= detail::kDotRows && few == FewRows::kDot) {
    // Decode: x rows padded with zeros to whole vectors; rows of W in chunks
    // of about 64 KiB of weights, split at multiples of 8 rows (never inside
    // a group of rows).
    const std::int64_t ldx = detail::PaddedK(k);
    std::vector<float> x_padded(static_cast<std::size_t>(m * ldx), 0.0f);
    for (std::int64_t i = 0; i < m; ++i) std::copy_n(x.data() + i * k, k, x_padded.data() + i * ldx);
    const double group_bytes = w.Bytes() / static_cast<double>(n) * detail::kGroupRows;
    const auto groups_per_chunk = static_cast<std::int64_t>(std::max(1.0, 65536.0 / group_bytes));
    const std::int64_t groups = (n + detail::kGroupRows - 1) / detail::kGroupRows;
    const auto over_rows = [&](const auto& body) {
      ParallelFor(groups, groups_per_chunk, [&](std::int64_t begin, std::int64_t end) {
        body(begin * detail::kGroupRows, std::min(n, end * detail::kGroupRows));
      });
    };
    if (const std::optional<Int8Quantized> q = Int8Of(x, m, layout, activations, Int8Reader::kDotRows)) {
      const detail::Int8Rows rows = q->Rows(x_padded.data());
      over_rows([&](std::int64_t begin, std::int64_t end) { detail::Int8DotRows(layout, rows, y.data(), begin, end); });
    } else {
      over_rows([&](std::int64_t begin, std::int64_t end) {
        detail::StoredDotRows(layout, x_padded.data(), m, y.data(), begin, end);
      });
    }
    return;
  }
  const std::optional<Int8Quantized> q = Int8Of(x, m, layout, activations, Int8Reader::kPanels);
  RunPlan(PlanColumns(x, m, layout, y.data(), 0, n), q);
}

void MatMulColumnChunks(std::span<const float> x, std::int64_t m, const PackedWeights& w, std::int64_t chunk_columns,
                        DotActivations activations, const ColumnChunkSink& consume) {
  const Layout& layout = w.layout();
  const std::int64_t n = layout.n, k = layout.k;
  RequireRowsOfX(x, m, k);
  Require(chunk_columns > 0 && chunk_columns % kColumnChunkAlignment == 0, "matmul", "chunk_columns", chunk_columns,
          "must be a positive multiple of " + std::to_string(kColumnChunkAlignment) +
              " (whole blocks of the kernel's panels)");
  if (m == 0) return;
  const std::optional<Int8Quantized> q = Int8Of(x, m, layout, activations, Int8Reader::kPanels);
  std::vector<float> y(static_cast<std::size_t>(m * std::min(chunk_columns, n)));
  for (std::int64_t first = 0; first < n; first += chunk_columns) {
    const std::int64_t width = std::min(chunk_columns, n - first);
    RunPlan(PlanColumns(x, m, layout, y.data(), first, width), q);
    consume(first, width, std::span<const float>(y.data(), static_cast<std::size_t>(m * width)));
  }
}

}  // namespace posenc
#endif  // HWY_ONCE
