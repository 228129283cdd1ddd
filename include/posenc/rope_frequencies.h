// The frequency table of a rotary encoding: what each scaling method changes.
// The rotation kernels only ever see this table, never the method.
#pragma once

#include <cstdint>
#include <vector>

#include "posenc/rope_spec.h"

namespace posenc {

struct RopeFrequencies {
  // [rotary_dim / 2]: angle of pair k at position p is p * inv_freq[k].
  // Computed in double precision.
  std::vector<double> inv_freq;
  // Multiplies the rotated q and k (YaRN, LongRoPE); 1 otherwise.
  double attention_factor = 1.0;
};

// seq_len is the current sequence length (largest position + 1): dynamic NTK
// and LongRoPE depend on it; 0 means "not longer than the original length".
RopeFrequencies ComputeRopeFrequencies(const RopeSpec& spec, std::int64_t seq_len = 0);

// For YaRN specs: per pair, the weight of the extrapolated (unscaled)
// frequency, 1 for fast dimensions, 0 for fully interpolated slow ones.
// Empty for other methods.
std::vector<double> YarnExtrapolationWeights(const RopeSpec& spec);

// The original (training) context length the spec's scaling refers to, or 0.
std::int64_t OriginalContextLength(const RopeSpec& spec);

// The length the scaled model was trained or validated for, where its
// scaling states it: original_max_position x factor for llama3, yarn and
// longrope (Phi-3's factor is max_position_embeddings / original, so this
// is its max_position_embeddings); 0 for the others (none, linear, ntk,
// dynamic and factors carry no length). Extensions on top of the scaling
// count their factor from it (PlanContextExtension).
std::int64_t EffectiveContextLength(const RopeSpec& spec);

}  // namespace posenc
