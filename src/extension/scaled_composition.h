// A frequency method on top of a model's own RoPE scaling: the method's
// rescaling applied to the model's already-scaled inv_freq table
// (docs/composition.md has the formulas and why).
#pragma once

#include <cstdint>
#include <string_view>

#include "posenc/rope_frequencies.h"
#include "posenc/rope_spec.h"

namespace posenc::detail {

// `method` is the frequency method's scaling (LinearScaling, NtkAwareScaling,
// DynamicNtkScaling or YarnScaling) with its factor and, where it has one,
// original_max_position = L_train, the model's effective length.
// `method_name` names it in errors. Throws posenc::Error naming both for a
// model scaling a frequency method does not compose with (dynamic NTK).
RopeFrequencies ComposeOverModelScaling(const RopeSpec& model, const RopeScaling& method, std::string_view method_name,
                                        std::int64_t target_length);

}  // namespace posenc::detail
