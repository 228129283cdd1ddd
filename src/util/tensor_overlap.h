// Whether strided tensor views share memory, for the kernels that write a
// view while reading others (RoPE, the embedding additions). Comparing start
// addresses misses two windows of one tensor (x[:, 0:4] and x[:, 2:6]) and a
// written view whose elements share memory (an expanded tensor's stride 0),
// where each shared element would be written more than once; comparing byte
// ranges would refuse the q and k slices of one fused qkv tensor, which
// interleave without sharing an element. So the question is answered
// exactly: is there a byte that two elements hold? That is a bounded linear
// equation in the indices (the problem NumPy's shares_memory solves), here
// by a depth-first search over the axes, largest stride first, with a work
// bound past which the answer is kUnknown (callers refuse it).
#pragma once

#include <string>
#include <string_view>

#include "posenc/tensor.h"

namespace posenc {

enum class Overlap { kNone, kShared, kUnknown };

// Whether an element of `a` and an element of `b` hold a common byte.
Overlap SharedMemory(const ConstTensorView& a, const ConstTensorView& b);

// Whether two different elements of `view` hold a common byte.
Overlap InternalOverlap(const ConstTensorView& view);

// Throws "[op] out_name = ...: rule" unless writing `out` from `in` writes
// each element once: `out` has no two elements in one place, and it is
// either `in` itself (in place) or memory `in` does not touch.
void RequireSeparateOutput(std::string_view op, std::string_view out_name, const ConstTensorView& in,
                           const ConstTensorView& out);

}  // namespace posenc
