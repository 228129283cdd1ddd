// The zoo's cell parameters as JSON (zoo_grid.cc): the model config and the
// training options, written by the planner and read back, checked, by the
// cell; and the rules of posenc zoo's values that its flags and a zoo
// grid's file share (one rule, one place), each throwing posenc::Error
// "[zoo] --flag = value: rule".
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "grid/grid.h"
#include "posenc/context_extension.h"
#include "posenc/tiny_lm.h"
#include "posenc/tiny_lm_eval.h"
#include "posenc/tiny_lm_train.h"
#include "reports/zoo_report.h"

namespace posenc::cli {

// A tiny model of zoo or tasks is planned with no loss log but the last
// step's entry, so the log costs nothing at any budget; a zoo cell then
// logs kZooCurvePoints entries (each the mean loss of its steps): the
// learning curve of the report.
inline constexpr std::int64_t kZooLogEvery = std::numeric_limits<std::int64_t>::max();
inline constexpr std::int64_t kZooCurvePoints = 64;

// The "budget" of a grid entry that is a model's convergence twin (trained
// with half the budget, evaluated at L only); the full budget's entries
// have no "budget".
inline constexpr const char* kZooHalfBudget = "half";

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
// within the model's reach (CheckTinyLmReach).
void CheckZooLengths(const TinyLmConfig& config, const std::vector<std::int64_t>& lengths);
// Throws posenc::Error unless a model of `config` can run at `longest`:
// within its randomized positions' range (--position-range) and, for a
// learned table, within the square of its rows (--lengths). The zoo's and
// the tasks' rule.
void CheckTinyLmReach(const TinyLmConfig& config, std::int64_t longest, const char* op);
// --eval-bytes in [1, 2^32] and at least every length.
void CheckZooEvalBytes(std::int64_t eval_bytes, const std::vector<std::int64_t>& lengths);
void CheckZooBucket(std::int64_t bucket);  // --bucket, once 0 is resolved to L / 8
// --stride-divisor in [2, 64] (with lengths >= 2: a stride in [1, length - 1]).
void CheckZooStrideDivisor(std::int64_t stride_divisor);

// The model's sizes and the optimizer's budget, batch and lr from a zoo or
// tasks grid's settings ("model", "train"), each read as its type.
TinyLmRunSettings ReadTinyLmRunSettings(const GridField& at, const nlohmann::json& settings);

// The rows of a tiny-model report (posenc zoo, posenc tasks), in order:
// each scheme of the settings' "schemes" as trained, then its variants
// (SchemeCapabilities): "<scheme>+hierarchical" after a scheme of position
// rows (a learned table), "<scheme>+<method>" for every method of
// "methods" after one that takes context extension (RoPE); each name
// checked as its flag is (errors under `op`).
std::vector<std::string> TinyLmReportVariants(const GridField& at, const nlohmann::json& settings, const char* op);

// One scheme of a zoo or tasks grid, checked before a minute of training:
// its model's config (with the training options) and the methods the model
// runs, each planned at every length: all of `methods` where the scheme
// takes context extension (SchemeCapabilities), none otherwise.
struct TinyLmGridScheme {
  TinyLmConfig config;
  std::vector<std::string> methods;  // their text forms: the cells' "methods"
  // Evaluations a length, for the cost: as trained and each method, or as
  // trained and a second (a position table's hierarchical variant).
  double evaluations = 2;
};
TinyLmGridScheme PlanTinyLmGridScheme(const TinyLmConfig& config, const TinyLmTrainOptions& train,
                                      const std::vector<ContextExtension>& methods,
                                      const std::vector<std::int64_t>& lengths);

// Runs `evaluate` (one entry of a model at `length`) and returns "" or, where
// the failure is what is measured, its message: a scheme of position rows
// run as trained past the training length (the claim "no extrapolation").
// Any other error is rethrown.
std::string MeasuredFailure(const TinyLmConfig& config, std::int64_t length, const std::function<void()>& evaluate);

// The variants of one trained model beside its as-trained evaluation
// (`as_trained`, one entry a length): a learned table past its rows by Su's
// hierarchical decomposition, a RoPE model under each method (as the
// scheme's capabilities say). At a length
// where a variant is the model as trained (a length within the table;
// SameAsModelRope) the as-trained entry is reused; elsewhere `evaluate`
// runs (the config to run, the method or none, the length). Length is the
// report's entry type (ZooLength, TasksLength: fields same_as_model and
// resolved). Returns (variant name, entries) in TinyLmReportVariants' order.
template <class Length>
std::vector<std::pair<std::string, std::vector<Length>>> EvaluateTinyLmVariants(
    const TinyLmConfig& config, const std::vector<std::string>& methods, const std::vector<std::int64_t>& lengths,
    const std::vector<Length>& as_trained,
    const std::function<Length(const TinyLmConfig&, const std::optional<ContextExtension>&, std::int64_t)>& evaluate) {
  const std::string scheme(PositionSchemeName(config.scheme));
  const SchemeCapabilities can = PositionSchemeCapabilities(config.scheme);
  std::vector<std::pair<std::string, std::vector<Length>>> out;
  const auto variant = [&](const std::string& name, const auto& same_as_model, const auto& run) {
    std::vector<Length> entries;
    for (std::size_t i = 0; i < lengths.size(); ++i) {
      auto [same, resolved] = same_as_model(lengths[i]);
      Length l = same ? as_trained[i] : run(lengths[i]);
      l.same_as_model = same;
      l.resolved = resolved;
      entries.push_back(std::move(l));
    }
    out.emplace_back(name, std::move(entries));
  };
  if (can.position_rows) {
    TinyLmConfig hierarchical = config;
    hierarchical.learned_past_table = LearnedPastTable::kHierarchical;
    variant(
        scheme + "+hierarchical",
        [&](std::int64_t length) {
          return std::pair{length <= config.train_length, std::string("hierarchical")};
        },
        [&](std::int64_t length) { return evaluate(hierarchical, std::nullopt, length); });
  }
  if (can.context_extension) {
    for (const std::string& name : methods) {
      const ContextExtension method = ParseContextExtension(name);
      variant(
          std::string(scheme).append("+").append(name),
          [&](std::int64_t length) {
            const ExtensionPlan plan = PlanTinyLmExtension(config, method, length);
            return std::pair{SameAsModelRope(plan, TinyLmRopeSpec(config), length),
                             FormatContextExtension(plan.resolved)};
          },
          [&](std::int64_t length) { return evaluate(config, method, length); });
    }
  }
  return out;
}

}  // namespace posenc::cli
