// RoPE specs from/to Hugging Face config.json and GGUF metadata.
#include "posenc/rope_config.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "posenc/error.h"
#include "posenc/input_file.h"
#include "encodings/rope_scaling_json.h"

namespace posenc {
namespace {

using nlohmann::json;
constexpr const char* kHf = "hf-config";
constexpr const char* kGguf = "gguf";

// ---- Hugging Face config.json --------------------------------------------

// A field of `object` read as a number, or nullopt if absent or null.
std::optional<double> OptionalNumber(const json& object, const std::string& path, const char* key) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return std::nullopt;
  Require(it->is_number(), kHf, path + key, Verbatim{it->dump()}, "must be a number");
  return it->get<double>();
}

std::int64_t ToLength(double value, const std::string& name) {
  Require(value >= 0 && value == std::floor(value), kHf, name, value, "must be a whole number >= 0");
  return static_cast<std::int64_t>(value);
}

// The scaling object: transformers v5's rope_parameters, or rope_scaling.
const json* ScalingObject(const json& config, std::string& path) {
  for (const char* key : {"rope_parameters", "rope_scaling"}) {
    const auto it = config.find(key);
    if (it == config.end() || it->is_null()) continue;
    Require(it->is_object(), kHf, key, Verbatim{it->dump()}, "must be an object");
    path = std::string(key) + ".";
    return &*it;
  }
  return nullptr;
}

// DeepSeek-V2/V3's softmax scale (their modeling code, DeepseekV2Attention):
// q_head_dim^(-1/2), times yarn_get_mscale(factor, mscale_all_dim)^2 when the
// YaRN scaling sets a non-zero mscale_all_dim; q_head_dim = qk_nope_head_dim
// + qk_rope_head_dim. None for other configs.
std::optional<double> DeepSeekSoftmaxScale(const json& config, const RopeSpec& spec) {
  const auto nope = OptionalNumber(config, "", "qk_nope_head_dim");
  const auto rope = OptionalNumber(config, "", "qk_rope_head_dim");
  const auto* yarn = std::get_if<YarnScaling>(&spec.scaling);
  if (!nope || !rope || !yarn || !yarn->mscale_all_dim || *yarn->mscale_all_dim == 0) return std::nullopt;
  const double q_head_dim = static_cast<double>(ToLength(*nope, "qk_nope_head_dim")) + *rope;
  const double m = yarn->factor <= 1 ? 1.0 : 0.1 * *yarn->mscale_all_dim * std::log(yarn->factor) + 1.0;
  return m * m / std::sqrt(q_head_dim);
}

// Llama 4's and SmolLM3's NoPE layers (transformers' Llama4TextConfig,
// SmolLM3Config): no_rope_layers (1: the layer rotates, 0: NoPE), else every
// no_rope_layer_interval-th layer NoPE (4 for their configs that give
// neither). Empty for models without NoPE layers.
std::vector<LayerPosition> LayerPositions(const json& config, const std::string& model_type) {
  const bool llama4 = model_type == "llama4" || model_type == "llama4_text" || model_type == "smollm3";
  const auto list = config.find("no_rope_layers");
  const bool has_list = list != config.end() && !list->is_null() && !(list->is_array() && list->empty());
  const auto interval = OptionalNumber(config, "", "no_rope_layer_interval");
  if (!has_list && !interval && !llama4) return {};
  const auto layers = OptionalNumber(config, "", "num_hidden_layers");
  std::vector<LayerPosition> positions;
  if (has_list) {
    Require(list->is_array(), kHf, "no_rope_layers", Verbatim{list->dump()}, "must be a list of 0 and 1");
    for (const json& item : *list) {
      Require(item.is_number_integer() && (item.get<std::int64_t>() == 0 || item.get<std::int64_t>() == 1), kHf,
              "no_rope_layers", Verbatim{item.dump()}, "must hold 0 (NoPE layer) or 1 (RoPE layer)");
      positions.push_back(item.get<std::int64_t>() == 1 ? LayerPosition::kRope : LayerPosition::kNope);
    }
    if (layers) {
      Require(static_cast<double>(positions.size()) == *layers, kHf, "no_rope_layers.size()", positions.size(),
              "must equal num_hidden_layers = " + FormatValue(*layers));
    }
    return positions;
  }
  if (!layers) ThrowError(kHf, "num_hidden_layers", "missing", "needed to place the NoPE layers");
  const std::int64_t every = interval ? ToLength(*interval, "no_rope_layer_interval") : 4;
  Require(every >= 1, kHf, "no_rope_layer_interval", every, "must be >= 1");
  for (std::int64_t l = 0; l < ToLength(*layers, "num_hidden_layers"); ++l) {
    positions.push_back((l + 1) % every != 0 ? LayerPosition::kRope : LayerPosition::kNope);
  }
  return positions;
}

// ---- GGUF metadata ---------------------------------------------------------

// llama.cpp's rope type per architecture: "normal" rotates interleaved pairs
// (its converter permutes llama-family Q/K weights to match); "neox" half-split.
RopeLayout GgufLayout(const std::string& arch) {
  static const char* const kInterleaved[] = {"llama",   "deepseek",   "deepseek2", "baichuan", "starcoder", "internlm2",
                                             "minicpm", "xverse",     "command-r", "cohere2",  "olmo",      "arctic",
                                             "granite", "granitemoe", "chameleon", "mistral3", "llama4",    "plm",
                                             "bitnet",  "refact",     "orion"};
  static const char* const kHalfSplit[] = {
      "gptneox",  "falcon",   "grok",     "dbrx",    "bert",       "nomic-bert", "jina-bert-v2", "stablelm",
      "qwen",     "qwen2",    "qwen2moe", "qwen2vl", "qwen3",      "qwen3moe",   "phi2",         "phi3",
      "phimoe",   "gemma",    "gemma2",   "gemma3",  "starcoder2", "openelm",    "codeshell",    "exaone",
      "minicpm3", "nemotron", "olmo2",    "olmoe",   "gpt-oss",    "smollm3",    "ernie4_5",     "hunyuan-moe"};
  for (const char* name : kInterleaved) {
    if (arch == name) return RopeLayout::kInterleaved;
  }
  for (const char* name : kHalfSplit) {
    if (arch == name) return RopeLayout::kHalfSplit;
  }
  ThrowError(kGguf, "general.architecture", FormatValue(arch),
             "has no known RoPE layout (not a rotary architecture known to posenc)");
}

}  // namespace

