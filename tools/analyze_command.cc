// posenc analyze dims | decay | heatmap | linear-map
//
// The numbers behind the usual pictures of positional encodings, as text,
// JSON (--json) or a PNG drawn with gnuplot (--out FILE.png):
//   dims        per RoPE pair: inv_freq, wavelength, rotations within the
//               original length, for the spec and for plain/linear/NTK/YaRN/
//               Llama-3 (and LongRoPE, given its factors) scaling with --factor
//   decay       RoFormer's upper bound on |<R_m q, R_n k>| against distance,
//               with the measured mean for all-ones and random q, k;
//               --compare adds other bases and scaling methods
//   heatmap     <p_m, p_n> of sinusoidal encodings or <R_m q, R_n k> of RoPE;
//               ALiBi's bias per head; T5's bucket of every (query, key); the
//               binary counter beside the sinusoidal table
//   linear-map  max error of p_{k+D} = T(D) p_k (sinusoidal; T also solved
//               back from the encodings) and of RoPE's relative invariance
//               in float64 and float32 (ApplyRope)
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

#include "commands.h"
#include "plot.h"
#include "posenc/alibi.h"
#include "posenc/analysis.h"
#include "posenc/error.h"
#include "posenc/rope_config.h"
#include "posenc/rope_frequencies.h"
#include "posenc/sinusoidal.h"
#include "posenc/t5_bias.h"

