// Per-target integer prefill kernel (compiled once per SIMD target,
// included by matmul-inl.h): products of many rows of x (m > kDotRows) with
// quantized stored rows under DotActivations::kInt8, computing exactly the
// formula of int8_panels.h (bitwise Int8ProductReference on every target).
//
// A work item (the float32 kernel's: a block of rows x kBlockPanels panels)
// first unpacks its panels' weight rows (UnpackInt8Row) into this thread's
// buffer, in the order the kernel reads them, then runs tiles of R rows x 2
// vectors of columns over the whole k, each weight word reused for the R
// rows:
//   codes  [panel][k / 4][16 columns][4 bytes]   a vector of 4-byte words
//          holds 4 consecutive codes of 16 (AVX-512) or 8 (AVX2) columns
//   scale  [panel][k / sub][16]   min [panel][k / 32][16]
// For each sub-block, an int32 lane per (row, column) starts at
// -offset sum q and adds the products of 4 codes with 4 bytes of the row's
// q broadcast to every lane: `vpdpbusd` (unsigned x signed bytes, four
// products summed into an int32, exact) on AVX3_DL (AVX-512 VNNI; Highway
// 1.0.3 has no op for it, and its AVX3_DL target string names no
// avx512vnni, hence the one line of inline asm); on AVX3 and AVX2,
// `pmaddubsw` (pairs into int16) summed in int16 while no sum can reach
// 2^15 (8 of them for 4-bit codes, 4 for 5-bit, 2 for 6-bit), then
// `pmaddwd` into int32. Q8_0's codes (q + 128) could overflow pmaddubsw's
// pairs, so only AVX3_DL takes Q8_0. Then per (row, column) the float32
// steps of the formula: convert, times scale d_x, FMA; the min's FMA.
//
// Work the kernel does not take (a block of panels mixing types, or a type
// without a form on this target, and every non-x86 target: Highway 1.0.3
// exposes no Arm SDOT/I8MM op) runs the float32 stored-rows kernel over
// the dequantized activations d q (over x where all the block's rows are
// element types), as the decode does.
#if defined(POSENC_INT8_PREFILL_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_INT8_PREFILL_INL_H_
#undef POSENC_INT8_PREFILL_INL_H_
#else
#define POSENC_INT8_PREFILL_INL_H_
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "hwy/aligned_allocator.h"
#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "kernels/int8_panels.h"
#include "kernels/matmul_kernel.h"

