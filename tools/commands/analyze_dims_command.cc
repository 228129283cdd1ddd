// posenc analyze dims: per RoPE pair, inv_freq, wavelength and rotations within L, for the spec and comparison methods.
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
#include "posenc/rope_config.h"
#include "posenc/rope_frequencies.h"
#include "posenc/sinusoidal.h"
#include "posenc/t5_bias.h"

#include "commands/analyze_common.h"

namespace posenc::cli::analyze {
namespace {

// ---- dims -----------------------------------------------------------------

struct DimsOptions {
  SpecOptions spec;
  std::int64_t length = 0;
  double factor = 8.0;
  std::vector<double> longrope_factors;
  bool json = false;
  std::string out;
};

// "linear x8", "longrope (long factors)", "plain".
std::string MethodLabel(const RopeDimsMethod& m) {
  if (m.method == "plain") return "plain";
  if (m.method == "longrope") return "longrope (long factors, beyond L)";
  return m.method + " x" + FormatValue(m.factor);
}

Json DimsJson(const std::vector<RopeDim>& dims) {
  Json list = Json::array();
  for (const RopeDim& d : dims) {
    list.push_back(
        {{"index", d.index}, {"inv_freq", d.inv_freq}, {"wavelength", d.wavelength}, {"rotations", d.rotations}});
  }
  return list;
}

void RunDims(const DimsOptions& o) {
  constexpr const char* kOp = "analyze dims";
  CheckOut(o.out, kOp);
  Require(o.length >= 0, kOp, "--length", o.length, "must be > 0 (0: from the config, else 4096)");
  const RopeModelConfig config = LoadSpec(o.spec);
  const std::int64_t length = o.length > 0 ? o.length : OriginalLength(config);
  const RopeDims dims = ComputeRopeDims(config.spec, length, o.factor, o.longrope_factors);
  const std::string name = SpecName(o.spec, config.spec);

  if (o.json) {
    Json j;
    j["original_length"] = dims.original_length;
    j["method"] = dims.configured.method;
    j["dims"] = DimsJson(dims.configured.dims);
    Json comparisons = Json::array();
    for (const auto& m : dims.comparisons) {
      comparisons.push_back({{"method", m.method}, {"factor", m.factor}, {"dims", DimsJson(m.dims)}});
    }
    j["comparisons"] = comparisons;
    std::cout << j.dump() << "\n";
  } else if (o.out.empty()) {
    std::printf("RoPE pairs of %s (%s), original length L = %lld\n", name.c_str(), dims.configured.method.c_str(),
                static_cast<long long>(length));
    std::printf(" pair      inv_freq   wavelength (tokens)   rotations in L\n");
    for (const RopeDim& d : dims.configured.dims) {
      std::printf("%5lld  %12.6e  %20.3f  %15.4f\n", static_cast<long long>(d.index), d.inv_freq, d.wavelength,
                  d.rotations);
    }
    if (!dims.comparisons.empty()) {
      // Rotations within L per method: >= 1 turns fully (seen in training,
      // extrapolates), < 1 never completes a turn (must interpolate).
      std::printf("\nrotations within L per method (< 1: the pair never completes a turn within L)\n pair");
      for (const auto& m : dims.comparisons) std::printf("  %12s", m.method.c_str());
      std::printf("\n");
      for (std::size_t i = 0; i < dims.configured.dims.size(); ++i) {
        std::printf("%5zu", i);
        for (const auto& m : dims.comparisons) std::printf("  %12.4g", m.dims[i].rotations);
        std::printf("\n");
      }
    }
  }
  if (o.out.empty()) return;
  // (a) wavelength against L; (b) the same as rotations within L, against
  // one full turn: pairs above the line were trained on every angle.
  const bool longrope = std::holds_alternative<LongRopeScaling>(config.spec.scaling);
  const std::string configured_label =
      "configured (" + dims.configured.method + (longrope ? ", short factors, up to L)" : ")");
  const auto panel = [&](const std::string& title, const std::string& y_label, double RopeDim::*field) {
    LinePlot plot;
    plot.title = title;
    plot.x_label = "pair index i (frequency theta_i, fastest first)";
    plot.y_label = y_label;
    plot.log_y = true;
    const auto series = [&](const RopeDimsMethod& m, const std::string& label, const std::string& style) {
      PlotSeries s{label, {}, {}, false, style};
      for (const RopeDim& d : m.dims) {
        s.x.push_back(static_cast<double>(d.index));
        s.y.push_back(d.*field);
      }
      return s;
    };
    for (const auto& m : dims.comparisons) plot.series.push_back(series(m, MethodLabel(m), "lines lw 2"));
    plot.series.push_back(series(dims.configured, configured_label, "points pt 7 ps 0.8 lc rgb 'black'"));
    return plot;
  };
  LinePlot wavelength = panel("(a) wavelength 2pi/theta_i against the original length L",
                              "wavelength (tokens per turn, log scale)", &RopeDim::wavelength);
  wavelength.key_position = "inside top left";
  wavelength.reference_lines.emplace_back(static_cast<double>(length), "original length L = " + std::to_string(length));
  LinePlot rotations = panel("(b) rotations within L = L / wavelength (dashed: one turn; colours as in (a))",
                             "full turns within L tokens (log scale)", &RopeDim::rotations);
  rotations.key_position = "off";
  rotations.reference_lines.emplace_back(1.0, "one turn");
  DrawLinePlotGrid(
      {wavelength, rotations},
      "RoPE pairs of " + name + ": which turn fully within L = " + std::to_string(length) +
          (dims.comparisons.empty() ? std::string() : " (comparisons with factor " + FormatValue(o.factor) + ")"),
      2, 820, 640, o.out);
  Wrote(o.out, o.json);
}

}  // namespace

void AddDims(CLI::App& analyze_app) {
  CLI::App* analyze = &analyze_app;
  auto dims = std::make_shared<DimsOptions>();
  CLI::App* d = analyze->add_subcommand("dims", "per RoPE pair: inv_freq, wavelength, rotations within L");
  dims->spec.Add(d);
  d->add_option("--length", dims->length, "original length L (0: from the config, else 4096)");
  d->add_option("--factor", dims->factor, "comparison factor for linear/NTK/YaRN/Llama-3/LongRoPE (0: none)")
      ->capture_default_str();
  d->add_option("--longrope-factors", dims->longrope_factors,
                "LongRoPE per-pair factors to compare, comma-separated (default: the config's long_factor "
                "when it is a LongRoPE config; else no LongRoPE comparison)")
      ->delimiter(',');
  d->add_flag("--json", dims->json, "print JSON");
  d->add_option("--out", dims->out, "draw a PNG (gnuplot)");
  d->callback([dims] { RunDims(*dims); });
}

}  // namespace posenc::cli::analyze
