// posenc analyze linear-map: p_{k+D} = T(D) p_k and RoPE's relative invariance.
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
  const RopeModelConfig config = LoadSpec(o.spec);
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
                static_cast<long long>(map.positions), static_cast<long long>(map.positions), map.max_solved_deviation);
    std::printf("RoPE <R_m q, R_n k> = <R_{m-n} q, k>, %s, m, n <= %lld step %lld (|score| <= %.4g):\n", name.c_str(),
                static_cast<long long>(inv.max_position), static_cast<long long>(inv.step), inv.max_abs_score);
    std::printf("  max error float64 %.3e, float32 (ApplyRope) %.3e\n", inv.max_error_f64, inv.max_error_f32);
  }
  if (!o.out.empty()) {
    LinePlot plot;
    plot.title = "Shift maps: sinusoidal T(D) (dim " + std::to_string(o.dim) + ") and RoPE invariance (" + name + ")";
    plot.x_label = "shift D (tokens)";
    plot.y_label = "max absolute error (log scale)";
    plot.log_y = true;
    plot.key_position = "inside center right";
    PlotSeries s{"sinusoidal |T(D) p_k - p_{k+D}|, max over k < " + std::to_string(o.positions),
                 {},
                 {},
                 false,
                 "linespoints pt 7 ps 0.5 lw 1"};
    // T(0) is the identity, error exactly 0: left out of the log axis.
    for (std::size_t i = 0; i < map.error_by_shift.size(); ++i) {
      s.x.push_back(static_cast<double>(static_cast<std::int64_t>(i) - map.max_shift));
      s.y.push_back(map.error_by_shift[i]);
    }
    plot.series.push_back(s);
    PlotSeries solved{"T(D) solved by least squares from either half of k, max |T_solved - T(D)|",
                      {},
                      {},
                      false,
                      "linespoints pt 5 ps 0.5 lw 1"};
    for (std::size_t i = 0; i < map.solved_deviation_by_shift.size(); ++i) {
      solved.x.push_back(static_cast<double>(static_cast<std::int64_t>(i) - map.max_shift));
      solved.y.push_back(map.solved_deviation_by_shift[i]);
    }
    plot.series.push_back(solved);
    plot.reference_lines.emplace_back(std::max(inv.max_error_f64, 1e-18),
                                      "RoPE <R_m q, R_n k> - <R_{m-n} q, k>, float64: " + Short(inv.max_error_f64));
    plot.reference_lines.emplace_back(std::max(inv.max_error_f32, 1e-18),
                                      "same, float32 through ApplyRope: " + Short(inv.max_error_f32));
    DrawLinePlot(plot, o.out);
    Wrote(o.out, o.json);
  }
}

}  // namespace

void AddLinearMap(CLI::App& analyze_app) {
  CLI::App* analyze = &analyze_app;
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

}  // namespace posenc::cli::analyze
