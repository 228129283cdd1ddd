// The naive peer for attention benchmarks: what an eager framework does —
// materialize each head's score row, mask, softmax, multiply by V — with
// plain loops in float32 (the compiler vectorizes the inner products).
#pragma once

#include "posenc/attention.h"

namespace posenc::bench {

// Causal attention with RoPE (q and k rotated first through posenc's own
// kernel, which is not what is being compared). f32 only.
void NaiveCausalAttention(const AttentionInputs& inputs, const RopeEncoding& rope);

}  // namespace posenc::bench
