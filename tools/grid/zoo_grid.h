// The zoo's cell parameters as JSON (zoo_grid.cc): the model config and the
// training options, written by the planner and read back, checked, by the
// cell; and the rules of posenc zoo's values that its flags and a zoo
// grid's file share (one rule, one place), each throwing posenc::Error
// "[zoo] --flag = value: rule".
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include <nlohmann/json.hpp>

#include "grid/grid.h"
#include "posenc/tiny_lm.h"
#include "posenc/tiny_lm_train.h"

namespace posenc::cli {

// A zoo model keeps no loss log but the last step's entry (its final loss
// is all the tables use), so the log costs nothing at any budget.
inline constexpr std::int64_t kZooLogEvery = std::numeric_limits<std::int64_t>::max();

// How a cell places its evaluation windows (zoo_grid.cc's Evaluate), part of
// its parameters: a cell computed under another rule has another key, so a
// rerun never reuses numbers scored differently.
inline constexpr const char* kZooWindows = "sliding, every byte of 1..eval_bytes scored once";

// The stride of the sliding windows at a length: length / divisor, at
// least 1 (TinyLmSlidingWindows).
std::int64_t ZooStride(std::int64_t length, std::int64_t stride_divisor);

// {"scheme": name, then every field of TinyLmConfig::VisitFields}.
nlohmann::json ZooConfigJson(const TinyLmConfig& config);
// The model's sizes alone (TinyLmConfig::VisitModelFields): the report's settings.
nlohmann::json ZooModelJson(const TinyLmConfig& config);
// Throws posenc::Error naming `at`'s file and field when a value is missing,
// of another type, or not one train/zoo accept (TinyLmTrainOptions::Validate).
TinyLmConfig ZooConfigFromJson(const GridField& at, const nlohmann::json& json);
nlohmann::json ZooTrainJson(const TinyLmTrainOptions& train);
// log_every = kZooLogEvery.
TinyLmTrainOptions ZooTrainFromJson(const GridField& at, const nlohmann::json& json);

// --lengths (sorted, without repeats): at least one, each in [2, 2^32], and
// for a learned table at most train_length^2 (what Su's hierarchical
// decomposition reaches).
void CheckZooLengths(const TinyLmConfig& config, const std::vector<std::int64_t>& lengths);
// --eval-bytes in [1, 2^32] and at least every length.
void CheckZooEvalBytes(std::int64_t eval_bytes, const std::vector<std::int64_t>& lengths);
void CheckZooBucket(std::int64_t bucket);  // --bucket, once 0 is resolved to L / 8
// --stride-divisor in [2, 64] (with lengths >= 2: a stride in [1, length - 1]).
void CheckZooStrideDivisor(std::int64_t stride_divisor);

}  // namespace posenc::cli
