// Shared pieces of the `posenc analyze` subcommands (one file each):
// where the RoPE spec comes from, output checks and number formatting.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "posenc/rope_config.h"

namespace posenc::cli::analyze {

using Json = nlohmann::ordered_json;

// Where the RoPE spec comes from: a config.json, or theta and head_dim.
struct SpecOptions {
  std::string hf_config;
  double theta = 10000.0;
  std::int64_t head_dim = 128;

  void Add(CLI::App* app) {
    app->add_option("--hf-config", hf_config, "Hugging Face config.json (else --theta, --head-dim)");
    app->add_option("--theta", theta, "RoPE base without --hf-config")->capture_default_str();
    app->add_option("--head-dim", head_dim, "head dimension without --hf-config")->capture_default_str();
  }
};

// The spec from --hf-config or --theta/--head-dim; errors name the file.
RopeModelConfig LoadSpec(const SpecOptions& options);
// A short name for titles: the config's file stem, or "theta T, d D".
std::string SpecName(const SpecOptions& options, const RopeSpec& spec);
// The original length L: the scaling's, else max_position_embeddings, else 4096.
std::int64_t OriginalLength(const RopeModelConfig& config);
// Throws unless --out is empty or a .png path.
void CheckOut(const std::string& out, const char* op);
// Numbers for labels: short and compact forms.
std::string Short(double value);
std::string Compact(double value);
// "wrote PATH" (to stderr when JSON goes to stdout).
void Wrote(const std::string& path, bool json);

// Each subcommand adds itself under `posenc analyze`.
void AddDims(CLI::App& analyze);
void AddDecay(CLI::App& analyze);
void AddHeatmap(CLI::App& analyze);
void AddLinearMap(CLI::App& analyze);

}  // namespace posenc::cli::analyze
