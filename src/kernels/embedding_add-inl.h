// Per-target kernel adding absolute encodings to embeddings (compiled once per
// SIMD target via foreach_target).
//
// Per work item: the encoding row is made once, in float32 (sinusoid: angles
// and their sin/cos in double with the angle reduced modulo 2*pi, rounded to
// float32 once; learned table: the table's row), then every embedding row of
// every token at that position gets y = scale * x + pe with one float32 FMA
// per element and one rounding to the output dtype.
#if defined(POSENC_EMBEDDING_ADD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef POSENC_EMBEDDING_ADD_INL_H_
#undef POSENC_EMBEDDING_ADD_INL_H_
#else
#define POSENC_EMBEDDING_ADD_INL_H_
#endif

#include <cstring>

#include "kernels/angle_reduction-inl.h"
#include "kernels/embedding_add_kernel.h"
#include "hwy/aligned_allocator.h"
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "kernels/simd_io-inl.h"

HWY_BEFORE_NAMESPACE();
namespace posenc::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// sin_d[k] = sin(p w_k), cos_d[k] = cos(p w_k) in double, k < padded.
inline void ExactSinusoid(const detail::EmbeddingAddPlan& plan, double position, double* HWY_RESTRICT sin_d,
                          double* HWY_RESTRICT cos_d) {
  const hn::ScalableTag<double> dd;
  const auto pos = hn::Set(dd, position);
  const size_t padded = plan.inv_freq_padded.size();
  for (size_t k = 0; k < padded; k += hn::Lanes(dd)) {
    const auto angle = hn::Mul(pos, hn::LoadU(dd, plan.inv_freq_padded.data() + k));
    hn::Vec<decltype(dd)> turns;
    const auto reduced = ReduceAngle(dd, angle, kFullTurn, turns);  // Sin/Cos want it near 0
    hn::StoreU(hn::Sin(dd, reduced), dd, sin_d + k);
    hn::StoreU(hn::Cos(dd, reduced), dd, cos_d + k);
  }
}

// (sin, cos)(p w_k) -> (sin, cos)((p + 1) w_k): one rotation by w_k.
inline void RotateSinusoid(const detail::EmbeddingAddPlan& plan, double* HWY_RESTRICT sin_d,
                           double* HWY_RESTRICT cos_d) {
  const hn::ScalableTag<double> dd;
  const size_t padded = plan.inv_freq_padded.size();
  for (size_t k = 0; k < padded; k += hn::Lanes(dd)) {
    const auto s = hn::LoadU(dd, sin_d + k), c = hn::LoadU(dd, cos_d + k);
    const auto step_s = hn::LoadU(dd, plan.step_sin_padded.data() + k);
    const auto step_c = hn::LoadU(dd, plan.step_cos_padded.data() + k);
    hn::StoreU(hn::MulAdd(s, step_c, hn::Mul(c, step_s)), dd, sin_d + k);
    hn::StoreU(hn::NegMulAdd(s, step_s, hn::Mul(c, step_c)), dd, cos_d + k);
  }
}

// The double tables for `position`, advanced from `state_position` (the
// position they hold now, -1 for none) when that is in the same anchor block
// and not past it; else from the block's anchor. See kSinusoidAnchor.
inline void AdvanceSinusoid(const detail::EmbeddingAddPlan& plan, int64_t position, int64_t& state_position,
                            double* HWY_RESTRICT sin_d, double* HWY_RESTRICT cos_d) {
  const int64_t anchor = position - position % detail::kSinusoidAnchor;
  int64_t at = state_position;
  if (at < anchor || at > position) {
    ExactSinusoid(plan, static_cast<double>(anchor), sin_d, cos_d);
    at = anchor;
  }
  for (; at < position; ++at) RotateSinusoid(plan, sin_d, cos_d);
  state_position = position;
}

// float32 tables from the double ones.
inline void DemoteSinusoid(size_t padded, const double* HWY_RESTRICT sin_d, const double* HWY_RESTRICT cos_d,
                           float* HWY_RESTRICT sin_table, float* HWY_RESTRICT cos_table) {
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  for (size_t k = 0; k < padded; k += hn::Lanes(dd)) {
    hn::StoreU(hn::DemoteTo(df, hn::LoadU(dd, sin_d + k)), df, sin_table + k);
    hn::StoreU(hn::DemoteTo(df, hn::LoadU(dd, cos_d + k)), df, cos_table + k);
  }
}

