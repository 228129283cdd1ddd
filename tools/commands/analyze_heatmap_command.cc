// posenc analyze heatmap: sinusoidal dots, RoPE scores, ALiBi bias per head, T5 buckets, the binary counter.
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

// ---- heatmap --------------------------------------------------------------

struct HeatmapOptions {
  std::string kind;
  SpecOptions spec;
  std::int64_t dim = 64;
  double base = 10000.0;
  std::int64_t positions = 128;
  std::string vectors = "ones";
  std::uint64_t seed = 0;
  std::int64_t heads = 8;                   // alibi
  double max_bias = 8.0;                    // alibi
  std::int64_t num_buckets = 32;            // t5
  std::int64_t max_distance = 128;          // t5
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

// The binary-counter view of sinusoidal encodings (kexue.fm/archives/8231): the bits of each position beside its
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
  sinusoid.title = "sinusoidal p_k, dim " + std::to_string(o.dim) + ", base " + Compact(o.base) + " (" +
                   std::string(SinusoidalOrderName(spec.order)) + " sin, cos)";
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
  Require(o.kind == "sinusoidal" || o.kind == "rope" || o.kind == "alibi" || o.kind == "t5" || o.kind == "binary", kOp,
          "--kind", o.kind, "must be sinusoidal, rope, alibi, t5 or binary");
  if (o.kind == "alibi") return RunAlibiHeatmap(o);
  if (o.kind == "binary") return RunBinaryHeatmap(o);
  Require(o.vectors == "ones" || o.vectors == "random", kOp, "--vectors", o.vectors, "must be ones or random");
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
    const RopeModelConfig config = LoadSpec(o.spec);
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

}  // namespace

void AddHeatmap(CLI::App& analyze_app) {
  CLI::App* analyze = &analyze_app;
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
}

}  // namespace posenc::cli::analyze