RopeModelConfig RopeFromHfConfigFile(const std::string& path) {
  const std::string text =
      ReadRegularFile("hf_config", "path", path, kMaxHfConfigBytes, "a Hugging Face config.json is a few kilobytes");
  try {
    return RopeFromHfConfig(text);
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());  // say which file is wrong
  }
}

RopeModelConfig RopeFromHfConfig(std::string_view config_json) {
  json config;
  try {
    config = json::parse(config_json);
  } catch (const json::parse_error& e) {
    ThrowError(kHf, "config.json", "unparsable", std::string("must be valid JSON: ") + e.what());
  }
  Require(config.is_object(), kHf, "config.json", Verbatim{config.type_name()}, "must be a JSON object");

  std::string scaling_path;
  const json* scaling = ScalingObject(config, scaling_path);
  const std::string model_type = config.value("model_type", std::string());

  RopeModelConfig out;
  RopeSpec& spec = out.spec;
  // transformers v5 keeps the model's rope_theta and partial_rotary_factor
  // in rope_parameters, 4.x at the top level (in rope_scaling they are
  // unknown keys: RopeScalingFromJsonValue).
  const json* v5_parameters = scaling_path == "rope_parameters." ? scaling : nullptr;
  std::optional<double> theta;
  if (v5_parameters) theta = OptionalNumber(*v5_parameters, scaling_path, "rope_theta");
  if (!theta) theta = OptionalNumber(config, "", "rope_theta");
  if (!theta) theta = OptionalNumber(config, "", "rotary_emb_base");  // GPT-NeoX
  spec.theta = theta.value_or(10000.0);

  if (const auto rope_dim = OptionalNumber(config, "", "qk_rope_head_dim")) {
    // DeepSeek-V2/V3 (MLA): only a separate qk_rope_head_dim-wide part of q
    // and k is rotated; head_dim and hidden_size / heads describe the rest.
    spec.head_dim = ToLength(*rope_dim, "qk_rope_head_dim");
  } else if (const auto head_dim = OptionalNumber(config, "", "head_dim")) {
    spec.head_dim = ToLength(*head_dim, "head_dim");
  } else {
    const auto hidden = OptionalNumber(config, "", config.contains("n_embd") ? "n_embd" : "hidden_size");
    const auto heads = OptionalNumber(config, "", config.contains("n_head") ? "n_head" : "num_attention_heads");
    if (!hidden || !heads) {
      ThrowError(kHf, "head_dim", "missing", "give head_dim, or hidden_size and num_attention_heads");
    }
    Require(*heads > 0, kHf, "num_attention_heads", *heads, "must be > 0");
    spec.head_dim = ToLength(*hidden / *heads, "hidden_size / num_attention_heads");
  }

  if (const auto rotary_dim = OptionalNumber(config, "", "rotary_dim")) {
    spec.rotary_dim = ToLength(*rotary_dim, "rotary_dim");  // GPT-J, explicit
  } else {
    std::optional<double> factor;
    if (v5_parameters) factor = OptionalNumber(*v5_parameters, scaling_path, "partial_rotary_factor");
    if (!factor) factor = OptionalNumber(config, "", "partial_rotary_factor");
    if (!factor) factor = OptionalNumber(config, "", "rotary_pct");  // GPT-NeoX
    if (factor && *factor != 1.0) {
      spec.rotary_dim = RotaryDimFromFactor(spec.head_dim, *factor);
    }
  }
  // DeepSeek's modeling code de-interleaves q_pe/k_pe before rotate_half: it
  // rotates (2k, 2k+1) pairs, as llama.cpp's deepseek2 does.
  const bool interleaved = model_type == "gptj" || model_type == "deepseek_v2" || model_type == "deepseek_v3";
  spec.layout = interleaved ? RopeLayout::kInterleaved : RopeLayout::kHalfSplit;

  auto max_positions = OptionalNumber(config, "", "max_position_embeddings");
  if (!max_positions) max_positions = OptionalNumber(config, "", "n_positions");
  out.max_position_embeddings = max_positions ? ToLength(*max_positions, "max_position_embeddings") : 0;
  if (scaling) {
    RopeScalingContext context{.max_position_embeddings = out.max_position_embeddings};
    if (const auto top = OptionalNumber(config, "", "original_max_position_embeddings")) {
      context.top_level_original_max_position = ToLength(*top, "original_max_position_embeddings");
      Require(context.top_level_original_max_position > 0, kHf, "original_max_position_embeddings", 0, "must be > 0");
    }
    scaling_path.pop_back();  // "rope_scaling." -> "rope_scaling"
    spec.scaling = detail::RopeScalingFromJsonValue(*scaling, context, kHf, scaling_path, v5_parameters != nullptr,
                                                    &out.mrope_section);
  }
  spec.Validate();
  if (!out.mrope_section.empty()) {
    std::int64_t pairs = 0;
    std::string sections;
    for (const std::int64_t s : out.mrope_section) {
      pairs += s;
      sections += (sections.empty() ? "[" : ", ") + std::to_string(s);
    }
    Require(pairs == spec.Pairs(), kHf, scaling_path + ".mrope_section", Verbatim{sections + "]"},
            "must sum to rotary_dim / 2 = " + std::to_string(spec.Pairs()) + " (pairs), not " + std::to_string(pairs));
  }
  out.softmax_scale = DeepSeekSoftmaxScale(config, spec);
  out.layer_positions = LayerPositions(config, model_type);
  return out;
}

