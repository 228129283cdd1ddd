// Internal: RopeScalingFromJson on an already parsed JSON value, for readers
// that hold one (the config.json reader, the Python binding's dict).
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "posenc/rope_config.h"

namespace posenc::detail {

// `op` and `where` name the object in errors: "[op] where.key = value: rule".
// `model_keys_allowed`: the object is transformers v5's rope_parameters, whose
// rope_theta and partial_rotary_factor the caller reads; elsewhere they are
// unknown keys.
RopeScaling RopeScalingFromJsonValue(const nlohmann::json& object, const RopeScalingContext& context,
                                     std::string_view op, std::string_view where, bool model_keys_allowed = false);

}  // namespace posenc::detail
