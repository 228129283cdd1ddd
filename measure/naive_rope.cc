#include "naive_rope.h"

#include <bit>
#include <cmath>

#include "posenc/dtype.h"
#include "posenc/error.h"
#include "posenc/parallel.h"

namespace posenc::bench {
namespace {

constexpr const char* kOp = "naive rope";

// bf16 <-> f32 written inline so the compiler vectorizes them (PyTorch's
// conversions are vectorized too); round to nearest even, NaN stays NaN.
inline float WidenBf16(std::uint16_t bits) { return std::bit_cast<float>(std::uint32_t{bits} << 16); }
inline std::uint16_t NarrowBf16(float value) {
  const auto bits = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t rounded = (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
  const bool nan = (bits & 0x7FFFFFFFu) > 0x7F800000u;
  return static_cast<std::uint16_t>(nan ? (bits >> 16) | 0x40u : rounded);
}

// Element access by storage type: float32 as is, bf16 and f16 widened to
// float32 on load and rounded once on store (what a PyTorch op on a bf16
// tensor does inside its kernel).
struct F32Storage {
  using T = float;
  static float Load(T v) { return v; }
  static T Store(float v) { return v; }
  static T Neg(T v) { return -v; }
};
struct Bf16Storage {
  using T = std::uint16_t;
  static float Load(T v) { return WidenBf16(v); }
  static T Store(float v) { return NarrowBf16(v); }
  static T Neg(T v) { return static_cast<T>(v ^ 0x8000u); }  // exact, as torch.neg
};
struct F16Storage {  // the compiler's conversions: F16C instructions in the x86-64-v3 clone
  using T = std::uint16_t;
#if defined(__FLT16_MANT_DIG__)  // the compiler has _Float16 (GCC 12 on x86-64)
  static float Load(T v) { return static_cast<float>(std::bit_cast<_Float16>(v)); }
  static T Store(float v) { return std::bit_cast<T>(static_cast<_Float16>(v)); }
#else  // e.g. clang 14 on x86-64: the library's conversions by bits
  static float Load(T v) { return F16ToF32(v); }
  static T Store(float v) { return F32ToF16(v); }
#endif
  static T Neg(T v) { return static_cast<T>(v ^ 0x8000u); }
};

// The two passes over rows [begin, end) of head_dim elements. Plain loops
// that the compiler vectorizes; cloned for x86-64-v3 (AVX2, F16C) below, as
// PyTorch's CPU kernels are compiled per instruction set and dispatched at
// run time.
template <class Storage>
[[gnu::always_inline]] inline void RotateHalfRows(const typename Storage::T* x, typename Storage::T* rot,
                                                  std::int64_t begin, std::int64_t end, std::int64_t head_dim,
                                                  std::int64_t width, bool interleaved) {
  using T = typename Storage::T;
  const std::int64_t half = width / 2;
  for (std::int64_t r = begin; r < end; ++r) {
    const T* __restrict in = x + r * head_dim;
    T* __restrict out = rot + r * width;
    if (interleaved) {  // rotate_every_two(x) = stack(-x_odd, x_even)
      for (std::int64_t k = 0; k < half; ++k) {
        out[2 * k] = Storage::Neg(in[2 * k + 1]);
        out[2 * k + 1] = in[2 * k];
      }
    } else {  // rotate_half(x) = cat(-x2, x1)
      for (std::int64_t i = 0; i < half; ++i) out[i] = Storage::Neg(in[half + i]);
      for (std::int64_t i = 0; i < half; ++i) out[half + i] = in[i];
    }
  }
}

// x = x * cos + rot * sin over the rotary dims, in float32, rounded once.
template <class Storage>
[[gnu::always_inline]] inline void CombineRows(typename Storage::T* x, const typename Storage::T* rot, const float* cos,
                                               const float* sin, std::int64_t begin, std::int64_t end,
                                               std::int64_t heads, std::int64_t seq, std::int64_t head_dim,
                                               std::int64_t width) {
  using T = typename Storage::T;
  for (std::int64_t r = begin; r < end; ++r) {
    const std::int64_t s = (r / heads) % seq;
    T* __restrict y = x + r * head_dim;
    const T* __restrict ro = rot + r * width;
    const float* __restrict c = cos + s * width;
    const float* __restrict sn = sin + s * width;
    for (std::int64_t i = 0; i < width; ++i) {
      y[i] = Storage::Store(Storage::Load(y[i]) * c[i] + Storage::Load(ro[i]) * sn[i]);
    }
  }
}

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define POSENC_NAIVE_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define POSENC_NAIVE_CLONES
#endif

#define POSENC_NAIVE_ROWS(Storage)                                                                                    \
  POSENC_NAIVE_CLONES void RotateHalfRows##Storage(const Storage::T* x, Storage::T* rot, std::int64_t begin,          \
                                                   std::int64_t end, std::int64_t head_dim, std::int64_t width,       \
                                                   bool interleaved) {                                                \
    RotateHalfRows<Storage>(x, rot, begin, end, head_dim, width, interleaved);                                        \
  }                                                                                                                   \
  POSENC_NAIVE_CLONES void CombineRows##Storage(                                                                      \
      Storage::T* x, const Storage::T* rot, const float* cos, const float* sin, std::int64_t begin, std::int64_t end, \
      std::int64_t heads, std::int64_t seq, std::int64_t head_dim, std::int64_t width) {                              \
    CombineRows<Storage>(x, rot, cos, sin, begin, end, heads, seq, head_dim, width);                                  \
  }
POSENC_NAIVE_ROWS(F32Storage)
POSENC_NAIVE_ROWS(Bf16Storage)
POSENC_NAIVE_ROWS(F16Storage)
#undef POSENC_NAIVE_ROWS

// The dispatched entry points of each storage type.
template <class Storage>
struct Rows;
template <>
struct Rows<F32Storage> {
  static constexpr auto Rotate = &RotateHalfRowsF32Storage;
  static constexpr auto Combine = &CombineRowsF32Storage;
};
template <>
struct Rows<Bf16Storage> {
  static constexpr auto Rotate = &RotateHalfRowsBf16Storage;
  static constexpr auto Combine = &CombineRowsBf16Storage;
};
template <>
struct Rows<F16Storage> {
  static constexpr auto Rotate = &RotateHalfRowsF16Storage;
  static constexpr auto Combine = &CombineRowsF16Storage;
};

bool IsContiguous(const TensorView& t) { return t.strides == TensorView::Contiguous(t.data, t.dtype, t.shape).strides; }

// rows of head_dim elements, split across the pool (at least 64 rows a slice).
template <class Body>
void ForRows(std::int64_t rows, const Body& body) {
  ParallelFor(rows, 64, [&](std::int64_t begin, std::int64_t end) { body(begin, end); });
}

}  // namespace

