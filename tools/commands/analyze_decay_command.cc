// posenc analyze decay: RoFormer's bound and measured |<R_m q, R_n k>| against distance (--compare: bases and scaling
// methods).
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

// ---- decay ----------------------------------------------------------------

struct DecayOptions {
  SpecOptions spec;
  RopeDecayOptions decay{.max_distance = 1024, .step = 1, .distances = {}, .samples = 32, .seed = 0};
  bool compare = false;     // also other bases and scaling methods, on a log axis
  double factor = 4.0;      // scaling factor of the compared methods
  std::int64_t length = 0;  // their original length (0: from the config)
  std::int64_t compare_max_distance = 65536;
  std::int64_t compare_points = 400;
  bool json = false;
  std::string out;
};

// One curve of the comparison: a spec with the configured rotary dimension
// and another base or scaling method.
struct DecayComparison {
  std::string label;
  RopeDecay decay;
};

// The configured spec, plain RoPE at bases 1e4, 1e5 and 1e6, and linear,
// NTK, YaRN and Llama-3 scaling by `factor` of the configured base (and
// LongRoPE's long factors for a LongRoPE config); tables equal to one
// already listed are left out.
std::vector<DecayComparison> CompareDecay(const RopeModelConfig& config, const std::string& name,
                                          const DecayOptions& o) {
  constexpr const char* kOp = "analyze decay";
  Require(std::isfinite(o.factor) && o.factor >= 1.0, kOp, "--factor", o.factor, "must be a finite number >= 1");
  Require(o.length >= 0, kOp, "--length", o.length, "must be > 0 (0: from the config, else 4096)");
  const RopeSpec& configured = config.spec;
  const std::int64_t length = o.length > 0 ? o.length : OriginalLength(config);
  const double f = o.factor;
  const auto with = [&](double theta, RopeScaling scaling) {
    RopeSpec spec = configured;
    spec.theta = theta;
    spec.scaling = std::move(scaling);
    return spec;
  };
  YarnScaling yarn;
  yarn.factor = f;
  yarn.original_max_position = length;
  Llama3Scaling llama3;
  llama3.factor = f;
  llama3.original_max_position = length;
  const std::string x = " x" + FormatValue(f);
  const std::string base = "theta " + Compact(configured.theta);
  std::vector<std::pair<std::string, RopeSpec>> specs = {
      {"configured: " + name + " (" +
           (std::holds_alternative<NoScaling>(configured.scaling) ? std::string("theta ") + Compact(configured.theta)
                                                                  : std::string(RopeScalingName(configured.scaling))) +
           ")",
       configured},
      {"plain, theta 1e4", with(1e4, NoScaling{})},
      {"plain, theta 1e5", with(1e5, NoScaling{})},
      {"plain, theta 1e6", with(1e6, NoScaling{})},
      {base + ", linear" + x, with(configured.theta, LinearScaling{f})},
      {base + ", NTK alpha " + FormatValue(f), with(configured.theta, NtkAwareScaling{f})},
      {base + ", YaRN" + x + " (L " + std::to_string(length) + ")", with(configured.theta, yarn)},
      {base + ", Llama-3" + x + " (L " + std::to_string(length) + ")", with(configured.theta, llama3)},
  };
  if (const auto* own = std::get_if<LongRopeScaling>(&configured.scaling)) {
    LongRopeScaling long_set = *own;
    long_set.short_factor = own->long_factor;  // the long set at every length
    specs.emplace_back(base + ", LongRoPE long factors", with(configured.theta, long_set));
  }
  RopeDecayOptions options = o.decay;
  options.distances = LogSpacedDistances(o.compare_max_distance, o.compare_points);
  std::vector<DecayComparison> out;
  std::vector<std::vector<double>> seen;
  for (const auto& [label, spec] : specs) {
    std::vector<double> inv_freq = ComputeRopeFrequencies(spec).inv_freq;
    if (std::find(seen.begin(), seen.end(), inv_freq) != seen.end()) continue;
    seen.push_back(std::move(inv_freq));
    out.push_back({label, ComputeRopeDecay(spec, options)});
  }
  return out;
}

Json DecayPointsJson(const RopeDecay& decay) {
  Json points = Json::array();
  for (const auto& p : decay.points) {
    points.push_back({{"distance", p.distance}, {"bound", p.bound}, {"ones", p.ones}, {"random", p.random}});
  }
  return points;
}