std::string RopeToHfConfig(const RopeModelConfig& config) {
  const RopeSpec& spec = config.spec;
  spec.Validate();
  json j = {{"rope_theta", spec.theta}, {"head_dim", spec.head_dim}};
  if (spec.layout == RopeLayout::kInterleaved) {
    j["model_type"] = "gptj";
    j["rotary_dim"] = spec.RotaryDim();
  } else if (spec.RotaryDim() != spec.head_dim) {
    j["partial_rotary_factor"] = static_cast<double>(spec.RotaryDim()) / static_cast<double>(spec.head_dim);
  }
  if (config.max_position_embeddings > 0) j["max_position_embeddings"] = config.max_position_embeddings;
  if (const auto* l = std::get_if<LongRopeScaling>(&spec.scaling)) {
    j["original_max_position_embeddings"] = l->original_max_position;
    j["max_position_embeddings"] = static_cast<std::int64_t>(std::llround(l->factor * l->original_max_position));
  }
  if (const auto* d = std::get_if<DynamicNtkScaling>(&spec.scaling)) {
    j["max_position_embeddings"] = d->original_max_position;
  }
  j["rope_scaling"] = json::parse(RopeScalingToJson(spec.scaling));
  if (!config.mrope_section.empty()) {
    Require(std::holds_alternative<NoScaling>(spec.scaling), kHf, "mrope_section", Verbatim{"set"},
            "has no config.json form with a frequency scaling (Qwen2-VL's mrope is unscaled)");
    j["rope_scaling"] = {{"type", "mrope"}, {"mrope_section", config.mrope_section}};
  }
  if (!config.layer_positions.empty()) {
    std::vector<int> flags;
    for (const LayerPosition p : config.layer_positions) flags.push_back(p == LayerPosition::kRope ? 1 : 0);
    j["no_rope_layers"] = flags;
    j["num_hidden_layers"] = flags.size();
  }
  return j.dump(2);
}

