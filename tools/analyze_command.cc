// posenc analyze dims | decay | heatmap | linear-map
//
// The numbers behind the usual pictures of positional encodings, as text,
// JSON (--json) or a PNG drawn with gnuplot (--out FILE.png):
//   dims        per RoPE pair: inv_freq, wavelength, rotations within the
//               original length, for the spec and for plain/linear/NTK/YaRN/
//               Llama-3 scaling with --factor
//   decay       RoFormer's upper bound on |<R_m q, R_n k>| against distance,
//               with the measured mean for all-ones and random q, k
//   heatmap     <p_m, p_n> of sinusoidal encodings or <R_m q, R_n k> of RoPE;
//               ALiBi's bias per head; T5's bucket of every (query, key)
//   linear-map  max error of p_{k+D} = T(D) p_k (sinusoidal) and of RoPE's
//               relative invariance in float64 and float32 (ApplyRope)
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>

#include "commands.h"
#include "plot.h"
#include "posenc/alibi.h"
#include "posenc/analysis.h"
#include "posenc/error.h"
#include "posenc/rope_config.h"
#include "posenc/rope_frequencies.h"
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

void Wrote(const std::string& path, bool json) { (json ? std::cerr : std::cout) << "wrote " << path << "\n"; }

// ---- dims -----------------------------------------------------------------

struct DimsOptions {
  SpecOptions spec;
  std::int64_t length = 0;
  double factor = 8.0;
  bool json = false;
  std::string out;
};

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
  const RopeModelConfig config = LoadSpec(o.spec, kOp);
  std::int64_t length = o.length;
  if (length == 0) length = OriginalContextLength(config.spec);
  if (length == 0) length = config.max_position_embeddings;
  if (length == 0) length = 4096;
  Require(o.length >= 0, kOp, "--length", o.length, "must be > 0 (0: from the config, else 4096)");
  const RopeDims dims = ComputeRopeDims(config.spec, length, o.factor);
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
  }
  if (!o.out.empty()) {
    LinePlot plot;
    plot.title = "RoPE wavelength per pair: " + name + " (L = " + std::to_string(length) +
                 (o.factor > 0 ? ", comparisons with factor " + FormatValue(o.factor) : std::string()) + ")";
    plot.x_label = "pair index i (frequency theta_i, fastest first)";
    plot.y_label = "wavelength 2pi/theta_i (tokens, log scale)";
    plot.log_y = true;
    plot.key_position = "top left";
    auto series = [](const RopeDimsMethod& m, const std::string& title, const std::string& style) {
      PlotSeries s{title, {}, {}, false, style};
      for (const RopeDim& d : m.dims) {
        s.x.push_back(static_cast<double>(d.index));
        s.y.push_back(d.wavelength);
      }
      return s;
    };
    for (const auto& m : dims.comparisons) {
      plot.series.push_back(series(m, m.method == "plain" ? "plain" : m.method + " x" + FormatValue(m.factor),
                                   "lines lw 2"));
    }
    plot.series.push_back(series(dims.configured, "configured (" + dims.configured.method + ")",
                                 "points pt 7 ps 0.8 lc rgb 'black'"));
    plot.reference_lines.push_back({static_cast<double>(length), "original length L = " + std::to_string(length)});
    DrawLinePlot(plot, o.out);
    Wrote(o.out, o.json);
  }
}

// ---- decay ----------------------------------------------------------------

struct DecayOptions {
  SpecOptions spec;
  RopeDecayOptions decay{.max_distance = 1024, .step = 1, .samples = 32, .seed = 0};
  bool compare = false;  // also the bound for other bases and scaling methods
  bool json = false;
  std::string out;
};

// The bound's curve for other bases and scaling methods with the same
// rotary dimension: how the base and interpolation change the decay.
struct DecayComparison {
  std::string label;
  std::vector<double> bound;  // per point of the main curve
};

std::vector<DecayComparison> CompareDecay(const RopeSpec& configured, const RopeDecay& decay) {
  const double original = 4096;
  const auto with = [&](double theta, RopeScaling scaling) {
    RopeSpec spec = configured;
    spec.theta = theta;
    spec.scaling = std::move(scaling);
    return spec;
  };
  const std::vector<std::pair<std::string, RopeSpec>> specs = {
      {"theta 1e4", with(1e4, NoScaling{})},
      {"theta 1e5", with(1e5, NoScaling{})},
      {"theta 5e5", with(5e5, NoScaling{})},
      {"theta 1e4, linear x4", with(1e4, LinearScaling{4})},
      {"theta 1e4, NTK alpha 4", with(1e4, NtkAwareScaling{4})},
      {"theta 1e4, YaRN x4 (L 4096)", with(1e4, YarnScaling{.factor = 4, .original_max_position = 4096})},
  };
  std::vector<DecayComparison> out;
  for (const auto& [label, spec] : specs) {
    const auto inv_freq = ComputeRopeFrequencies(spec).inv_freq;
    DecayComparison c{label, {}};
    for (const auto& p : decay.points) c.bound.push_back(RopeDecayBound(inv_freq, static_cast<double>(p.distance)));
    out.push_back(std::move(c));
  }
  return out;
}

