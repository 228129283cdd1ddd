// Internal: the gated unit's elementwise part over a run of one row,
// out[j] = act(gate[j]) * up[j] (model_ops.h's GatedUnit splits the rows
// into runs for the threads).
#pragma once

#include <cstdint>

#include "model/model_ops.h"

namespace posenc::model {

// In every target's vectors (Highway's Exp and Tanh): SiLU g / (1 + e^-g)
// with e^-g's argument held to [-88, 88] (beyond it the unit is g or a
// value under 1e-36 either way), GELU's tanh argument to [-10, 10] (tanh
// is 1 in float from 9.1 on). A NaN gate gives NaN.
void GatedRow(const float* gate, const float* up, std::int64_t n, GateActivation activation, float* out);

// The formulas as written, one element at a time (std::exp, std::tanh in
// float): what GatedRow is held to.
void GatedRowReference(const float* gate, const float* up, std::int64_t n, GateActivation activation, float* out);

}  // namespace posenc::model