HWY_BEFORE_NAMESPACE();
namespace posenc::HWY_NAMESPACE::int8_prefill {

using Layout = PackedWeights::Layout;
constexpr std::int64_t kPanelWidth = Layout::kPanelWidth;

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
// A vector of the target's full width: int32 lanes for the integer sums, float
// lanes for the formula's float32 steps.
namespace hn = hwy::HWY_NAMESPACE;
using DI = hn::ScalableTag<std::int32_t>;
using DF = hn::ScalableTag<float>;
using I = hn::Vec<DI>;
using F = hn::Vec<DF>;
#if HWY_TARGET <= HWY_AVX3
constexpr std::int64_t kLanes = 16;  // a panel a vector
// Rows a tile: 2 R float and 2 R int32 accumulators of the 32 registers.
constexpr std::int64_t kRows = HWY_TARGET == HWY_AVX3_DL ? 6 : 4;
// The two integer products Highway 1.0.3 has no op for: pmaddubsw (unsigned
// codes x signed q bytes, adjacent pairs summed into int16, saturating) and
// pmaddwd by 1 (adjacent int16 pairs summed into int32).
HWY_INLINE I PairProducts(I codes, I q) { return I{_mm512_maddubs_epi16(codes.raw, q.raw)}; }
HWY_INLINE I PairSums(I pairs) { return I{_mm512_madd_epi16(pairs.raw, _mm512_set1_epi16(1))}; }
#else
constexpr std::int64_t kLanes = 8;  // half a panel a vector
constexpr std::int64_t kRows = 2;   // 16 registers
HWY_INLINE I PairProducts(I codes, I q) { return I{_mm256_maddubs_epi16(codes.raw, q.raw)}; }
HWY_INLINE I PairSums(I pairs) { return I{_mm256_madd_epi16(pairs.raw, _mm256_set1_epi16(1))}; }
#endif
static_assert(kLanes == hn::MaxLanes(DF()));
HWY_INLINE I LoadI(const std::uint8_t* p) {
  return hn::BitCast(DI(), hn::LoadU(hn::Repartition<std::uint8_t, DI>(), p));
}
HWY_INLINE I SetI(std::int32_t v) { return hn::Set(DI(), v); }
HWY_INLINE I AddI(I a, I b) { return hn::Add(a, b); }
HWY_INLINE I Add16(I a, I b) {  // as int16 lanes, wrapping
  const hn::Repartition<std::int16_t, DI> d16;
  return hn::BitCast(DI(), hn::Add(hn::BitCast(d16, a), hn::BitCast(d16, b)));
}
HWY_INLINE F ToFloat(I v) { return hn::ConvertTo(DF(), v); }
HWY_INLINE F LoadF(const float* p) { return hn::LoadU(DF(), p); }
HWY_INLINE F SetF(float v) { return hn::Set(DF(), v); }
HWY_INLINE F MulF(F a, F b) { return hn::Mul(a, b); }
HWY_INLINE F FmaF(F a, F b, F c) { return hn::MulAdd(a, b, c); }  // a b + c, one rounding
HWY_INLINE F ZeroF() { return hn::Zero(DF()); }
HWY_INLINE void StoreF(float* p, F v) { hn::StoreU(v, DF(), p); }
constexpr bool kVnni = HWY_TARGET == HWY_AVX3_DL;

// acc + in each int32 lane the sum of its 4 code bytes times its 4 q bytes.
HWY_INLINE I DotVnni(I acc, I codes, I q) {
#if HWY_TARGET == HWY_AVX3_DL
  asm("vpdpbusd %2, %1, %0" : "+v"(acc.raw) : "v"(codes.raw), "v"(q.raw));
#else
  (void)codes;
  (void)q;
#endif
  return acc;
}

// A form's compile-time shape: sub-block, min, and how many pmaddubsw
// results an int16 lane may add (kSub / 4 on AVX3_DL, which needs none).
template <std::int64_t kSub_, bool kMin_, std::int64_t kGroup_>
struct Shape {
  static constexpr std::int64_t kSub = kSub_, kGroup = kGroup_;
  static constexpr bool kMin = kMin_;
};

// Calls body(Shape{}) for a form this target's kernel takes; false if none.
template <class Body>
HWY_INLINE bool WithShape(const detail::Int8Form& form, const Body& body) {
  if (form.sub == 16) {
    body(Shape<16, false, 2>{});  // Q6_K: 2 x 2 x 63 x 127 < 2^15
  } else if (form.largest_code <= 15) {
    form.has_min ? body(Shape<32, true, 8>{}) : body(Shape<32, false, 8>{});  // 8 x 2 x 15 x 127 < 2^15
  } else if (form.largest_code <= 31) {
    form.has_min ? body(Shape<32, true, 4>{}) : body(Shape<32, false, 4>{});  // 4 x 2 x 31 x 127 < 2^15
  } else if (kVnni) {
    body(Shape<32, false, 8>{});  // Q8_0
  } else {
    return false;
  }
  return true;
}

// The two column vectors of a tile: their codes, scales and mins.
struct Columns {
  const std::uint8_t* codes[2];
  const float* scale[2];
  const float* min[2];
};

// The formula for x rows row[r] and the columns of vector v: into y + r ldy
// + v kLanes (both vectors' columns whole and every row its own), otherwise
// into out[r][v] (kLanes floats each; y is null).
template <class S>
HWY_NOINLINE void Tile(const Columns& w, const detail::Int8Rows& x, std::int64_t k, std::int32_t offset,
                       const std::int64_t* row, float* HWY_RESTRICT y, std::int64_t ldy, float* HWY_RESTRICT out) {
  constexpr std::int64_t kWords = S::kSub / 4;  // 4-byte words of a sub-block
  const std::int64_t blocks = k / detail::Int8Rows::kBlock, sixteens = k / 16;
  // The tile's lines of y asked for now, so that its stores at the end
  // find them in the cache: y is larger than the caches (a chunk of logits
  // is 8 MiB), and a tile's 12 stores missing at once cost Gemma 3's
  // output products a sixth of their time on a Zen 4.
  if (y != nullptr) {
    for (std::int64_t r = 0; r < kRows; ++r) {
      hwy::Prefetch(y + r * ldy);
      hwy::Prefetch(y + r * ldy + kLanes);
    }
  }
  F acc[kRows][2];
  for (auto& a : acc) a[0] = a[1] = ZeroF();
  const std::int8_t* q[kRows];
  for (std::int64_t r = 0; r < kRows; ++r) q[r] = x.q + row[r] * k;
  const auto word = [&](std::int64_t r, std::int64_t at) HWY_ATTR {
    std::int32_t bytes;
    std::memcpy(&bytes, q[r] + at, 4);
    return SetI(bytes);
  };
  for (std::int64_t s = 0; s < k / S::kSub; ++s) {
    const std::int64_t block = s * S::kSub / detail::Int8Rows::kBlock;
    I dot[kRows][2];
    for (std::int64_t r = 0; r < kRows; ++r) {
      const std::int32_t* sums = x.sums16 + row[r] * sixteens + s * (S::kSub / 16);
      const std::int32_t sum = S::kSub == 16 ? sums[0] : sums[0] + sums[1];
      dot[r][0] = dot[r][1] = SetI(-offset * sum);
    }
    const std::uint8_t* codes[2] = {w.codes[0] + s * kWords * 64, w.codes[1] + s * kWords * 64};
    if constexpr (kVnni) {
#pragma GCC unroll 8
      for (std::int64_t t = 0; t < kWords; ++t) {
        const I c0 = LoadI(codes[0] + 64 * t), c1 = LoadI(codes[1] + 64 * t);
        for (std::int64_t r = 0; r < kRows; ++r) {
          const I xq = word(r, s * S::kSub + 4 * t);
          dot[r][0] = DotVnni(dot[r][0], c0, xq);
          dot[r][1] = DotVnni(dot[r][1], c1, xq);
        }
      }
    } else {
      for (std::int64_t g = 0; g < kWords; g += S::kGroup) {
        I pairs[kRows][2];
#pragma GCC unroll 8
        for (std::int64_t t = g; t < g + S::kGroup; ++t) {
          const I c0 = LoadI(codes[0] + 64 * t), c1 = LoadI(codes[1] + 64 * t);
          for (std::int64_t r = 0; r < kRows; ++r) {
            const I xq = word(r, s * S::kSub + 4 * t);
            const I p0 = PairProducts(c0, xq), p1 = PairProducts(c1, xq);
            pairs[r][0] = t == g ? p0 : Add16(pairs[r][0], p0);
            pairs[r][1] = t == g ? p1 : Add16(pairs[r][1], p1);
          }
        }
        for (std::int64_t r = 0; r < kRows; ++r) {
          dot[r][0] = AddI(dot[r][0], PairSums(pairs[r][0]));
          dot[r][1] = AddI(dot[r][1], PairSums(pairs[r][1]));
        }
      }
    }
    const F scale[2] = {LoadF(w.scale[0] + 16 * s), LoadF(w.scale[1] + 16 * s)};
    for (std::int64_t r = 0; r < kRows; ++r) {
      const F dx = SetF(x.scale[row[r] * blocks + block]);
      acc[r][0] = FmaF(ToFloat(dot[r][0]), MulF(scale[0], dx), acc[r][0]);
      acc[r][1] = FmaF(ToFloat(dot[r][1]), MulF(scale[1], dx), acc[r][1]);
    }
    if constexpr (S::kMin) {  // kSub is 32: a block of 32 ends here
      const F min[2] = {LoadF(w.min[0] + 16 * block), LoadF(w.min[1] + 16 * block)};
      for (std::int64_t r = 0; r < kRows; ++r) {
        const F sum = SetF(x.scaled_sum[row[r] * blocks + block]);
        acc[r][0] = FmaF(min[0], sum, acc[r][0]);
        acc[r][1] = FmaF(min[1], sum, acc[r][1]);
      }
    }
  }
  for (std::int64_t r = 0; r < kRows; ++r) {
    float* to = y != nullptr ? y + r * ldy : out + 2 * r * kLanes;
    StoreF(to, acc[r][0]);
    StoreF(to + kLanes, acc[r][1]);
  }
}

// This thread's unpacked panels (the layout above), for one panel block.
class Panels {
 public:
  // Unpacks panels [p0, p1) of w, all of one type of form `form`.
  void Unpack(const Layout& w, const detail::Int8Form& form, std::int64_t p0, std::int64_t p1) {
    const std::int64_t k = w.k;
    Reserve(k);
    form_ = form;
    for (std::int64_t p = p0; p < p1; ++p) {
      std::uint8_t* codes = Codes(p - p0);
      float* scale = Scale(p - p0);
      float* min = Min(p - p0);
      for (std::int64_t c = 0; c < kPanelWidth; ++c) {
        const std::int64_t j = p * kPanelWidth + c;
        if (j < w.n) {
          const Layout::Segment& segment = w.SegmentOf(j);
          detail::UnpackInt8Row(segment.type, w.RowBytes(segment, j, scratch_), k, row_codes_.get(), row_scale_.get(),
                                row_min_.get());
        } else {  // past n: zero weights
          std::memset(row_codes_.get(), 0, static_cast<std::size_t>(k));
          std::memset(row_scale_.get(), 0, static_cast<std::size_t>(k / 16) * sizeof(float));
          std::memset(row_min_.get(), 0, static_cast<std::size_t>(k / 32) * sizeof(float));
        }
        for (std::int64_t t = 0; t < k / 4; ++t) std::memcpy(codes + (t * kPanelWidth + c) * 4, &row_codes_[t * 4], 4);
        for (std::int64_t s = 0; s < k / form.sub; ++s) scale[s * kPanelWidth + c] = row_scale_[s];
        if (form.has_min) {
          for (std::int64_t b = 0; b < k / 32; ++b) min[b * kPanelWidth + c] = row_min_[b];
        }
      }
    }
  }
  const detail::Int8Form& form() const { return form_; }
  std::uint8_t* Codes(std::int64_t panel) { return codes_.get() + panel * kPanelWidth * k_; }
  float* Scale(std::int64_t panel) { return scale_.get() + panel * kPanelWidth * (k_ / 16); }
  float* Min(std::int64_t panel) { return min_.get() + panel * kPanelWidth * (k_ / 32); }

