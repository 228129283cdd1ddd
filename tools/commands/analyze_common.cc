#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numbers>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "reports/plot.h"
#include "posenc/alibi.h"
#include "posenc/analysis.h"
#include "posenc/error.h"
#include "posenc/output_file.h"
#include "posenc/rope_config.h"
#include "posenc/rope_frequencies.h"
#include "posenc/sinusoidal.h"
#include "posenc/t5_bias.h"

#include "commands/analyze_common.h"

namespace posenc::cli::analyze {

RopeModelConfig LoadSpec(const SpecOptions& options) {
  if (options.hf_config.empty()) {
    RopeModelConfig config;
    config.spec.theta = options.theta;
    config.spec.head_dim = options.head_dim;
    config.spec.Validate();
    return config;
  }
  return RopeFromHfConfigFile(options.hf_config);
}

std::string SpecName(const SpecOptions& options, const RopeSpec& spec) {
  std::string name = options.hf_config.empty()
                         ? "theta " + FormatValue(spec.theta) + ", head_dim " + std::to_string(spec.head_dim)
                         : std::filesystem::path(options.hf_config).stem().string();
  return name;
}

void CheckOut(const std::string& out, const char* op) {
  if (out.empty()) return;
  Require(std::filesystem::path(out).extension() == ".png", op, "--out", out, "must end in .png");
  RequireWritableOutput(op, "--out", out);
}

std::string Short(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", value);
  return text;
}

// Bases as people write them: 10000 -> "1e4", 500000 -> "5e5", 1.5 -> "1.5".
std::string Compact(double value) {
  for (int exponent = 4; exponent <= 12; ++exponent) {
    const double scaled = value / std::pow(10.0, exponent);
    if (scaled >= 1.0 && scaled < 10.0 && scaled == std::round(scaled)) {
      return std::to_string(static_cast<int>(scaled)) + "e" + std::to_string(exponent);
    }
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", value);
  return text;
}

void Wrote(const std::string& path, bool json) { (json ? std::cerr : std::cout) << "wrote " << path << "\n"; }

// The original (training) length L of a config: its scaling's, else
// max_position_embeddings, else 4096.
std::int64_t OriginalLength(const RopeModelConfig& config) {
  std::int64_t length = OriginalContextLength(config.spec);
  if (length == 0) length = config.max_position_embeddings;
  return length == 0 ? 4096 : length;
}

}  // namespace posenc::cli::analyze
