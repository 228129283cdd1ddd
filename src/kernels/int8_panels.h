// Internal: quantized weight rows as the integer prefill kernel
// (int8_prefill-inl.h) reads them, and the product that kernel computes,
// written out plainly (the reference it is tested against).
//
// Every quantized type with an integer decode kernel (Q4_0, Q4_1, Q5_0,
// Q5_1, Q8_0, Q4_K, Q5_K, Q6_K) is, for each run of `sub` weights (its
// sub-block), one scale, unsigned codes c and an integer offset, plus (Q4_1,
// Q5_1, Q4_K, Q5_K) a min for each run of 32:
//   w = scale (c - offset) + min
// which is bitwise the float GgufFile::Dequantize gives (the same float
// operations: Q4_K's d sc c - dmin m is scale c + (-(dmin m))).
// With x in blocks of 32 as Int8Rows rounds it (x ~ d_x q), a sub-block's
// share of y[i, j] = sum w x is
//   I = sum (c - offset) q            exact in int32
//   y += float(I) (scale d_x)         one float32 FMA, scale d_x rounded once
//   y += min (d_x sum q)              (with a min) one FMA per block of 32
// in sub-block order, y starting at 0. Every operation is exact or rounded
// once in a fixed order, so the result is bitwise the same on every SIMD
// target and for any thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "kernels/matmul_kernel.h"
#include "posenc/gguf.h"

namespace posenc::detail {

struct Int8Form {
  std::int64_t sub = 32;          // weights per scale: 32, or 16 (Q6_K)
  std::int32_t offset = 0;        // Q4_0 8, Q5_0 16, Q6_K 32, Q8_0 128 (its codes are q + 128); 0 with a min
  bool has_min = false;           // Q4_1, Q5_1, Q4_K, Q5_K
  std::int32_t largest_code = 0;  // 15, 31, 63 or 255: what byte products the kernel may sum in int16
};

// The form of `type`; none for a type without an integer kernel.
std::optional<Int8Form> Int8FormOf(GgmlType type);

// One weight row of `type` (k values, whole blocks) unpacked:
//   codes [k]           c, unsigned bytes
//   scale [k / sub]     per sub-block
//   min   [k / 32]      per block of 32 (written only with has_min)
void UnpackInt8Row(GgmlType type, const std::byte* row, std::int64_t k, std::uint8_t* codes, float* scale, float* min);

// The product above for every i < x.m and W row j < w.n, each weight row
// unpacked by UnpackInt8Row: y [m, n]. W's segments must all have a form;
// x.sums16 is not read (the reference sums q itself).
void Int8ProductReference(const PackedWeights::Layout& w, const Int8Rows& x, float* y);

}  // namespace posenc::detail