RopeModelConfig RopeFromGguf(const GgufMetadata& meta) {
  const auto arch = GgufString(meta, "general.architecture", kGguf);
  if (!arch) ThrowError(kGguf, "general.architecture", "missing", "every GGUF model names its architecture");
  const std::string p = *arch + ".";
  RopeModelConfig out;
  RopeSpec& spec = out.spec;
  spec.layout = GgufLayout(*arch);
  spec.theta = GgufNumber(meta, p + "rope.freq_base", kGguf).value_or(10000.0);
  if (GgufNumber(meta, p + "attention.key_length", kGguf)) {
    spec.head_dim = RequireGgufCount(meta, p + "attention.key_length", kGguf, "needed for this RoPE configuration");
  } else {
    spec.head_dim = RequireGgufCount(meta, p + "embedding_length", kGguf, "needed for this RoPE configuration") /
                    RequireGgufCount(meta, p + "attention.head_count", kGguf, "needed for this RoPE configuration");
  }
  if (GgufNumber(meta, p + "rope.dimension_count", kGguf)) {
    spec.rotary_dim = RequireGgufCount(meta, p + "rope.dimension_count", kGguf, "needed for this RoPE configuration");
    if (spec.rotary_dim == spec.head_dim) spec.rotary_dim = 0;
  }
  if (GgufNumber(meta, p + "context_length", kGguf)) {
    out.max_position_embeddings =
        RequireGgufCount(meta, p + "context_length", kGguf, "needed for this RoPE configuration");
  }

  std::string type = GgufString(meta, p + "rope.scaling.type", kGguf).value_or("none");
  auto factor = GgufNumber(meta, p + "rope.scaling.factor", kGguf);
  if (const auto linear = GgufNumber(meta, p + "rope.scale_linear", kGguf); linear && type == "none") {
    type = "linear";  // older files
    factor = linear;
  }
  const auto original = [&] {
    return GgufNumber(meta, p + "rope.scaling.original_context_length", kGguf)
               ? RequireGgufCount(meta, p + "rope.scaling.original_context_length", kGguf,
                                  "needed for this RoPE configuration")
               : RequireGgufCount(meta, p + "context_length", kGguf, "needed for this RoPE configuration");
  };
  const auto need_factor = [&] {
    if (!factor) ThrowError(kGguf, p + "rope.scaling.factor", "missing", "needed for scaling type " + type);
    return *factor;
  };
  if (type == "none") {
    spec.scaling = NoScaling{};
  } else if (type == "linear") {
    spec.scaling = LinearScaling{need_factor()};
  } else if (type == "yarn") {
    YarnScaling y;
    y.factor = need_factor();
    y.original_max_position = original();
    y.beta_fast = GgufNumber(meta, p + "rope.scaling.yarn_beta_fast", kGguf).value_or(32.0);
    y.beta_slow = GgufNumber(meta, p + "rope.scaling.yarn_beta_slow", kGguf).value_or(1.0);
    y.ext_factor = GgufNumber(meta, p + "rope.scaling.yarn_ext_factor", kGguf).value_or(1.0);
    y.attn_factor = GgufNumber(meta, p + "rope.scaling.attn_factor", kGguf).value_or(1.0);
    // DeepSeek-V2: yarn_log_multiplier = 0.1 * mscale_all_dim.
    if (const auto log_mul = GgufNumber(meta, p + "rope.scaling.yarn_log_multiplier", kGguf)) {
      y.mscale = y.mscale_all_dim = *log_mul / 0.1;
    }
    spec.scaling = y;
  } else {
    ThrowError(kGguf, p + "rope.scaling.type", FormatValue(type),
               "unknown; must be one of none, linear, yarn (LongRoPE and Llama-3 factors come as "
               "rope_factors tensors: give them as FrequencyFactorScaling)");
  }
  spec.Validate();
  return out;
}

