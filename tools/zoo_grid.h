// The zoo's cell parameters as JSON (zoo_grid.cc): the model config and the
// training options, written by the planner and read by the cell.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>

#include "posenc/tiny_lm.h"
#include "posenc/tiny_lm_train.h"

namespace posenc::cli {

// A zoo model keeps no loss log but the last step's entry (its final loss
// is all the tables use), so the log costs nothing at any budget.
inline constexpr std::int64_t kZooLogEvery = std::numeric_limits<std::int64_t>::max();

nlohmann::json ZooConfigJson(const TinyLmConfig& config);
TinyLmConfig ZooConfigFromJson(const nlohmann::json& json);
nlohmann::json ZooTrainJson(const TinyLmTrainOptions& train);
// log_every = kZooLogEvery.
TinyLmTrainOptions ZooTrainFromJson(const nlohmann::json& json);

}  // namespace posenc::cli