// The encoding row pe[0, dim) of `position` from the sin/cos tables.
inline void ArrangeSinusoid(const detail::EmbeddingAddPlan& plan, const float* HWY_RESTRICT sin_table,
                            const float* HWY_RESTRICT cos_table, float* HWY_RESTRICT pe) {
  const size_t pairs = static_cast<size_t>(plan.pairs);
  if (plan.order == SinusoidalOrder::kConcat) {
    std::memcpy(pe, sin_table, pairs * sizeof(float));
    std::memcpy(pe + pairs, cos_table, pairs * sizeof(float));
  } else {
    // Tables are padded to whole vectors and pe has room for 2 * padded.
    const hn::ScalableTag<float> df;
    for (size_t k = 0; k < pairs; k += hn::Lanes(df)) {
      hn::StoreInterleaved2(hn::LoadU(df, sin_table + k), hn::LoadU(df, cos_table + k), df, pe + 2 * k);
    }
  }
  if (plan.dim % 2 != 0) pe[plan.dim - 1] = 0.0f;  // odd dim: the zero pad
}

// y = scale * x + pe over dim elements.
template <typename T>
HWY_INLINE void AddRow(const T* HWY_RESTRICT x, T* y, const float* HWY_RESTRICT pe, size_t dim, float scale) {
  const hn::ScalableTag<float> df;
  const size_t lanes = hn::Lanes(df);
  const auto s = hn::Set(df, scale);
  size_t i = 0;
  for (; i + lanes <= dim; i += lanes) {
    StoreF32(df, hn::MulAdd(LoadF32(df, x + i), s, hn::LoadU(df, pe + i)), y + i);
  }
  if (i < dim) {
    const size_t count = dim - i;
    const auto sum = hn::MulAdd(LoadPartialF32(df, x + i, count), s, LoadPartialF32(df, pe + i, count));
    StorePartialF32(df, sum, y + i, count);
  }
}

template <typename T>
void AddRange(const detail::EmbeddingAddPlan& plan, int64_t begin, int64_t end) {
  const EmbeddingAddCall& call = *plan.call;
  const int64_t batch = call.in.batch(), seq = call.in.seq(), rows = call.in.heads();
  const size_t dim = static_cast<size_t>(plan.dim);
  const size_t padded = plan.inv_freq_padded.size();
  // pe row (padded for the interleave's whole vectors), sin/cos tables.
  const size_t pe_size = std::max(dim, 2 * padded) + 2 * hn::Lanes(hn::ScalableTag<float>());
  auto buffers = hwy::AllocateAligned<float>(pe_size + 2 * padded + 2);
  float* pe_buffer = buffers.get();
  float* sin_table = pe_buffer + pe_size;
  float* cos_table = sin_table + padded;
  auto double_buffers = hwy::AllocateAligned<double>(2 * padded + 2);
  double* sin_d = double_buffers.get();
  double* cos_d = sin_d + padded;
  int64_t state_position = -1;  // the position sin_d/cos_d hold
  const auto* in = static_cast<const T*>(call.in.data);
  auto* out = static_cast<T*>(call.out.data);

  for (int64_t item = begin; item < end; ++item) {
    // Shared positions: item is s and covers every row b; else item = b * seq + s.
    const int64_t s = plan.shared_positions ? item : item % seq;
    const int64_t b_first = plan.shared_positions ? 0 : item / seq;
    const int64_t b_end = plan.shared_positions ? batch : b_first + 1;
    const int64_t position = call.positions.At(b_first, s, seq);
    const float* pe = pe_buffer;
    if (plan.table_row) {
      pe = plan.table_row(position, pe_buffer);
    } else {
      AdvanceSinusoid(plan, position, state_position, sin_d, cos_d);
      DemoteSinusoid(padded, sin_d, cos_d, sin_table, cos_table);
      ArrangeSinusoid(plan, sin_table, cos_table, pe_buffer);
    }
    for (int64_t b = b_first; b < b_end; ++b) {
      for (int64_t r = 0; r < rows; ++r) {
        AddRow(in + call.in.Offset(b, s, r), out + call.out.Offset(b, s, r), pe, dim, plan.input_scale);
      }
    }
  }
}

inline void EmbeddingAddRangeImpl(const detail::EmbeddingAddPlan& plan, int64_t begin, int64_t end) {
  switch (plan.call->in.dtype) {
    case DType::kF32: return AddRange<float>(plan, begin, end);
    case DType::kF16: return AddRange<hwy::float16_t>(plan, begin, end);
    case DType::kBF16: return AddRange<hwy::bfloat16_t>(plan, begin, end);
  }
}

}  // namespace posenc::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // POSENC_EMBEDDING_ADD_INL_H_
