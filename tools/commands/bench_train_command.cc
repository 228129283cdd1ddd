// posenc bench train [--pe SCHEME] [--steps S] [--threads T] [--json]
//
// Training throughput of the default tiny model (d 128, 4 layers, 4 heads,
// ffn 512, L 128, batch 16, rope): S timed steps of TrainTinyLm (after one
// untimed step) on fixed pseudo-random bytes, the model FLOPs of a step
// (TinyLmTrainStepFlops: 3 x (2 x params-in-products x tokens + causal
// attention), stated in include/posenc/tiny_lm_train.h), and the ratio of
// the FLOP/s achieved to the FMA peak measured in the same run, before and
// after the steps (the higher counts: machine_limits.h).
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <nlohmann/json.hpp>
#include <vector>

#include "commands/bench_floors.h"
#include "commands.h"
#include "options/reuse_freed_memory.h"
#include "options/integer_options.h"
#include "machine_limits.h"
#include "posenc/parallel.h"
#include "posenc/tiny_lm_train.h"

namespace posenc::cli {
namespace {

// The floor set for the training step of the default model: 0.35 of the
// FMA peak (it was 0.25 before the buffers were reused between steps).
constexpr double kRatioFloor = 0.35;

struct BenchTrainOptions {
  std::string scheme = "rope";
  std::int64_t steps = 4;
  int threads = 0;
  bool json = false;
};

void Run(const BenchTrainOptions& o) {
  ReuseFreedMemory();
  if (o.threads > 0) SetNumThreads(o.threads);
  TinyLmConfig config;  // the defaults are the benchmark's model
  config.scheme = ParsePositionScheme(o.scheme, "bench train", "--pe");
  TinyLmTrainOptions train;
  train.batch = 16;
  train.tokens = (o.steps + 1) * train.batch * config.train_length;
  // Bytes do not change the work: a fixed sequence, the same every run.
  std::vector<std::uint8_t> corpus(1 << 20);
  std::uint32_t x = 1;
  for (std::uint8_t& b : corpus) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<std::uint8_t>(x >> 24);
  }

  const bench::FmaPeak peak_before = bench::MeasureFmaPeak();
  std::vector<std::chrono::steady_clock::time_point> ends;
  TrainTinyLm(config, train, corpus,
              [&](const TinyLmTrainProgress&) { ends.push_back(std::chrono::steady_clock::now()); });
  // Steps 2..S+1: the first step's end starts the clock.
  const double seconds = std::chrono::duration<double>(ends.back() - ends.front()).count();
  const double step_seconds = seconds / static_cast<double>(o.steps);
  const double step_flops = TinyLmTrainStepFlops(config, train.batch, config.train_length);
  const double step_tokens = static_cast<double>(train.batch * config.train_length);
  const double tokens_per_s = step_tokens / step_seconds;
  const double gflops = step_flops / step_seconds / 1e9;
  const bench::FmaPeak peak = bench::HigherFmaPeak(peak_before, bench::MeasureFmaPeak());
  const double ratio = gflops / peak.gflops;
  if (o.json) {
    nlohmann::ordered_json out{{"tokens_per_s", tokens_per_s},
                               {"gflops", gflops},
                               {"peak_gflops", peak.gflops},
                               {"ratio", ratio},
                               {"flops_per_token", step_flops / step_tokens},
                               {"step_seconds", step_seconds},
                               {"steps", o.steps},
                               {"scheme", o.scheme},
                               {"d_model", config.d_model},
                               {"layers", config.layers},
                               {"heads", config.heads},
                               {"ffn_hidden", config.ffn_hidden},
                               {"train_length", config.train_length},
                               {"batch", train.batch},
                               {"threads", NumThreads()},
                               {"target", peak.target}};
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::printf("tiny model: %s, d %lld, %lld layers, %lld heads, ffn %lld, L %lld, batch %lld; f32, %d threads\n",
              o.scheme.c_str(), static_cast<long long>(config.d_model), static_cast<long long>(config.layers),
              static_cast<long long>(config.heads), static_cast<long long>(config.ffn_hidden),
              static_cast<long long>(config.train_length), static_cast<long long>(train.batch), NumThreads());
  std::printf("training step (forward, backward, clip, AdamW), mean of %lld: %.3f s\n", static_cast<long long>(o.steps),
              step_seconds);
  std::printf(
      "%.0f tokens/s, %.2f MFLOP/token (3 x forward), %.1f GFLOP/s = %.1f%% of the FMA peak measured now "
      "(%.1f GFLOP/s, %s)\n",
      tokens_per_s, step_flops / step_tokens / 1e6, gflops, 100 * ratio, peak.gflops, peak.target);
  PrintFloorVerdict({{"ratio to the FMA peak >= " + std::to_string(kRatioFloor).substr(0, 4), ratio >= kRatioFloor}});
}

}  // namespace

void AddBenchTrainCommand(CLI::App& bench) {
  auto o = std::make_shared<BenchTrainOptions>();
  CLI::App* train = bench.add_subcommand(
      "train", std::string("Training tokens/s of the default tiny model and its ratio to the FMA peak") + kFloorsHelp);
  train->add_option("--pe", o->scheme, "Position scheme: " + PositionSchemeList())->capture_default_str();
  train->add_option("--steps", o->steps, "Timed steps (after one untimed)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  train->add_option("--threads", o->threads, "Threads (default: all)")->check(IntegerAtLeast(0));
  train->add_flag("--json", o->json, "Print one JSON object");
  train->callback([o] { Run(*o); });
}

}  // namespace posenc::cli
