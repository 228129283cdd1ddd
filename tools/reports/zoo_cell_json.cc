// A zoo cell's models and evaluations as JSON and back (zoo_report.h): what
// a cell writes and the merge reads.
#include <string>

#include "posenc/error.h"
#include "reports/zoo_report.h"

namespace posenc::cli {
namespace {

using Json = nlohmann::json;
constexpr const char* kOp = "zoo";

}  // namespace

Json ZooEvaluationJson(const ZooEvaluation& evaluation) {
  Json lengths = Json::array();
  for (const ZooLength& l : evaluation.lengths) {
    Json row{{"length", l.length},
             {"resolved", l.resolved},
             {"same_as_model", l.same_as_model},
             {"windows", l.windows},
             {"seconds", l.seconds}};
    row["loss"] = l.loss ? Json(*l.loss) : Json(nullptr);
    row["loss_past_train"] = l.loss_past_train ? Json(*l.loss_past_train) : Json(nullptr);
    if (!l.error.empty()) row["error"] = l.error;
    row["position_loss"] = l.position_loss;
    lengths.push_back(std::move(row));
  }
  return {{"variant", evaluation.variant}, {"lengths", std::move(lengths)}};
}

ZooEvaluation ZooEvaluationFromJson(const Json& json) {
  try {
    ZooEvaluation evaluation{.variant = json.at("variant").get<std::string>()};
    for (const Json& l : json.at("lengths")) {
      ZooLength length{.length = l.at("length").get<std::int64_t>(),
                       .resolved = l.at("resolved").get<std::string>(),
                       .same_as_model = l.at("same_as_model").get<bool>(),
                       .windows = l.at("windows").get<std::int64_t>(),
                       .position_loss = l.at("position_loss").get<std::vector<double>>(),
                       .seconds = l.at("seconds").get<double>()};
      if (!l.at("loss").is_null()) length.loss = l.at("loss").get<double>();
      if (!l.at("loss_past_train").is_null()) length.loss_past_train = l.at("loss_past_train").get<double>();
      length.error = l.value("error", std::string());
      evaluation.lengths.push_back(std::move(length));
    }
    return evaluation;
  } catch (const Json::exception& e) {
    ThrowError(kOp, "cell", json.dump().substr(0, 80), std::string("is not a zoo evaluation: ") + e.what());
  }
}

ZooSeenNgram ZooSeenNgramFromJson(std::int64_t seed, const Json& json) {
  try {
    ZooSeenNgram seen{.seed = seed, .bytes = json.at("bytes").get<std::int64_t>()};
    for (const Json& e : json.at("evaluations")) seen.evaluations.push_back(ZooEvaluationFromJson(e));
    return seen;
  } catch (const Json::exception& e) {
    ThrowError(kOp, "cell", json.dump().substr(0, 80),
               std::string("is not a zoo n-gram on a model's bytes: ") + e.what());
  }
}

Json ZooModelJson(const ZooModel& m) {
  Json evaluations = Json::array();
  for (const ZooEvaluation& e : m.evaluations) evaluations.push_back(ZooEvaluationJson(e));
  Json curve = Json::array();
  for (const ZooCurvePoint& p : m.curve) curve.push_back({{"tokens", p.tokens}, {"loss", p.loss}});
  return {{"scheme", m.scheme},
          {"seed", m.seed},
          {"params", m.params},
          {"steps", m.steps},
          {"tokens", m.tokens},
          {"final_loss", m.final_loss},
          {"train_seconds", m.train_seconds},
          {"tokens_per_s", m.tokens_per_s},
          {"seconds", m.seconds},
          {"evaluations", std::move(evaluations)},
          {"curve", std::move(curve)}};
}

ZooModel ZooModelFromJson(const Json& j) {
  try {
    ZooModel m{.scheme = j.at("scheme").get<std::string>(),
               .seed = j.at("seed").get<std::int64_t>(),
               .params = j.at("params").get<std::int64_t>(),
               .steps = j.at("steps").get<std::int64_t>(),
               .tokens = j.at("tokens").get<std::int64_t>(),
               .final_loss = j.at("final_loss").get<double>(),
               .train_seconds = j.at("train_seconds").get<double>(),
               .tokens_per_s = j.at("tokens_per_s").get<double>(),
               .seconds = j.at("seconds").get<double>()};
    for (const Json& e : j.at("evaluations")) m.evaluations.push_back(ZooEvaluationFromJson(e));
    if (j.contains("curve")) {  // absent from cells written before learning curves
      for (const Json& p : j.at("curve")) {
        m.curve.push_back({.tokens = p.at("tokens").get<std::int64_t>(), .loss = p.at("loss").get<double>()});
      }
    }
    return m;
  } catch (const Json::exception& e) {
    ThrowError(kOp, "cell", j.dump().substr(0, 80), std::string("is not a zoo model: ") + e.what());
  }
}

}  // namespace posenc::cli
