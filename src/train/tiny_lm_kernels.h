// SIMD kernels of the tiny model's float32 steps (tiny_lm_kernels.cc, a
// Highway module: dispatched to the best target this CPU runs). Each output
// element is computed in one fixed order whatever the caller's thread split,
// so results are bitwise identical for any thread count (they may differ in
// the last bits between SIMD targets, as libm's do between machines).
//
// Rows are n floats at `rows + j * stride` (stride may be negative: a table
// walked backwards); row j's coefficient is w[j].
#pragma once

#include <cstdint>

namespace posenc::tiny_lm {

// a = u/2 (1 + tanh(k (u + 0.044715 u^3))), k = sqrt(2/pi), over n elements.
void GeluForwardKernel(const float* u, float* a, std::int64_t n);
// du = da * d gelu / du (the same tanh), over n elements.
void GeluBackwardKernel(const float* u, const float* da, float* du, std::int64_t n);

// out[j] = x . row j, for j < count.
void DotRows(const float* x, const float* rows, std::int64_t stride, std::int64_t count, std::int64_t n, float* out);
// out += sum over j < count (in order) of w[j] row j.
void AddWeightedRows(const float* w, const float* rows, std::int64_t stride, std::int64_t count, std::int64_t n,
                     float* out);
// row j += w[j] x, for j < count.
void AddScaledToRows(const float* x, const float* w, float* rows, std::int64_t stride, std::int64_t count,
                     std::int64_t n);

}  // namespace posenc::tiny_lm
