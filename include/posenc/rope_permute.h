// Permuting Q/K projection weights between the two RoPE pair layouts.
//
// Meta's Llama checkpoints rotate interleaved pairs (2k, 2k+1); Hugging Face
// permutes the output rows of W_q and W_k per head so that the half-split
// kernel gives the same attention:
//   half-split row h*r/2 + k  <-  interleaved row 2k + h   (h in {0,1}, k < r/2)
// Rows past rotary_dim in each head are left in place. Applying
// kInterleavedToHalfSplit then kHalfSplitToInterleaved restores the weights.
#pragma once

#include <cstddef>
#include <cstdint>

namespace posenc {

enum class PermuteDirection { kInterleavedToHalfSplit, kHalfSplitToInterleaved };

// weight: [heads * head_dim rows, row_bytes each], row-major, any element type.
void PermuteQkRows(void* weight, std::size_t row_bytes, std::int64_t heads, std::int64_t head_dim,
                   std::int64_t rotary_dim, PermuteDirection direction);

}  // namespace posenc
