// The Tiny-LLM course's RoPE class (week 1, "Positional Encodings and RoPE"),
// same constructor, same three offset forms, over posenc's kernel (rope.h),
// so that code written along the course can swap posenc in:
//
//   RoPE rope(dims, seq_len, base = 10000, traditional = false);
//   rope(x, out);                     offset None: token s at position s
//   rope(x, out, {start, stop});      slice(start, stop) of length S, every row
//   rope(x, out, slices);             one slice per batch row (N of them)
//
// x and out are [N, S, H, D] with D = dims, one dtype (f32, f16, bf16), and
// may be the same memory. traditional = true pairs interleaved dimensions
// [x0, x1], [x2, x3], ...; false pairs the halves (x_k, x_{k + dims/2}).
// Frequencies are base^(-2k/dims), as the course's.
//
// The course precomputes cos and sin of seq_len positions in float32 (angles
// rounded to float32: off by up to 0.03 rad at position 10^6). Here
// only the frequencies are precomputed; each call forms its angles in double
// (rope.h), so seq_len costs no memory and far positions keep float32
// accuracy. seq_len still bounds the positions, as the course's table does.
//
// Where the course asserts, this throws posenc::Error:
//   "[rope] offset = slice(0, 5): must have length S = 4"
#pragma once

#include <cstdint>
#include <span>

#include "posenc/rope_frequencies.h"
#include "posenc/rope_spec.h"
#include "posenc/tensor.h"
#include "posenc/token_positions.h"

namespace posenc {

// Python's slice(start, stop): positions start, start + 1, ..., stop - 1.
struct PositionSlice {
  std::int64_t start = 0;
  std::int64_t stop = 0;
};

class RoPE {
 public:
  // Throws posenc::Error for dims not even and > 0, seq_len < 1, or base not
  // a finite number > 1.
  RoPE(std::int64_t dims, std::int64_t seq_len, double base = 10000.0, bool traditional = false);

  void operator()(const ConstTensorView& x, const TensorView& out) const;
  void operator()(const ConstTensorView& x, const TensorView& out, PositionSlice offset) const;
  void operator()(const ConstTensorView& x, const TensorView& out, std::span<const PositionSlice> offset) const;

  std::int64_t dims() const { return spec_.head_dim; }
  std::int64_t seq_len() const { return seq_len_; }
  // The kernel's description of this RoPE (theta = base, head_dim = dims).
  const RopeSpec& spec() const { return spec_; }

 private:
  // x.shape[3] == dims: the course's RoPE rotates whole heads.
  void RequireDims(const ConstTensorView& x) const;
  // The start of `slice` (parameter `name`) once it fits S and seq_len.
  std::int64_t StartOf(const PositionSlice& slice, const char* name, std::int64_t seq) const;
  void Apply(const ConstTensorView& x, const TensorView& out, TokenPositions positions) const;

  RopeSpec spec_;
  RopeFrequencies frequencies_;
  std::int64_t seq_len_;
};

}  // namespace posenc