GgufMetadata RopeToGguf(const RopeModelConfig& config, std::string_view architecture) {
  const RopeSpec& spec = config.spec;
  spec.Validate();
  const std::string p = std::string(architecture) + ".";
  GgufMetadata meta;
  meta["general.architecture"] = std::string(architecture);
  meta[p + "rope.freq_base"] = spec.theta;
  meta[p + "rope.dimension_count"] = spec.RotaryDim();
  meta[p + "attention.key_length"] = spec.head_dim;
  if (config.max_position_embeddings > 0) meta[p + "context_length"] = config.max_position_embeddings;
  if (const auto* l = std::get_if<LinearScaling>(&spec.scaling)) {
    meta[p + "rope.scaling.type"] = std::string("linear");
    meta[p + "rope.scaling.factor"] = l->factor;
  } else if (const auto* y = std::get_if<YarnScaling>(&spec.scaling)) {
    meta[p + "rope.scaling.type"] = std::string("yarn");
    meta[p + "rope.scaling.factor"] = y->factor;
    meta[p + "rope.scaling.original_context_length"] = y->original_max_position;
    meta[p + "rope.scaling.yarn_beta_fast"] = y->beta_fast;
    meta[p + "rope.scaling.yarn_beta_slow"] = y->beta_slow;
    meta[p + "rope.scaling.yarn_ext_factor"] = y->ext_factor;
    meta[p + "rope.scaling.attn_factor"] = y->attn_factor;
  } else if (!std::holds_alternative<NoScaling>(spec.scaling)) {
    ThrowError(kGguf, "scaling", FormatValue(RopeScalingName(spec.scaling)),
               "has no GGUF metadata form (GGUF carries none, linear and yarn)");
  } else {
    meta[p + "rope.scaling.type"] = std::string("none");
  }
  return meta;
}

}  // namespace posenc