namespace posenc::cli {
namespace {

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

std::string ReadConfig(const std::string& path, const char* op) {
  if (std::error_code ec; std::filesystem::is_directory(path, ec)) {
    ThrowError(op, "--hf-config", FormatValue(path), "is a directory, not a config.json file");
  }
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    ThrowError(op, "--hf-config", FormatValue(path), std::string("cannot be read: ") + std::strerror(errno));
  }
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

RopeModelConfig LoadSpec(const SpecOptions& options, const char* op) {
  if (options.hf_config.empty()) {
    RopeModelConfig config;
    config.spec.theta = options.theta;
    config.spec.head_dim = options.head_dim;
    config.spec.Validate();
    return config;
  }
  try {
    return RopeFromHfConfig(ReadConfig(options.hf_config, op));
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.find(options.hf_config) != std::string::npos) throw;
    throw Error(options.hf_config + ": " + what);  // say which file is wrong
  }
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

// ---- dims -----------------------------------------------------------------

struct DimsOptions {
  SpecOptions spec;
  std::int64_t length = 0;
  double factor = 8.0;
  std::vector<double> longrope_factors;
  bool json = false;
  std::string out;
};

// The original (training) length L of a config: its scaling's, else
// max_position_embeddings, else 4096.
std::int64_t OriginalLength(const RopeModelConfig& config) {
  std::int64_t length = OriginalContextLength(config.spec);
  if (length == 0) length = config.max_position_embeddings;
  return length == 0 ? 4096 : length;
}

// "linear x8", "longrope (long factors)", "plain".
std::string MethodLabel(const RopeDimsMethod& m) {
  if (m.method == "plain") return "plain";
  if (m.method == "longrope") return "longrope (long factors, beyond L)";
  return m.method + " x" + FormatValue(m.factor);
}

Json DimsJson(const std::vector<RopeDim>& dims) {
  Json list = Json::array();
  for (const RopeDim& d : dims) {
    list.push_back({{"index", d.index}, {"inv_freq", d.inv_freq}, {"wavelength", d.wavelength},
                    {"rotations", d.rotations}});
  }
  return list;
}

void RunDims(const DimsOptions& o) {
  constexpr const char* kOp = "analyze dims";
  CheckOut(o.out, kOp);
  Require(o.length >= 0, kOp, "--length", o.length, "must be > 0 (0: from the config, else 4096)");
  const RopeModelConfig config = LoadSpec(o.spec, kOp);
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
    std::printf("RoPE pairs of %s (%s), original length L = %lld\n", name.c_str(),
                dims.configured.method.c_str(), static_cast<long long>(length));
    std::printf(" pair      inv_freq   wavelength (tokens)   rotations in L\n");
    for (const RopeDim& d : dims.configured.dims) {
      std::printf("%5lld  %12.6e  %20.3f  %15.4f\n", static_cast<long long>(d.index), d.inv_freq,
                  d.wavelength, d.rotations);
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
  wavelength.reference_lines.push_back({static_cast<double>(length), "original length L = " + std::to_string(length)});
  LinePlot rotations = panel("(b) rotations within L = L / wavelength (dashed: one turn; colours as in (a))",
                             "full turns within L tokens (log scale)", &RopeDim::rotations);
  rotations.key_position = "off";
  rotations.reference_lines.push_back({1.0, "one turn"});
  DrawLinePlotGrid({wavelength, rotations},
                   "RoPE pairs of " + name + ": which turn fully within L = " + std::to_string(length) +
                       (dims.comparisons.empty() ? std::string()
                                                 : " (comparisons with factor " + FormatValue(o.factor) + ")"),
                   2, 820, 640, o.out);
  Wrote(o.out, o.json);
}

// ---- decay ----------------------------------------------------------------

struct DecayOptions {
  SpecOptions spec;
  RopeDecayOptions decay{.max_distance = 1024, .step = 1, .distances = {}, .samples = 32, .seed = 0};
  bool compare = false;  // also other bases and scaling methods, on a log axis
  double factor = 4.0;   // scaling factor of the compared methods
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
    specs.push_back({base + ", LongRoPE long factors", with(configured.theta, long_set)});
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
  const RopeModelConfig config = LoadSpec(o.spec, kOp);
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
      std::printf("%9lld  %11.5f  %17.5f  %19.5f\n", static_cast<long long>(p.distance), p.bound, p.ones,
                  p.random);
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
                    {}, {}, true, "lines lw 1 lc rgb '#2ca02c'"};
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
      PlotSeries s{comparisons[i].label, {}, {}, false,
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

// ---- heatmap --------------------------------------------------------------

struct HeatmapOptions {
  std::string kind;
  SpecOptions spec;
  std::int64_t dim = 64;
  double base = 10000.0;
  std::int64_t positions = 128;
  std::string vectors = "ones";
  std::uint64_t seed = 0;
  std::int64_t heads = 8;          // alibi
  double max_bias = 8.0;           // alibi
  std::int64_t num_buckets = 32;   // t5
  std::int64_t max_distance = 128; // t5
  std::string direction = "bidirectional";  // t5
  bool json = false;
  std::string out;
};

// ALiBi: one [positions, positions] bias per head, drawn side by side on a
// shared colour range.
void RunAlibiHeatmap(const HeatmapOptions& o) {
  constexpr const char* kOp = "analyze heatmap";
  Require(o.positions > 0 && o.positions <= 4096, kOp, "--positions", o.positions, "must be in [1, 4096]");
  Require(o.heads <= 64, kOp, "--heads", o.heads, "must be <= 64");
  const AlibiSpec spec{.heads = o.heads, .max_bias = o.max_bias};
  const std::vector<double> slopes = AlibiSlopes(spec);
  const std::vector<double> bias = AlibiBias(spec, o.positions, o.positions, 0);
  const auto n = static_cast<std::size_t>(o.positions * o.positions);
  if (o.json) {
    Json heads = Json::array();
    for (std::int64_t h = 0; h < o.heads; ++h) {
      Json matrix = Json::array();
      for (std::int64_t r = 0; r < o.positions; ++r) {
        auto begin = bias.begin() + static_cast<std::ptrdiff_t>(h * o.positions * o.positions + r * o.positions);
        matrix.push_back(std::vector<double>(begin, begin + static_cast<std::ptrdiff_t>(o.positions)));
      }
      heads.push_back({{"head", h}, {"slope", slopes[static_cast<std::size_t>(h)]}, {"matrix", matrix}});
    }
    Json j;
    j["kind"] = "alibi";
    j["positions"] = o.positions;
    j["heads"] = heads;
    std::cout << j.dump() << "\n";
  } else if (o.out.empty()) {
    std::printf("ALiBi bias -slope * |m - n|, %lld heads, max_bias %g, positions 0..%lld\n",
                static_cast<long long>(o.heads), o.max_bias, static_cast<long long>(o.positions - 1));
    for (std::int64_t h = 0; h < o.heads; ++h) {
      std::printf("head %lld: slope %.17g\n", static_cast<long long>(h), slopes[static_cast<std::size_t>(h)]);
    }
  }
  if (!o.out.empty()) {
    double lo = 0.0;
    for (double v : bias) lo = std::min(lo, v);
    std::vector<Heatmap> maps;
    for (std::int64_t h = 0; h < o.heads; ++h) {
      Heatmap map;
      map.rows = map.cols = o.positions;
      auto begin = bias.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(h) * n);
      map.values.assign(begin, begin + static_cast<std::ptrdiff_t>(n));
      map.title = "head " + std::to_string(h) + ", slope " + Short(slopes[static_cast<std::size_t>(h)]);
      map.x_label = "key position n (tokens)";
      map.y_label = "query position m (tokens)";
      map.value_label = "bias added to the logit";
      map.range_min = lo;
      map.range_max = 0.0;
      maps.push_back(std::move(map));
    }
    DrawHeatmapGrid(maps,
                    "ALiBi bias -slope * |m - n| per head (" + std::to_string(o.heads) + " heads, max_bias " +
                        Short(o.max_bias) + ")",
                    4, o.out);
    Wrote(o.out, o.json);
  }
}

// Seed 000's binary-counter view: the bits of each position beside its
// sinusoidal encoding. Low bits and low dimensions alternate fast, high ones
// slowly; the sinusoids are a smooth, continuous counter.
void RunBinaryHeatmap(const HeatmapOptions& o) {
  constexpr const char* kOp = "analyze heatmap";
  Require(o.positions > 0 && o.positions <= 4096, kOp, "--positions", o.positions, "must be in [1, 4096]");
  const SinusoidalSpec spec{.dim = o.dim, .base = o.base};
  spec.Validate();
  std::int64_t bits = 1;
  while ((std::int64_t{1} << bits) < o.positions) ++bits;  // enough bits to count to positions - 1
  const std::vector<double> digits = BinaryDigits(o.positions, bits);
  const std::vector<double> table = SinusoidalTable(spec, 0, o.positions);
  std::vector<double> bit_period, wavelength;
  for (std::int64_t b = 0; b < bits; ++b) bit_period.push_back(std::ldexp(1.0, static_cast<int>(b + 1)));
  for (double w : SinusoidalInvFreq(spec)) wavelength.push_back(2.0 * std::numbers::pi / w);
  const auto rows = [&](const std::vector<double>& values, std::int64_t cols) {
    Json matrix = Json::array();
    for (std::int64_t r = 0; r < o.positions; ++r) {
      auto begin = values.begin() + static_cast<std::ptrdiff_t>(r * cols);
      matrix.push_back(std::vector<double>(begin, begin + static_cast<std::ptrdiff_t>(cols)));
    }
    return matrix;
  };
  if (o.json) {
    Json j;
    j["kind"] = "binary";
    j["positions"] = o.positions;
    j["bits"] = rows(digits, bits);
    j["bit_period"] = bit_period;
    j["dim"] = o.dim;
    j["base"] = o.base;
    j["table"] = rows(table, o.dim);
    j["pair_wavelength"] = wavelength;
    std::cout << j.dump() << "\n";
  } else if (o.out.empty()) {
    std::printf("binary counter vs sinusoidal encoding (dim %lld, base %g), positions 0..%lld\n",
                static_cast<long long>(o.dim), o.base, static_cast<long long>(o.positions - 1));
    std::printf("bit b: period 2^(b+1) tokens;  pair k: wavelength 2 pi / w_k tokens\n");
    for (std::size_t i = 0; i < std::max(bit_period.size(), wavelength.size()); ++i) {
      std::printf("%4zu  %12s  %14s\n", i, i < bit_period.size() ? Short(bit_period[i]).c_str() : "",
                  i < wavelength.size() ? Short(wavelength[i]).c_str() : "");
    }
  }
  if (o.out.empty()) return;
  Heatmap counter;
  counter.rows = o.positions;
  counter.cols = bits;
  counter.values = digits;
  counter.title = "bits of k (bit b flips every 2^b tokens)";
  counter.x_label = "bit b (0 = least significant)";
  counter.y_label = "position k (tokens)";
  counter.value_label = "bit value (0 or 1)";
  counter.range_min = 0.0;
  counter.range_max = 1.0;
  counter.square_cells = false;
  counter.palette = "defined (0 '#f7f7f7', 1 '#08306b')";
  Heatmap sinusoid;
  sinusoid.rows = o.positions;
  sinusoid.cols = o.dim;
  sinusoid.values = table;
  sinusoid.title = "sinusoidal p_k, dim " + std::to_string(o.dim) + ", base " + Compact(o.base) +
                   " (" + std::string(SinusoidalOrderName(spec.order)) + " sin, cos)";
  sinusoid.x_label = "dimension i (pair i/2; wavelength grows with i)";
  sinusoid.y_label = "";  // shared with the left panel, whose colour box sits where it would go
  sinusoid.value_label = "encoding value";
  sinusoid.diverging = true;
  sinusoid.range_min = -1.0;
  sinusoid.range_max = 1.0;
  sinusoid.square_cells = false;
  DrawHeatmapGrid({counter, sinusoid}, "Binary counter vs sinusoidal encoding: fast low digits, slow high digits", 2,
                  o.out, 680, 760);
  Wrote(o.out, o.json);
}

void RunHeatmap(const HeatmapOptions& o) {
  constexpr const char* kOp = "analyze heatmap";
  CheckOut(o.out, kOp);
  Require(o.kind == "sinusoidal" || o.kind == "rope" || o.kind == "alibi" || o.kind == "t5" || o.kind == "binary",
          kOp, "--kind", o.kind, "must be sinusoidal, rope, alibi, t5 or binary");
  if (o.kind == "alibi") return RunAlibiHeatmap(o);
  if (o.kind == "binary") return RunBinaryHeatmap(o);
  Require(o.vectors == "ones" || o.vectors == "random", kOp, "--vectors", o.vectors,
          "must be ones or random");
  Heatmap map;
  map.rows = map.cols = o.positions;
  if (o.kind == "t5") {
    // below
  } else if (o.kind == "sinusoidal") {
    SinusoidalSpec spec{.dim = o.dim, .base = o.base};
    map.values = SinusoidalDotMatrix(spec, o.positions);
    map.title = "Sinusoidal <p_m, p_n>, dim " + std::to_string(o.dim) + ", base " + FormatValue(o.base);
    map.x_label = "position n (tokens)";
    map.y_label = "position m (tokens)";
    map.value_label = "dot product <p_m, p_n>";
  } else {
    const RopeModelConfig config = LoadSpec(o.spec, kOp);
    const auto d = static_cast<std::size_t>(config.spec.head_dim);
    std::vector<double> q(d, 1.0), k(d, 1.0);
    if (o.vectors == "random") {
      std::mt19937_64 rng(o.seed);
      std::normal_distribution<double> normal(0.0, 1.0);
      for (double& x : q) x = normal(rng);
      for (double& x : k) x = normal(rng);
    }
    map.values = RopeScoreMatrix(config.spec, q, k, o.positions);
    map.title = "RoPE scores <R_m q, R_n k>, " + o.vectors + " q, k: " + SpecName(o.spec, config.spec);
    map.x_label = "key position n (tokens)";
    map.y_label = "query position m (tokens)";
    map.value_label = "score <R_m q, R_n k>";
  }
  map.diverging = true;
  if (o.kind == "t5") {
    Require(o.direction == "bidirectional" || o.direction == "causal", kOp, "--direction", o.direction,
            "must be bidirectional or causal");
    Require(o.positions <= 8192, kOp, "--positions", o.positions, "must be <= 8192");
    const T5BucketSpec spec{.num_buckets = o.num_buckets,
                            .max_distance = o.max_distance,
                            .direction = o.direction == "causal" ? T5Direction::kCausal : T5Direction::kBidirectional};
    const std::vector<std::int32_t> buckets = T5BucketMatrix(spec, o.positions, o.positions, 0);
    map.values.assign(buckets.begin(), buckets.end());
    map.title = "T5 relative position buckets, " + o.direction + ", " + std::to_string(o.num_buckets) +
                " buckets, max_distance " + std::to_string(o.max_distance);
    map.x_label = "key position n (tokens)";
    map.y_label = "query position m (tokens)";
    map.value_label = "bucket index";
    map.diverging = false;
    map.range_min = 0.0;
    map.range_max = static_cast<double>(o.num_buckets - 1);
  }
  if (o.json) {
    Json matrix = Json::array();
    for (std::int64_t r = 0; r < map.rows; ++r) {
      auto begin = map.values.begin() + static_cast<std::ptrdiff_t>(r * map.cols);
      std::vector<double> row(begin, begin + static_cast<std::ptrdiff_t>(map.cols));
      if (o.kind == "t5") {  // bucket indices as integers
        matrix.push_back(std::vector<std::int64_t>(row.begin(), row.end()));
      } else {
        matrix.push_back(row);
      }
    }
    Json j;
    j["kind"] = o.kind;
    j["positions"] = o.positions;
    j["matrix"] = matrix;
    std::cout << j.dump() << "\n";
  } else if (o.out.empty()) {
    std::printf("%s\n", map.title.c_str());
    for (std::int64_t r = 0; r < map.rows; ++r) {
      for (std::int64_t c = 0; c < map.cols; ++c) {
        std::printf("%s%.6g", c ? " " : "", map.values[static_cast<std::size_t>(r * map.cols + c)]);
      }
      std::printf("\n");
    }
  }
  if (!o.out.empty()) {
    DrawHeatmap(map, o.out);
    Wrote(o.out, o.json);
  }
}

// ---- linear-map -----------------------------------------------------------

struct LinearMapOptions {
  std::int64_t dim = 128;
  double base = 10000.0;
  std::int64_t positions = 512;
  std::int64_t max_shift = 64;
  SpecOptions spec;
  std::int64_t max_position = 4096;
  std::int64_t step = 64;
  std::uint64_t seed = 0;
  bool json = false;
  std::string out;
};

void RunLinearMap(const LinearMapOptions& o) {
  constexpr const char* kOp = "analyze linear-map";
  CheckOut(o.out, kOp);
  const SinusoidalSpec sin_spec{.dim = o.dim, .base = o.base};
  const SinusoidalLinearMap map = ComputeSinusoidalLinearMap(sin_spec, o.positions, o.max_shift);
  const RopeModelConfig config = LoadSpec(o.spec, kOp);
  const RopeInvariance inv = ComputeRopeInvariance(config.spec, o.max_position, o.step, o.seed);
  const std::string name = SpecName(o.spec, config.spec);
  if (o.json) {
    Json j;
    j["sinusoidal"] = {{"dim", o.dim},
                       {"base", o.base},
                       {"positions", map.positions},
                       {"max_shift", map.max_shift},
                       {"max_error", map.max_error},
                       {"error_by_shift", map.error_by_shift},
                       {"max_solved_deviation", map.max_solved_deviation},
                       {"solved_deviation_by_shift", map.solved_deviation_by_shift}};
    j["rope"] = {{"spec", name},
                 {"max_position", inv.max_position},
                 {"step", inv.step},
                 {"max_error_f64", inv.max_error_f64},
                 {"max_error_f32", inv.max_error_f32},
                 {"max_abs_score", inv.max_abs_score}};
    std::cout << j.dump() << "\n";
  } else if (o.out.empty()) {
    std::printf("sinusoidal p_{k+D} = T(D) p_k, dim %lld: max error %.3e over k < %lld, |D| <= %lld\n",
                static_cast<long long>(o.dim), map.max_error, static_cast<long long>(map.positions),
                static_cast<long long>(map.max_shift));
    std::printf("  T(D) solved by least squares from k < %lld/2 and from k >= %lld/2: max |T_solved - T| %.3e\n",
                static_cast<long long>(map.positions), static_cast<long long>(map.positions),
                map.max_solved_deviation);
    std::printf("RoPE <R_m q, R_n k> = <R_{m-n} q, k>, %s, m, n <= %lld step %lld (|score| <= %.4g):\n",
                name.c_str(), static_cast<long long>(inv.max_position), static_cast<long long>(inv.step),
                inv.max_abs_score);
    std::printf("  max error float64 %.3e, float32 (ApplyRope) %.3e\n", inv.max_error_f64, inv.max_error_f32);
  }
  if (!o.out.empty()) {
    LinePlot plot;
    plot.title = "Shift maps: sinusoidal T(D) (dim " + std::to_string(o.dim) + ") and RoPE invariance (" +
                 name + ")";
    plot.x_label = "shift D (tokens)";
    plot.y_label = "max absolute error (log scale)";
    plot.log_y = true;
    plot.key_position = "inside center right";
    PlotSeries s{"sinusoidal |T(D) p_k - p_{k+D}|, max over k < " + std::to_string(o.positions), {}, {}, false,
                 "linespoints pt 7 ps 0.5 lw 1"};
    // T(0) is the identity, error exactly 0: left out of the log axis.
    for (std::size_t i = 0; i < map.error_by_shift.size(); ++i) {
      s.x.push_back(static_cast<double>(static_cast<std::int64_t>(i) - map.max_shift));
      s.y.push_back(map.error_by_shift[i]);
    }
    plot.series.push_back(s);
    PlotSeries solved{"T(D) solved by least squares from either half of k, max |T_solved - T(D)|", {}, {}, false,
                      "linespoints pt 5 ps 0.5 lw 1"};
    for (std::size_t i = 0; i < map.solved_deviation_by_shift.size(); ++i) {
      solved.x.push_back(static_cast<double>(static_cast<std::int64_t>(i) - map.max_shift));
      solved.y.push_back(map.solved_deviation_by_shift[i]);
    }
    plot.series.push_back(solved);
    plot.reference_lines.push_back(
        {std::max(inv.max_error_f64, 1e-18), "RoPE <R_m q, R_n k> - <R_{m-n} q, k>, float64: " + Short(inv.max_error_f64)});
    plot.reference_lines.push_back(
        {std::max(inv.max_error_f32, 1e-18), "same, float32 through ApplyRope: " + Short(inv.max_error_f32)});
    DrawLinePlot(plot, o.out);
    Wrote(o.out, o.json);
  }
}

}  // namespace

void AddAnalyzeCommands(CLI::App& app) {
  CLI::App* analyze = app.add_subcommand("analyze", "the numbers behind the pictures: dims, decay, heatmap, linear-map");
  analyze->require_subcommand(1);

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
  c->add_option("--compare-points", decay->compare_points, "--compare: log-spaced distances")
      ->capture_default_str();
  c->add_flag("--json", decay->json, "print JSON");
  c->add_option("--out", decay->out, "draw a PNG (gnuplot)");
  c->callback([decay] { RunDecay(*decay); });

  auto heat = std::make_shared<HeatmapOptions>();
  CLI::App* h = analyze->add_subcommand(
      "heatmap", "<p_m, p_n> (sinusoidal), <R_m q, R_n k> (rope), ALiBi bias per head, T5 buckets, binary counter");
  h->add_option("--kind", heat->kind,
                "sinusoidal (<p_m, p_n>), rope (<R_m q, R_n k>), alibi (bias per head), t5 (buckets), "
                "binary (bits of k beside sinusoidal p_k)")
      ->required();
  heat->spec.Add(h);
  h->add_option("--dim", heat->dim, "sinusoidal, binary: encoding dimension")->capture_default_str();
  h->add_option("--base", heat->base, "sinusoidal base")->capture_default_str();
  h->add_option("--positions", heat->positions, "positions 0 .. N-1")->capture_default_str();
  h->add_option("--vectors", heat->vectors, "rope q, k: ones or random")->capture_default_str();
  h->add_option("--seed", heat->seed, "random seed")->capture_default_str();
  h->add_option("--heads", heat->heads, "alibi: head count")->capture_default_str();
  h->add_option("--max-bias", heat->max_bias, "alibi: max_bias (8 in the paper)")->capture_default_str();
  h->add_option("--num-buckets", heat->num_buckets, "t5: buckets")->capture_default_str();
  h->add_option("--max-distance", heat->max_distance, "t5: max_distance")->capture_default_str();
  h->add_option("--direction", heat->direction, "t5: bidirectional or causal")->capture_default_str();
  h->add_flag("--json", heat->json, "print JSON");
  h->add_option("--out", heat->out, "draw a PNG (gnuplot)");
  h->callback([heat] { RunHeatmap(*heat); });

  auto lin = std::make_shared<LinearMapOptions>();
  CLI::App* l = analyze->add_subcommand("linear-map", "errors of p_{k+D} = T(D) p_k and of RoPE's relative invariance");
  l->add_option("--dim", lin->dim, "sinusoidal dimension")->capture_default_str();
  l->add_option("--base", lin->base, "sinusoidal base")->capture_default_str();
  l->add_option("--positions", lin->positions, "sinusoidal positions k")->capture_default_str();
  l->add_option("--max-shift", lin->max_shift, "largest |D|")->capture_default_str();
  lin->spec.Add(l);
  l->add_option("--max-position", lin->max_position, "RoPE grid: largest m, n")->capture_default_str();
  l->add_option("--step", lin->step, "RoPE grid step")->capture_default_str();
  l->add_option("--seed", lin->seed, "random q, k seed")->capture_default_str();
  l->add_flag("--json", lin->json, "print JSON");
  l->add_option("--out", lin->out, "draw a PNG (gnuplot)");
  l->callback([lin] { RunLinearMap(*lin); });
}

}  // namespace posenc::cli
