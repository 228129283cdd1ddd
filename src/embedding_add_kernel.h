// Internal: what the dispatched embedding-add kernel (embedding_add-inl.h)
// needs, prepared once per call by AddSinusoidal or AddLearnedTable.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "posenc/embedding_add.h"
#include "posenc/sinusoidal.h"

namespace posenc::detail {

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
  // angle loop).
  std::vector<double> inv_freq_padded;
  // When every row shares its positions (TokenPositions::Offset), work items
  // are sequence positions and each encoding is made once for the batch;
  // otherwise work items are tokens b * seq + s.
  bool shared_positions = false;
};

// Processes work items [begin, end).
void EmbeddingAddRange(const EmbeddingAddPlan& plan, std::int64_t begin, std::int64_t end);

}  // namespace posenc::detail