void NaiveRope::BuildTables(const RopeSpec& spec, const RopeFrequencies& frequencies, std::int64_t start,
                            std::int64_t seq) {
  const std::int64_t width = spec.RotaryDim();
  const std::int64_t pairs = width / 2;
  const bool interleaved = spec.layout == RopeLayout::kInterleaved;
  seq_ = seq;
  width_ = width;
  cos_.resize(static_cast<std::size_t>(seq * width));
  sin_.resize(static_cast<std::size_t>(seq * width));
  // inv_freq is a float32 buffer in the model, positions a float32 arange.
  std::vector<float> inv_freq(frequencies.inv_freq.begin(), frequencies.inv_freq.end());
  const auto scale = static_cast<float>(frequencies.attention_factor);
  ParallelFor(seq, 16, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t s = begin; s < end; ++s) {
      const auto position = static_cast<float>(start + s);
      float* c = cos_.data() + s * width;
      float* sn = sin_.data() + s * width;
      for (std::int64_t k = 0; k < pairs; ++k) {
        const float angle = position * inv_freq[k];
        const float cv = std::cos(angle) * scale, sv = std::sin(angle) * scale;
        // emb = cat(freqs, freqs) for half-split, repeat_interleave(freqs, 2) otherwise.
        const std::int64_t i = interleaved ? 2 * k : k;
        const std::int64_t j = interleaved ? 2 * k + 1 : k + pairs;
        c[i] = c[j] = cv;
        sn[i] = sn[j] = sv;
      }
    }
  });
}

template <class Storage>
void NaiveRope::ApplyTyped(const RopeSpec& spec, void* data, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                           std::int64_t head_dim) {
  using T = typename Storage::T;
  T* x = static_cast<T*>(data);
  const std::int64_t width = width_;
  const std::int64_t rows = batch * seq * heads;
  // The temporary has the tensor's dtype, as rotate_half's result would.
  const std::int64_t scratch_bytes = rows * width * static_cast<std::int64_t>(sizeof(T));
  // Grown, never shrunk: shrinking to k's size and growing back for the next
  // q would fault fresh pages in on every call.
  if (rotated_bytes_ < static_cast<std::size_t>(scratch_bytes)) {
    rotated_ = hwy::AllocateAligned<std::uint8_t>(static_cast<std::size_t>(scratch_bytes));
    rotated_bytes_ = static_cast<std::size_t>(scratch_bytes);
  }
  T* rot = reinterpret_cast<T*>(rotated_.get());
  const bool interleaved = spec.layout == RopeLayout::kInterleaved;

  // Pass 1: rot = rotate_half(x); pass 2: x = x * cos + rot * sin.
  ForRows(rows, [&](std::int64_t begin, std::int64_t end) {
    Rows<Storage>::Rotate(x, rot, begin, end, head_dim, width, interleaved);
  });
  ForRows(rows, [&](std::int64_t begin, std::int64_t end) {
    Rows<Storage>::Combine(x, rot, cos_.data(), sin_.data(), begin, end, heads, seq, head_dim, width);
  });
}

void NaiveRope::Apply(const RopeSpec& spec, std::span<const TensorView> tensors) {
  for (const TensorView& t : tensors) {
    Require(t.head_dim() == spec.head_dim, kOp, "head_dim", t.head_dim(), "must equal the spec's head_dim");
    Require(t.seq() == seq_, kOp, "seq", t.seq(), "must equal the tables' length (BuildTables)");
    Require(IsContiguous(t), kOp, "strides", "strided", "the naive peer takes contiguous tensors");
    switch (t.dtype) {
      case DType::kF32: ApplyTyped<F32Storage>(spec, t.data, t.batch(), t.seq(), t.heads(), t.head_dim()); break;
      case DType::kBF16: ApplyTyped<Bf16Storage>(spec, t.data, t.batch(), t.seq(), t.heads(), t.head_dim()); break;
      case DType::kF16: ApplyTyped<F16Storage>(spec, t.data, t.batch(), t.seq(), t.heads(), t.head_dim()); break;
    }
  }
}

void NaiveRope::operator()(const RopeSpec& spec, const RopeFrequencies& frequencies, std::int64_t start,
                           std::span<const TensorView> tensors) {
  Require(!tensors.empty(), kOp, "tensors", 0, "need at least one tensor");
  BuildTables(spec, frequencies, start, tensors.front().seq());
  Apply(spec, tensors);
}

}  // namespace posenc::bench
