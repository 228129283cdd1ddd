// Internal: the gated unit's elementwise part over a run of one row,
// out[j] = act(gate[j]) * up[j] (model_ops.h's GatedUnit splits the rows
// into runs for the threads).
#pragma once

#include <cstdint>

#include "model/model_ops.h"

namespace posenc::model {

// In every target's vectors (kernels/activations-inl.h: Highway's Exp and
// Tanh). A NaN gate gives NaN.
void GatedRow(const float* gate, const float* up, std::int64_t n, GateActivation activation, float* out);

// The formulas as written, one element at a time (std::exp, std::tanh in
// float): what GatedRow is held to.
void GatedRowReference(const float* gate, const float* up, std::int64_t n, GateActivation activation, float* out);

}  // namespace posenc::model
