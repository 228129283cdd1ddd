// Internal: log sum_j exp(x[j]), the normalizer of a row of logits (a
// perplexity pass takes one per token, over the whole vocabulary: 49,152
// exponentials a token for SmolLM2).
#pragma once

#include <cstdint>
#include <span>

namespace posenc::detail {

// A row is taken in chunks of kLogSumExpChunk values (the last one shorter),
// so that its logits need not exist at once: a perplexity pass reduces
// Gemma 3's 262,144 logits a row a chunk at a time as the output product
// makes them (MatMulColumnChunks), bitwise LogSumExp of the whole row.
constexpr std::int64_t kLogSumExpChunk = 1024;

// Of a chunk x[0..n), 1 <= n <= kLogSumExpChunk: its largest value m and
// s = sum_j exp(x[j] - m) (Highway's Exp on every target's vectors, the sum
// of each block of 16 vectors carried on in double). m is NaN when x holds a
// NaN or +inf; m = -inf and s = 0 when every x[j] is -inf.
struct ExpSum {
  float max;
  double sum;
};
ExpSum ChunkExpSum(const float* x, std::int64_t n);

// log sum_j exp(x[j]) of the chunks' row: M + log(sum_c s_c exp(m_c - M)),
// M = max_c m_c, summed in chunk order in double. NaN when a chunk's m is
// NaN or every m_c is -inf.
double CombineExpSums(std::span<const ExpSum> chunks);

// CombineExpSums over the chunks of x[0..n), n >= 1: log sum_j exp(x[j]),
// no exponential overflowing. NaN when x holds a NaN or +inf, or is all -inf.
double LogSumExp(const float* x, std::int64_t n);

// The same formula over the whole row at once, one element at a time
// (std::exp, a double sum): what the fast one is held to.
double LogSumExpReference(const float* x, std::int64_t n);

}  // namespace posenc::detail
