// posenc rope freqs --hf-config FILE [--seq-len N] [--json]
//
// The frequency table a Hugging Face config.json implies: per rotary pair its
// inverse frequency, wavelength in tokens, how many turns it completes within
// the original (training) context, and for YaRN the ramp weight that mixes
// extrapolated and interpolated frequencies.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <numbers>
#include <sstream>
#include <string>
#include <variant>

#include "commands.h"
#include "options/integer_options.h"
#include "posenc/error.h"
#include "posenc/rope_config.h"
#include "posenc/rope_frequencies.h"

namespace posenc::cli {
namespace {

using Json = nlohmann::ordered_json;

struct FreqsOptions {
  std::string hf_config;
  std::int64_t seq_len = 0;
  bool json = false;
};

// "factor 8, low_freq_factor 1, ..." (lists shown by their length).
std::string DescribeScaling(const Json& params) {
  if (params.is_null()) return "none";
  std::string text = params["rope_type"].get<std::string>();
  std::string sep = ": ";
  for (const auto& [key, value] : params.items()) {
    if (key == "rope_type") continue;
    text += sep + key + " ";
    if (value.is_array()) {
      text += "[" + std::to_string(value.size()) + " values]";
    } else if (value.is_number_float()) {
      std::ostringstream number;
      number << value.get<double>();
      text += number.str();
    } else {
      text += value.dump();
    }
    sep = ", ";
  }
  return text;
}

void RunRopeFreqs(const FreqsOptions& options, std::ostream& out) {
  const RopeModelConfig config = RopeFromHfConfigFile(options.hf_config);
  const RopeSpec& spec = config.spec;
  const RopeFrequencies freqs = ComputeRopeFrequencies(spec, options.seq_len);
  const std::vector<double> yarn_weights = YarnExtrapolationWeights(spec);
  const bool yarn = std::holds_alternative<YarnScaling>(spec.scaling);

  // L0: the scaling's original length, else the config's context length.
  std::int64_t original = OriginalContextLength(spec);
  const char* original_source = "rope scaling";
  if (original == 0) {
    original = config.max_position_embeddings;
    original_source = "max_position_embeddings";
  }

  const std::size_t pairs = freqs.inv_freq.size();
  std::vector<double> wavelength(pairs), rotations(pairs);
  for (std::size_t k = 0; k < pairs; ++k) {
    wavelength[k] = 2.0 * std::numbers::pi / freqs.inv_freq[k];
    rotations[k] = static_cast<double>(original) / wavelength[k];
  }
  const Json scaling = Json::parse(RopeScalingToJson(spec.scaling));  // Hugging Face's rope_scaling form

  if (options.json) {
    Json j;
    j["config"] = options.hf_config;
    j["theta"] = spec.theta;
    j["head_dim"] = spec.head_dim;
    j["rotary_dim"] = spec.RotaryDim();
    j["layout"] = RopeLayoutName(spec.layout);
    j["scaling"] = scaling;
    j["max_position_embeddings"] = config.max_position_embeddings;
    j["original_length"] = original > 0 ? Json(original) : Json(nullptr);
    j["seq_len"] = options.seq_len;
    j["attention_factor"] = freqs.attention_factor;
    j["inv_freq"] = freqs.inv_freq;
    j["wavelength"] = wavelength;
    j["rotations"] = original > 0 ? Json(rotations) : Json(nullptr);
    if (yarn) j["yarn_extrapolation_weight"] = yarn_weights;
    // What the config says beyond the table, where it says it.
    if (!config.mrope_section.empty()) j["mrope_section"] = config.mrope_section;
    if (config.softmax_scale) j["softmax_scale"] = *config.softmax_scale;
    if (!config.layer_positions.empty()) {
      Json layers = Json::array();
      for (const LayerPosition p : config.layer_positions)
        layers.push_back(p == LayerPosition::kRope ? "rope" : "nope");
      j["layer_positions"] = layers;
    }
    out << j.dump(2) << "\n";
    return;
  }

  char line[256];
  out << "RoPE frequencies of " << options.hf_config << "\n";
  const auto field = [&out](const char* name, const std::string& value) {
    out << "  " << name << std::string(18 - std::strlen(name), ' ') << value << "\n";
  };
  std::snprintf(line, sizeof line, "%.17g", spec.theta);
  field("theta", line);
  field("head_dim", std::to_string(spec.head_dim));
  field("rotary_dim", std::to_string(spec.RotaryDim()) + " (" + std::to_string(pairs) + " pairs)");
  field("layout", std::string(RopeLayoutName(spec.layout)));
  field("scaling", DescribeScaling(scaling));
  field("original length", original > 0 ? std::to_string(original) + " tokens (from " + original_source + ")"
                                        : std::string("unknown (no max_position_embeddings)"));
  field("seq_len",
        options.seq_len > 0 ? std::to_string(options.seq_len) : std::string("0 (not beyond the original length)"));
  std::snprintf(line, sizeof line, "%.17g", freqs.attention_factor);
  field("attention factor", line);
  if (config.softmax_scale) {
    std::snprintf(line, sizeof line, "%.17g", *config.softmax_scale);
    field("softmax scale", line);
  }
  if (!config.mrope_section.empty()) {
    std::string sections;
    for (const std::int64_t s : config.mrope_section) sections += (sections.empty() ? "" : ", ") + std::to_string(s);
    field("mrope sections", sections + " pairs (temporal, height, width)");
  }
  if (!config.layer_positions.empty()) {
    std::string layers;
    for (const LayerPosition p : config.layer_positions) layers += p == LayerPosition::kRope ? 'R' : 'N';
    field("layers", layers + " (R: RoPE, N: NoPE)");
  }
  out << "\n";

  std::string header = " pair      inv_freq  wavelength (tokens)";
  if (original > 0) header += "  rotations in " + std::to_string(original);
  if (yarn) header += "  yarn weight";
  out << header << "\n";
  for (std::size_t k = 0; k < pairs; ++k) {
    std::snprintf(line, sizeof line, "%5zu  %12.6e  %19.3f", k, freqs.inv_freq[k], wavelength[k]);
    out << line;
    if (original > 0) {
      const int width = static_cast<int>(std::string("rotations in ").size() + std::to_string(original).size());
      std::snprintf(line, sizeof line, "  %*.4f", width, rotations[k]);
      out << line;
    }
    if (yarn) {
      std::snprintf(line, sizeof line, "  %11.6f", yarn_weights[k]);
      out << line;
    }
    out << "\n";
  }
}

}  // namespace

void AddRopeCommands(CLI::App& app) {
  CLI::App* rope = app.add_subcommand("rope", "Rotary position embeddings (RoPE)");
  rope->require_subcommand(1);

  auto options = std::make_shared<FreqsOptions>();
  CLI::App* freqs = rope->add_subcommand("freqs",
                                         "Frequency table of a Hugging Face config: inverse frequencies, wavelengths, "
                                         "rotations within the original context, YaRN ramp weights");
  freqs->add_option("--hf-config", options->hf_config, "Hugging Face config.json")->required();
  freqs
      ->add_option("--seq-len", options->seq_len,
                   "Current sequence length (dynamic NTK and LongRoPE depend on it; 0: not beyond "
                   "the original length)")
      ->check(IntegerAtLeast(0));
  freqs->add_flag("--json", options->json, "Print one JSON object instead of a table");
  freqs->callback([options] { RunRopeFreqs(*options, std::cout); });
}

}  // namespace posenc::cli
