// Internal: log sum_j exp(x[j]), the normalizer of a row of logits (a
// perplexity pass takes one per token, over the whole vocabulary: 49,152
// exponentials a token for SmolLM2).
#pragma once

#include <cstdint>

namespace posenc::detail {

// m + log(sum_j exp(x[j] - m)) over x[0..n), n >= 1, m = max_j x[j] (so that
// no exponential overflows): Highway's Exp on every target's vectors, the
// sum of each block of 16 vectors carried on in double. NaN when x holds a
// NaN or +inf, or is all -inf.
double LogSumExp(const float* x, std::int64_t n);

// The same formula, one element at a time (std::exp, a double sum): what the
// fast one is held to.
double LogSumExpReference(const float* x, std::int64_t n);

}  // namespace posenc::detail