void RunDecay(const DecayOptions& o) {
  constexpr const char* kOp = "analyze decay";
  CheckOut(o.out, kOp);
  const RopeModelConfig config = LoadSpec(o.spec, kOp);
  const RopeDecay decay = ComputeRopeDecay(config.spec, o.decay);
  const std::string name = SpecName(o.spec, config.spec);
  const std::vector<DecayComparison> comparisons =
      o.compare ? CompareDecay(config.spec, decay) : std::vector<DecayComparison>{};
  if (o.json) {
    Json points = Json::array();
    for (const auto& p : decay.points) {
      points.push_back({{"distance", p.distance}, {"bound", p.bound}, {"ones", p.ones}, {"random", p.random}});
    }
    Json j;
    j["rotary_dim"] = decay.rotary_dim;
    j["samples"] = o.decay.samples;
    j["seed"] = o.decay.seed;
    j["points"] = points;
    if (o.compare) {
      Json c = Json::array();
      for (const auto& comparison : comparisons) c.push_back({{"label", comparison.label}, {"bound", comparison.bound}});
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
  }
  if (!o.out.empty()) {
    LinePlot plot;
    plot.title = "RoPE long-range decay: " + name;
    plot.x_label = "relative distance n - m (tokens)";
    plot.y_label = "RoFormer bound (1/(d/2)) sum_j |S_j|";
    plot.y2_label = "mean |<R_n q, R_m k>| (score units)";
    PlotSeries bound{"upper bound (left axis)", {}, {}, false, "lines lw 2 lc rgb '#1f77b4'"};
    PlotSeries ones{"all-ones q, k (right axis)", {}, {}, true, "lines lw 1 lc rgb '#ff7f0e'"};
    PlotSeries random{"random N(0,1) q, k, mean of " + std::to_string(o.decay.samples) + " (right axis)",
                      {}, {}, true, "lines lw 1 lc rgb '#2ca02c'"};
    for (const auto& p : decay.points) {
      const double x = static_cast<double>(p.distance);
      bound.x.push_back(x), bound.y.push_back(p.bound);
      ones.x.push_back(x), ones.y.push_back(p.ones);
      random.x.push_back(x), random.y.push_back(p.random);
    }
    plot.series = {bound, ones, random};
    for (const auto& comparison : comparisons) {
      PlotSeries extra{"bound, " + comparison.label + " (left axis)", bound.x, comparison.bound, false, "lines lw 1"};
      plot.series.push_back(std::move(extra));
    }
    DrawLinePlot(plot, o.out);
    Wrote(o.out, o.json);
  }
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

void RunHeatmap(const HeatmapOptions& o) {
  constexpr const char* kOp = "analyze heatmap";
  CheckOut(o.out, kOp);
  Require(o.kind == "sinusoidal" || o.kind == "rope" || o.kind == "alibi" || o.kind == "t5", kOp, "--kind",
          o.kind, "must be sinusoidal, rope, alibi or t5");
  if (o.kind == "alibi") return RunAlibiHeatmap(o);
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
    j["sinusoidal"] = {{"dim", o.dim},          {"base", o.base},
                       {"positions", map.positions}, {"max_shift", map.max_shift},
                       {"max_error", map.max_error}, {"error_by_shift", map.error_by_shift}};
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
    plot.key_position = "center right";
    PlotSeries s{"sinusoidal |T(D) p_k - p_{k+D}|, max over k < " + std::to_string(o.positions), {}, {}, false,
                 "linespoints pt 7 ps 0.5 lw 1"};
    // T(0) is the identity, error exactly 0: left out of the log axis.
    for (std::size_t i = 0; i < map.error_by_shift.size(); ++i) {
      s.x.push_back(static_cast<double>(static_cast<std::int64_t>(i) - map.max_shift));
      s.y.push_back(map.error_by_shift[i]);
    }
    plot.series.push_back(s);
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
  d->add_option("--factor", dims->factor, "comparison factor for linear/NTK/YaRN/Llama-3 (0: none)")
      ->capture_default_str();
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
              "also the bound for bases 1e4, 1e5, 5e5 and linear, NTK and YaRN scaling (same rotary dim)");
  c->add_flag("--json", decay->json, "print JSON");
  c->add_option("--out", decay->out, "draw a PNG (gnuplot)");
  c->callback([decay] { RunDecay(*decay); });

  auto heat = std::make_shared<HeatmapOptions>();
  CLI::App* h = analyze->add_subcommand("heatmap", "<p_m, p_n> (sinusoidal) or <R_m q, R_n k> (rope)");
  h->add_option("--kind", heat->kind, "sinusoidal, rope, alibi or t5")->required();
  heat->spec.Add(h);
  h->add_option("--dim", heat->dim, "sinusoidal dimension")->capture_default_str();
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
