// The zoo's cell parameters as JSON (zoo_grid.cc): the model config and the
// training options, written by the planner and read by the cell.
#pragma once

#include <nlohmann/json.hpp>

#include "posenc/tiny_lm.h"
#include "posenc/tiny_lm_train.h"

namespace posenc::cli {

nlohmann::json ZooConfigJson(const TinyLmConfig& config);
TinyLmConfig ZooConfigFromJson(const nlohmann::json& json);
nlohmann::json ZooTrainJson(const TinyLmTrainOptions& train);
TinyLmTrainOptions ZooTrainFromJson(const nlohmann::json& json);

}  // namespace posenc::cli