 private:
  void Reserve(std::int64_t k) {
    if (k == k_) return;
    k_ = k;
    const auto panels = static_cast<std::size_t>(detail::kBlockPanels * kPanelWidth);
    const auto size = static_cast<std::size_t>(k);
    codes_ = hwy::AllocateAligned<std::uint8_t>(panels * size);
    scale_ = hwy::AllocateAligned<float>(panels * size / 16);
    min_ = hwy::AllocateAligned<float>(panels * size / 32);
    row_codes_ = hwy::AllocateAligned<std::uint8_t>(size);
    row_scale_ = hwy::AllocateAligned<float>(size / 16);
    row_min_ = hwy::AllocateAligned<float>(size / 32);
  }
  std::int64_t k_ = 0;
  detail::Int8Form form_;
  hwy::AlignedFreeUniquePtr<std::uint8_t[]> codes_, row_codes_;
  hwy::AlignedFreeUniquePtr<float[]> scale_, min_, row_scale_, row_min_;
  std::vector<std::byte> scratch_;  // a row of a group, in the GGUF's layout
};

// The form of panels [p0, p1) if all their rows are one type with a form
// this target's kernel takes.
inline std::optional<detail::Int8Form> BlockForm(const Layout& w, std::int64_t p0, std::int64_t p1) {
  const Layout::Segment& first = w.SegmentOf(p0 * kPanelWidth);
  const std::int64_t last_row = std::min(w.n, p1 * kPanelWidth) - 1;
  for (std::int64_t j = p0 * kPanelWidth; j <= last_row;) {
    const Layout::Segment& segment = w.SegmentOf(j);
    if (segment.type != first.type) return std::nullopt;
    j = segment.first_row + segment.rows;
  }
  const std::optional<detail::Int8Form> form = detail::Int8FormOf(first.type);
  if (!form || !WithShape(*form, [](auto) {})) return std::nullopt;
  return form;
}

// Rows [r0, r1) of y against the unpacked panels [p0, p1): tiles of kRows
// rows (the last repeats its last row) and two vectors of columns (on
// AVX-512 two panels; a lone last panel is read twice, stored once).
inline void RunBlock(const detail::MatMulPlan& plan, const detail::Int8Rows& x, Panels& panels, std::int64_t r0,
                     std::int64_t r1, std::int64_t p0, std::int64_t p1) {
  const std::int64_t k = plan.w->k, n = plan.w->n;
  const detail::Int8Form& form = panels.form();
  constexpr std::int64_t kStep = 2 * kLanes / kPanelWidth;  // panels a tile: 2 (AVX-512) or 1
  HWY_ALIGN float out[kRows * 2 * kLanes];
  WithShape(form, [&](auto shape) HWY_ATTR {
    for (std::int64_t p = p0; p < p1; p += kStep) {
      Columns columns;
      std::int64_t first_col[2];  // of each vector
      for (std::int64_t v = 0; v < 2; ++v) {
        const std::int64_t panel = kStep == 2 ? std::min(p + v, p1 - 1) : p;
        const std::int64_t lane = kStep == 2 ? 0 : v * kLanes;
        columns.codes[v] = panels.Codes(panel - p0) + 4 * lane;
        columns.scale[v] = panels.Scale(panel - p0) + lane;
        columns.min[v] = panels.Min(panel - p0) + lane;
        first_col[v] = kStep == 2 && p + v >= p1 ? n : panel * kPanelWidth + lane;  // n: not stored
      }
      // Both vectors whole and next to each other in y.
      const bool whole = first_col[1] == first_col[0] + kLanes && first_col[1] + kLanes <= n;
      for (std::int64_t i = r0; i < r1; i += kRows) {
        std::int64_t row[kRows];
        for (std::int64_t r = 0; r < kRows; ++r) row[r] = std::min(i + r, r1 - 1);
        if (whole && i + kRows <= r1) {
          Tile<decltype(shape)>(columns, x, k, form.offset, row, plan.Y(i, first_col[0]), plan.ldy, out);
          continue;
        }
        Tile<decltype(shape)>(columns, x, k, form.offset, row, nullptr, plan.ldy, out);
        for (std::int64_t r = 0; r < kRows && i + r < r1; ++r) {
          for (std::int64_t v = 0; v < 2; ++v) {
            const std::int64_t cols = std::min(kLanes, n - first_col[v]);
            if (cols > 0) {
              std::memcpy(plan.Y(i + r, first_col[v]), out + (2 * r + v) * kLanes,
                          static_cast<std::size_t>(cols) * sizeof(float));
            }
          }
        }
      }
    }
  });
}

#else
class Panels {
 public:
  void Unpack(const Layout&, const detail::Int8Form&, std::int64_t, std::int64_t) {}
};
inline std::optional<detail::Int8Form> BlockForm(const Layout&, std::int64_t, std::int64_t) { return std::nullopt; }
inline void RunBlock(const detail::MatMulPlan&, const detail::Int8Rows&, Panels&, std::int64_t, std::int64_t,
                     std::int64_t, std::int64_t) {}
#endif  // HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2

}  // namespace posenc::HWY_NAMESPACE::int8_prefill
HWY_AFTER_NAMESPACE();

#endif  // include guard