void RunDecay(const DecayOptions& o) {
  constexpr const char* kOp = "analyze decay";
  CheckOut(o.out, kOp);
  const RopeModelConfig config = LoadSpec(o.spec);
  const RopeDecay decay = ComputeRopeDecay(config.spec, o.decay);
  const std::string name = SpecName(o.spec, config.spec);
  const std::vector<DecayComparison> comparisons =
      o.compare ? CompareDecay(config, name, o) : std::vector<DecayComparison>{};
  if (o.json) {
    Json j;
    j["rotary_dim"] = decay.rotary_dim;
    j["samples"] = o.decay.samples;
    j["seed"] = o.decay.seed;
    j["points"] = DecayPointsJson(decay);
    if (o.compare) {
      Json c = Json::array();
      for (const auto& comparison : comparisons) {
        c.push_back({{"label", comparison.label}, {"points", DecayPointsJson(comparison.decay)}});
      }
      j["comparisons"] = c;
    }
    std::cout << j.dump() << "\n";
  } else if (o.out.empty()) {
    std::printf("RoPE long-range decay of %s (rotary_dim %lld)\n", name.c_str(),
                static_cast<long long>(decay.rotary_dim));
    std::printf(" distance        bound   mean |score| ones   mean |score| random\n");
    for (const auto& p : decay.points) {
      std::printf("%9lld  %11.5f  %17.5f  %19.5f\n", static_cast<long long>(p.distance), p.bound, p.ones, p.random);
    }
    for (const auto& comparison : comparisons) {
      std::printf("\n%s: bound / all-ones / random at distances", comparison.label.c_str());
      const auto& points = comparison.decay.points;
      for (std::size_t i = 0; i < points.size(); i += std::max<std::size_t>(1, points.size() / 8)) {
        std::printf("  %lld: %.3g / %.3g / %.3g", static_cast<long long>(points[i].distance), points[i].bound,
                    points[i].ones, points[i].random);
      }
      std::printf("\n");
    }
  }
  if (o.out.empty()) return;

  LinePlot main;
  main.title = o.compare ? "(a) " + name + ": bound and measured scores" : "RoPE long-range decay: " + name;
  main.x_label = "relative distance n - m (tokens)";
  main.y_label = "RoFormer bound (1/(d/2)) sum_j |S_j|";
  main.y2_label = "mean |<R_n q, R_m k>| (score units)";
  PlotSeries bound{"upper bound (left axis)", {}, {}, false, "lines lw 2 lc rgb '#1f77b4'"};
  PlotSeries ones{"all-ones q, k (right axis)", {}, {}, true, "lines lw 1 lc rgb '#d62728'"};
  PlotSeries random{"random N(0,1) q, k, mean of " + std::to_string(o.decay.samples) + " (right axis)",
                    {},
                    {},
                    true,
                    "lines lw 1 lc rgb '#2ca02c'"};
  for (const auto& p : decay.points) {
    const double x = static_cast<double>(p.distance);
    bound.x.push_back(x), bound.y.push_back(p.bound);
    ones.x.push_back(x), ones.y.push_back(p.ones);
    random.x.push_back(x), random.y.push_back(p.random);
  }
  main.series = {bound, ones, random};
  if (!o.compare) {
    DrawLinePlot(main, o.out);
    Wrote(o.out, o.json);
    return;
  }
  // (b)-(d): one colour per spec, the same in every panel, log distance.
  const auto panel = [&](const std::string& title, const std::string& y_label, double RopeDecayPoint::*field) {
    LinePlot plot;
    plot.title = title;
    plot.x_label = "relative distance n - m (tokens, log scale)";
    plot.y_label = y_label;
    plot.log_x = true;
    plot.key_position = "inside top right";
    for (std::size_t i = 0; i < comparisons.size(); ++i) {
      PlotSeries s{comparisons[i].label,
                   {},
                   {},
                   false,
                   "lines lw " + std::string(i == 0 ? "3" : "1.5") + " lt " + std::to_string(i + 1)};
      for (const auto& p : comparisons[i].decay.points) {
        s.x.push_back(static_cast<double>(p.distance));
        s.y.push_back(p.*field);
      }
      plot.series.push_back(std::move(s));
    }
    return plot;
  };
  std::vector<LinePlot> panels = {
      main,
      panel("(b) RoFormer bound, bases and scaling methods", "(1/(d/2)) sum_j |S_j|", &RopeDecayPoint::bound),
      panel("(c) measured, all-ones q, k", "mean |<R_n q, R_m k>| (score units)", &RopeDecayPoint::ones),
      panel("(d) measured, random N(0,1) q, k (mean of " + std::to_string(o.decay.samples) + "; colours as in (b))",
            "mean |<R_n q, R_m k>| (score units)", &RopeDecayPoint::random),
  };
  panels[3].key_position = "off";  // the colours of (b) and (c)
  DrawLinePlotGrid(panels, "RoPE long-range decay: " + name + " (rotary_dim " + std::to_string(decay.rotary_dim) + ")",
                   2, 820, 560, o.out);
  Wrote(o.out, o.json);
}

}  // namespace

void AddDecay(CLI::App& analyze_app) {
  CLI::App* analyze = &analyze_app;
  auto decay = std::make_shared<DecayOptions>();
  CLI::App* c = analyze->add_subcommand("decay", "RoFormer decay bound and measured |q.k| against distance");
  decay->spec.Add(c);
  c->add_option("--max-distance", decay->decay.max_distance, "largest relative distance")->capture_default_str();
  c->add_option("--step", decay->decay.step, "distance step")->capture_default_str();
  c->add_option("--samples", decay->decay.samples, "random q, k pairs per distance")->capture_default_str();
  c->add_option("--seed", decay->decay.seed, "random seed")->capture_default_str();
  c->add_flag("--compare", decay->compare,
              "also bases 1e4, 1e5, 1e6 and linear, NTK, YaRN, Llama-3 (and LongRoPE) scaling of the "
              "configured base, same rotary dim, at log-spaced distances: a 4-panel PNG");
  c->add_option("--factor", decay->factor, "--compare: scaling factor")->capture_default_str();
  c->add_option("--length", decay->length, "--compare: original length L for YaRN/Llama-3 (0: from the config)");
  c->add_option("--compare-max-distance", decay->compare_max_distance, "--compare: largest distance")
      ->capture_default_str();
  c->add_option("--compare-points", decay->compare_points, "--compare: log-spaced distances")->capture_default_str();
  c->add_flag("--json", decay->json, "print JSON");
  c->add_option("--out", decay->out, "draw a PNG (gnuplot)");
  c->callback([decay] { RunDecay(*decay); });
}

}  // namespace posenc::cli::analyze
