// Internal: what the dispatched embedding-add kernel (embedding_add-inl.h)
// needs, prepared once per call by AddSinusoidal or AddLearnedTable.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "posenc/embedding_add.h"
#include "posenc/sinusoidal.h"

namespace posenc::detail {

// Sinusoid rows are made exactly (sin/cos of the reduced angle) at anchor
// positions, multiples of kSinusoidAnchor, and by kSinusoidAnchor - 1 or fewer
// float64 rotations by w_k from there: p = a + r gets exact(a) rotated r
// times, always in that order, so the result does not depend on how work is
// split (bitwise identical for any thread count). Each rotation adds ~1 ulp
// of float64, far below the float32 rounding that follows.
inline constexpr std::int64_t kSinusoidAnchor = 16;

struct EmbeddingAddPlan {
  const EmbeddingAddCall* call = nullptr;
  std::int64_t dim = 0;
  float input_scale = 1.0f;
  // The encoding source: a learned table when table_row is set, else the
  // sinusoid below. table_row returns the position's dim floats, either a
  // pointer into the table or `scratch` (dim floats) filled in.
  std::function<const float*(std::int64_t position, float* scratch)> table_row;
  SinusoidalOrder order = SinusoidalOrder::kInterleaved;
  std::int64_t pairs = 0;
  // w_k zero-padded to a multiple of the widest vector (no tail in the
  // angle loop), and cos(w_k), sin(w_k): one position's rotation.
  std::vector<double> inv_freq_padded;
  std::vector<double> step_cos_padded;
  std::vector<double> step_sin_padded;
  // When every row shares its positions (TokenPositions::Offset), work items
  // are sequence positions and each encoding is made once for the batch;
  // otherwise work items are tokens b * seq + s.
  bool shared_positions = false;
};

// Processes work items [begin, end).
void EmbeddingAddRange(const EmbeddingAddPlan& plan, std::int64_t begin, std::int64_t end);

}  // namespace posenc::detail
