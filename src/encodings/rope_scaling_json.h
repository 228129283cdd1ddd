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
// `mrope_section`: where the object is a config.json's, receives Qwen2-VL's
// sections (rope_type "mrope", or "default" with mrope_section as
// transformers rewrites it); null: "mrope" is an error (the sections are the
// model's, not a scaling's).
RopeScaling RopeScalingFromJsonValue(const nlohmann::json& object, const RopeScalingContext& context,
                                     std::string_view op, std::string_view where, bool model_keys_allowed = false,
                                     std::vector<std::int64_t>* mrope_section = nullptr);

}  // namespace posenc::detail
