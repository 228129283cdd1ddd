// Hugging Face's rope_scaling object, both ways: the one reader and the one
// writer of the format (the config.json reader, the CLI and Python use them).
#include "encodings/rope_scaling_json.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "posenc/error.h"

namespace posenc {
namespace {

using nlohmann::json;

// The model's own keys, which transformers v5 keeps in rope_parameters next
// to the scaling's (RopeFromHfConfig reads them there). Anywhere else they
// are unknown keys: transformers 4.x reads rope_theta only from the top of
// config.json (a rope_theta in rope_scaling gets "Unrecognized keys" and is
// ignored), and a scaling object given alone has no theta to set.
constexpr std::string_view kModelKeys[] = {"rope_theta", "partial_rotary_factor"};

// Every rope_type the reader knows (mrope only inside a config.json: its
// sections are the model's).
constexpr std::string_view kKnownTypes =
    "default, none, linear, ntk, dynamic (with factor, or alpha), yarn, llama3, longrope (or su), factors, mrope";

bool IsModelKey(std::string_view key) {
  return std::find(std::begin(kModelKeys), std::end(kModelKeys), key) != std::end(kModelKeys);
}

// Reads one scaling object; remembers every key read so that
// RejectUnknownAndMissing can name a key no method reads (a misspelt key is
// an error, never ignored), and every required key found missing, which is
// said only after the unknown keys: a misspelt required key is reported as
// the misspelling it is.
class ScalingReader {
 public:
  ScalingReader(const json& object, std::string_view op, std::string_view where, bool model_keys_allowed)
      : object_(object), op_(op), where_(where), model_keys_allowed_(model_keys_allowed) {}

  std::string Path(std::string_view key) const { return std::string(where_) + "." + std::string(key); }
  std::string_view op() const { return op_; }

  const json* Find(const char* key) const {
    used_.insert(key);
    const auto it = object_.find(key);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }

  std::optional<double> Number(const char* key) const {
    const json* value = Find(key);
    if (!value) return std::nullopt;
    // JSON booleans are not numbers here: `true` as a factor is a mistake.
    Require(value->is_number(), op_, Path(key), Verbatim{value->dump()}, "must be a number");
    return value->get<double>();
  }

  // NaN when missing (Missing records it; RopeScalingFromJsonValue throws).
  double RequiredNumber(const char* key) const {
    const auto value = Number(key);
    if (!value) Missing(key);
    return value.value_or(std::numeric_limits<double>::quiet_NaN());
  }

  std::optional<std::int64_t> Length(const char* key) const {
    const auto value = Number(key);
    if (!value) return std::nullopt;
    // 2^63 is the first double past int64: the cast is checked only below it.
    Require(*value >= 1 && *value < 9223372036854775808.0 && *value == std::floor(*value), op_, Path(key), *value,
            "must be a whole number >= 1 (a context length in tokens)");
    return static_cast<std::int64_t>(*value);
  }

  std::vector<double> RequiredList(const char* key) const {
    const json* value = Find(key);
    if (!value) {
      Missing(key);
      return {};
    }
    Require(value->is_array(), op_, Path(key), Verbatim{value->dump()}, "must be a list of numbers");
    std::vector<double> out;
    for (const json& item : *value) {
      Require(item.is_number(), op_, Path(key), Verbatim{item.dump()}, "must contain only numbers");
      out.push_back(item.get<double>());
    }
    return out;
  }

  std::optional<bool> Bool(const char* key) const {
    const json* value = Find(key);
    if (!value) return std::nullopt;
    Require(value->is_boolean(), op_, Path(key), Verbatim{value->dump()}, "must be true or false");
    return value->get<bool>();
  }

  // rope_type and type agree when both are given; "default" when neither is
  // and the object holds nothing a method would read.
  std::string Type() const {
    std::string type;
    for (const char* key : {"rope_type", "type"}) {
      const json* value = Find(key);
      if (!value) continue;
      Require(value->is_string(), op_, Path(key), Verbatim{value->dump()}, "must be a string");
      const std::string name = value->get<std::string>();
      Require(type.empty() || type == name, op_, Path(key), name,
              "disagrees with " + Path("rope_type") + " = \"" + type + "\"");
      type = name;
    }
    if (!type.empty()) return type;
    // Only the model's keys (allowed or not: RejectUnknownAndMissing says which) name
    // no method.
    for (const auto& [key, value] : object_.items()) {
      if (!IsModelKey(key)) {
        ThrowError(op_, Path("rope_type"), "missing",
                   "a scaling object names its method, one of " + std::string(kKnownTypes));
      }
    }
    return "default";
  }

  // Call after reading every key the method knows: anything left is
  // unknown; then the first required key found missing.
  void RejectUnknownAndMissing(const std::string& type) const {
    for (const auto& [key, value] : object_.items()) {
      if (used_.contains(key) || (model_keys_allowed_ && IsModelKey(key))) continue;
      std::string known;
      for (const auto& k : used_) {
        if (k != "rope_type" && k != "type") known += (known.empty() ? "" : ", ") + k;
      }
      const std::string model_key =
          IsModelKey(key) ? " (" + key +
                                " is the model's, not the scaling's: it belongs at the top level of config.json, "
                                "or in transformers v5's rope_parameters)"
                          : "";
      std::string rule = "unknown key for rope_type \"" + type + "\"; known keys: ";
      rule += known.empty() ? "none" : known;
      rule += model_key;
      ThrowError(op_, Path(key), value.dump(), rule);
    }
    if (!missing_.empty()) ThrowError(op_, Path(missing_.front()), "missing", "rope_type \"" + type + "\" needs it");
  }

