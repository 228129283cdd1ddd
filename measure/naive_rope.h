// A naive RoPE peer, written the way Hugging Face transformers' eager
// PyTorch code computes it, to measure posenc's kernel against:
//
//   inv_freq [P] f32;  freqs [seq, P] = position * inv_freq (f32)
//   emb = cat(freqs, freqs)           (half-split; interleaved repeats each)
//   cos, sin [seq, rotary_dim] = cos(emb) * a, sin(emb) * a     (a: attention factor)
//   x = x * cos + rotate_half(x) * sin, rotate_half(x) a temporary tensor
//
// A fair, straightforward implementation: each step is one pass over the
// whole tensor split across posenc's thread pool, as PyTorch's CPU
// elementwise ops are; the final multiply-add is fused into one pass and the
// temporaries are reused between calls (no page faults timed). It is not
// deliberately slow; it just moves more bytes than a fused kernel does.
// bf16/f16 tensors keep their dtype (the temporary too); elements are
// converted to float32 on load and rounded once on store, as PyTorch's CPU
// kernels do for bf16 and f16.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "hwy/aligned_allocator.h"
#include "posenc/rope_frequencies.h"
#include "posenc/rope_spec.h"
#include "posenc/tensor.h"

namespace posenc::bench {

class NaiveRope {
 public:
  // cos/sin tables for positions [start, start + seq): Hugging Face builds
  // them once per forward pass and shares them across layers.
  void BuildTables(const RopeSpec& spec, const RopeFrequencies& frequencies, std::int64_t start, std::int64_t seq);
  // Rotates each tensor in place with the tables built last ([batch, seq,
  // heads, head_dim], seq as given to BuildTables). Forward direction only.
  void Apply(const RopeSpec& spec, std::span<const TensorView> tensors);

  // Both steps, as one call that is comparable with posenc::ApplyRope.
  void operator()(const RopeSpec& spec, const RopeFrequencies& frequencies, std::int64_t start,
                  std::span<const TensorView> tensors);

 private:
  template <class Storage>
  void ApplyTyped(const RopeSpec& spec, void* data, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                  std::int64_t head_dim);

  std::int64_t seq_ = 0;
  std::int64_t width_ = 0;        // rotary_dim
  std::vector<float> cos_, sin_;  // [seq, rotary_dim]
  // rotate_half(x) in x's dtype, the largest tensor's worth.
  hwy::AlignedFreeUniquePtr<std::uint8_t[]> rotated_;
  std::size_t rotated_bytes_ = 0;
};

}  // namespace posenc::bench
