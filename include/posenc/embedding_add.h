// The call shape shared by the absolute encodings that are added to token
// embeddings (sinusoidal, learned tables):
//
//   out[b, s, r, :] = input_scale * in[b, s, r, :] + PE(position(b, s))
//
// Embeddings are 4-D views [batch, seq, rows, dim] with rows = 1 in the usual
// case (TensorView::Contiguous(data, dtype, {batch, seq, 1, dim})); a token
// with several rows adds the same encoding to each. `in` and `out` may be the
// same memory (in place) but must not otherwise overlap. input_scale is the
// paper's sqrt(d_model) multiplier on embeddings (1 leaves them as they are).
#pragma once

#include <string_view>

#include "posenc/tensor.h"
#include "posenc/token_positions.h"

namespace posenc {

struct EmbeddingAddCall {
  ConstTensorView in;
  TensorView out;
  TokenPositions positions = TokenPositions::Offset(0);
  double input_scale = 1.0;

  static EmbeddingAddCall InPlace(const TensorView& embeddings, TokenPositions positions = TokenPositions::Offset(0)) {
    return {embeddings, embeddings, std::move(positions), 1.0};
  }
};

// Throws posenc::Error "[op] ..." unless the views are well formed, agree in
// shape and dtype, have `dim` as their last extent, and the positions fit.
void ValidateEmbeddingAddCall(std::string_view op, const EmbeddingAddCall& call, std::int64_t dim);

}  // namespace posenc