  void Missing(const char* key) const {
    if (std::find(missing_.begin(), missing_.end(), key) == missing_.end()) missing_.emplace_back(key);
  }

 private:
  const json& object_;
  std::string_view op_, where_;
  bool model_keys_allowed_;
  mutable std::set<std::string, std::less<>> used_;
  mutable std::vector<std::string> missing_;
};

// The original (training) length: the object's
// original_max_position_embeddings, else the model's max_position_embeddings.
std::int64_t OriginalLength(const ScalingReader& r, const RopeScalingContext& context) {
  if (const auto original = r.Length("original_max_position_embeddings")) return *original;
  if (context.max_position_embeddings > 0) return context.max_position_embeddings;
  r.Missing("original_max_position_embeddings");
  return 0;
}

// Qwen2-VL's mrope_section: whole numbers >= 1 (their sum is checked against
// the rotary width by RopeFromHfConfig, which knows it).
std::vector<std::int64_t> MropeSections(const ScalingReader& r) {
  std::vector<std::int64_t> sections;
  for (const double value : r.RequiredList("mrope_section")) {
    Require(value >= 1 && value == std::floor(value) && value < 1e9, r.op(), r.Path("mrope_section"), value,
            "must hold whole numbers >= 1 (pairs per position axis: temporal, height, width)");
    sections.push_back(static_cast<std::int64_t>(value));
  }
  return sections;
}

RopeScaling Read(const ScalingReader& r, const std::string& type, const RopeScalingContext& context,
                 std::vector<std::int64_t>* mrope_section) {
  if (type == "mrope") {
    Require(mrope_section != nullptr, r.op(), r.Path("rope_type"), type,
            "is a model's 3-D positions, not a frequency scaling: read it from the config.json "
            "(RopeFromHfConfig, posenc rope freqs --hf-config)");
    *mrope_section = MropeSections(r);
    return NoScaling{};
  }
  if (type == "default" || type == "none") {
    if (mrope_section && r.Find("mrope_section")) *mrope_section = MropeSections(r);
    return NoScaling{};
  }
  if (type == "linear") return LinearScaling{r.RequiredNumber("factor")};
  if (type == "ntk") return NtkAwareScaling{r.RequiredNumber("alpha")};
  if (type == "dynamic" && r.Number("alpha")) {
    // The NTK-alpha form (Hunyuan): base theta alpha^(d/(d-2)), fixed; a
    // factor, if any, must not say otherwise.
    const double alpha = *r.Number("alpha");
    Require(std::isfinite(alpha) && alpha > 0, r.op(), r.Path("alpha"), alpha,
            "must be a finite number > 0 (dynamic with alpha: the base becomes theta * alpha^(d/(d-2)))");
    const auto factor = r.Number("factor");
    Require(!factor || *factor == 1.0, r.op(), r.Path("factor"), factor.value_or(1.0),
            "must be 1 or absent with alpha (the NTK-alpha form scales by alpha alone)");
    return NtkAwareScaling{alpha};
  }
  if (type == "dynamic") {
    // Hugging Face's dynamic NTK counts from max_position_embeddings;
    // posenc's own form (RopeScalingToJson) names the length in the object.
    const double factor = r.RequiredNumber("factor");
    return DynamicNtkScaling{factor, OriginalLength(r, context)};
  }
  if (type == "yarn") {
    YarnScaling y;
    y.factor = r.RequiredNumber("factor");
    y.original_max_position = OriginalLength(r, context);
    y.beta_fast = r.Number("beta_fast").value_or(y.beta_fast);
    y.beta_slow = r.Number("beta_slow").value_or(y.beta_slow);
    y.mscale = r.Number("mscale");
    y.mscale_all_dim = r.Number("mscale_all_dim");
    y.attention_factor = r.Number("attention_factor");
    y.truncate = r.Bool("truncate").value_or(y.truncate);
    y.ext_factor = r.Number("ext_factor").value_or(y.ext_factor);
    y.attn_factor = r.Number("attn_factor").value_or(y.attn_factor);
    return y;
  }
  if (type == "llama3") {
    Llama3Scaling l;
    l.factor = r.RequiredNumber("factor");
    l.low_freq_factor = r.RequiredNumber("low_freq_factor");
    l.high_freq_factor = r.RequiredNumber("high_freq_factor");
    const auto original = r.Length("original_max_position_embeddings");
    if (!original) r.Missing("original_max_position_embeddings");
    l.original_max_position = original.value_or(0);
    return l;
  }
  if (type == "longrope" || type == "su") {  // "su": Phi-3's first name for it, as transformers reads it
    LongRopeScaling l;
    l.short_factor = r.RequiredList("short_factor");
    l.long_factor = r.RequiredList("long_factor");
    l.attention_factor = r.Number("attention_factor");
    l.short_mscale = r.Number("short_mscale");
    l.long_mscale = r.Number("long_mscale");
    if (context.top_level_original_max_position > 0) {
      // Phi-3 keeps the pretrained length at the top level of config.json;
      // the factor is the ratio of the extended length to it, as in Hugging
      // Face (a `factor` or original length in the object is read and
      // overridden).
      r.Number("factor");
      r.Length("original_max_position_embeddings");
      Require(context.max_position_embeddings > 0, r.op(), "max_position_embeddings", Verbatim{"missing"},
              "longrope with original_max_position_embeddings needs the extended length");
      l.original_max_position = context.top_level_original_max_position;
      l.factor = static_cast<double>(context.max_position_embeddings) /
                 static_cast<double>(context.top_level_original_max_position);
    } else {
      l.original_max_position = OriginalLength(r, context);
      l.factor = r.Number("factor").value_or(1.0);
    }
    return l;
  }
  if (type == "factors") return FrequencyFactorScaling{r.RequiredList("factors")};
  ThrowError(r.op(), r.Path("rope_type"), FormatValue(type), "unknown; must be one of " + std::string(kKnownTypes));
}

// Keys in the order written (rope_type first).
nlohmann::ordered_json ScalingToHf(const RopeScaling& scaling) {
  return std::visit(
      [](const auto& s) -> nlohmann::ordered_json {
        using S = std::decay_t<decltype(s)>;
        if constexpr (std::is_same_v<S, NoScaling>) {
          return nullptr;
        } else if constexpr (std::is_same_v<S, LinearScaling>) {
          return {{"rope_type", "linear"}, {"factor", s.factor}};
        } else if constexpr (std::is_same_v<S, NtkAwareScaling>) {
          return {{"rope_type", "ntk"}, {"alpha", s.alpha}};
        } else if constexpr (std::is_same_v<S, DynamicNtkScaling>) {
          return {{"rope_type", "dynamic"},
                  {"factor", s.factor},
                  {"original_max_position_embeddings", s.original_max_position}};
        } else if constexpr (std::is_same_v<S, YarnScaling>) {
          nlohmann::ordered_json j = {{"rope_type", "yarn"},
                                      {"factor", s.factor},
                                      {"original_max_position_embeddings", s.original_max_position},
                                      {"beta_fast", s.beta_fast},
                                      {"beta_slow", s.beta_slow},
                                      {"truncate", s.truncate}};
          if (s.mscale) j["mscale"] = *s.mscale;
          if (s.mscale_all_dim) j["mscale_all_dim"] = *s.mscale_all_dim;
          if (s.attention_factor) j["attention_factor"] = *s.attention_factor;
          j["ext_factor"] = s.ext_factor;
          j["attn_factor"] = s.attn_factor;
          return j;
        } else if constexpr (std::is_same_v<S, Llama3Scaling>) {
          return {{"rope_type", "llama3"},
                  {"factor", s.factor},
                  {"low_freq_factor", s.low_freq_factor},
                  {"high_freq_factor", s.high_freq_factor},
                  {"original_max_position_embeddings", s.original_max_position}};
        } else if constexpr (std::is_same_v<S, LongRopeScaling>) {
          nlohmann::ordered_json j = {{"rope_type", "longrope"},
                                      {"short_factor", s.short_factor},
                                      {"long_factor", s.long_factor},
                                      {"factor", s.factor},
                                      {"original_max_position_embeddings", s.original_max_position}};
          if (s.attention_factor) j["attention_factor"] = *s.attention_factor;
          if (s.short_mscale) j["short_mscale"] = *s.short_mscale;
          if (s.long_mscale) j["long_mscale"] = *s.long_mscale;
          return j;
        } else {
          return {{"rope_type", "factors"}, {"factors", s.factors}};
        }
      },
      scaling);
}

}  // namespace

namespace detail {

RopeScaling RopeScalingFromJsonValue(const json& object, const RopeScalingContext& context, std::string_view op,
                                     std::string_view where, bool model_keys_allowed,
                                     std::vector<std::int64_t>* mrope_section) {
  Require(object.is_object(), op, where, Verbatim{object.dump()}, "must be an object");
  const ScalingReader reader(object, op, where, model_keys_allowed);
  const std::string type = reader.Type();
  RopeScaling scaling = Read(reader, type, context, mrope_section);
  reader.RejectUnknownAndMissing(type);
  return scaling;
}

}  // namespace detail

RopeScaling RopeScalingFromJson(std::string_view text, const RopeScalingContext& context) {
  json object;
  try {
    object = json::parse(text);
  } catch (const json::parse_error& e) {
    ThrowError("rope", "rope_scaling", "unparsable", std::string("must be valid JSON: ") + e.what());
  }
  if (object.is_null()) return NoScaling{};
  return detail::RopeScalingFromJsonValue(object, context, "rope", "rope_scaling");
}

std::string RopeScalingToJson(const RopeScaling& scaling) { return ScalingToHf(scaling).dump(); }

}  // namespace posenc
