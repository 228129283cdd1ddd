// The losses of a perplexity pass straight from the last hidden states: the
// output product a chunk of columns at a time, each chunk's log-sum-exp terms
// kept per row, so that the [rows, vocab] logits never exist at once
// (Gemma 3: 1 GiB for 1,024 rows of its 262,144-token vocabulary).
#pragma once

#include <cstdint>
#include <span>

#include "posenc/matmul.h"

namespace posenc::model {

// For each row r of hidden [rows, d] (after the output norm) with a target:
// nll[r] = -log softmax(hidden[r] W^T)[targets[r]], W = output [vocab, d],
// bitwise NegativeLogLikelihood of MatMul's logits (FewRows::kPanels) for
// any thread count. targets[r] < 0: no target (nll[r] untouched).
// positions[r] names row r in an error: a logit NaN or of magnitude >=
// detail::kLogitLimit throws posenc::Error for op `op` naming
// "logits[position P, token J]", the first such row's first such token of
// the first chunk that holds one. Sizes that do not match, or a target past
// the vocabulary, throw posenc::Error naming them before anything is done.
void OutputNegativeLogLikelihood(std::span<const float> hidden, const PackedWeights& output, DotActivations activations,
                                 std::span<const std::int32_t> targets, std::span<const std::int64_t> positions,
                                 const char* op, std::span<double> nll);

}  // namespace posenc::model
