// posenc bench limits [--json] [--threads N]
//
// This machine's limits alone: copy bandwidth (bytes read + written), the
// fp32 FMA peak and the int8 dot-product peak, with posenc's thread pool. Benchmarks outside the C++ tool
// (bench/hf_attention.py, which times PyTorch and Hugging Face code) run it
// in their own process to print their ratios to the same limits the C++
// benchmarks use.
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "machine_limits.h"
#include "options/integer_options.h"
#include "posenc/parallel.h"

namespace posenc::cli {
namespace {

struct BenchLimitsOptions {
  bool json = false;
  int threads = 0;  // 0: all hardware threads
};

void RunBenchLimits(const BenchLimitsOptions& options, std::ostream& out) {
  if (options.threads > 0) SetNumThreads(options.threads);
  const bench::FmaPeak fma = bench::MeasureFmaPeak();
  const bench::Int8Peak int8 = bench::MeasureInt8Peak();
  const bench::CopyBandwidth copy = bench::MeasureCopyBandwidth();
  if (options.json) {
    nlohmann::ordered_json j;
    j["threads"] = fma.threads;
    j["fma_peak_gflops"] = fma.gflops;
    j["fma_target"] = fma.target;
    j["int8_peak_gops"] = int8.gops;
    j["int8_instruction"] = int8.instruction;
    j["copy_gbps"] = copy.gbps;
    j["copy_method"] = copy.method;
    out << j.dump(2) << "\n";
    return;
  }
  char line[256];
  std::snprintf(line, sizeof line,
                "posenc bench limits: %d threads\n  fma peak %.0f GFLOP/s (%s)\n"
                "  int8 dot-product peak %.0f GOP/s (%s, 2 ops a byte product)\n"
                "  copy bandwidth %.1f GB/s (%zu MiB, bytes read + written, %s)\n",
                fma.threads, fma.gflops, fma.target, int8.gops, *int8.instruction ? int8.instruction : "none",
                copy.gbps, copy.bytes >> 20, copy.method);
  out << line;
}

}  // namespace

void AddBenchLimitsCommand(CLI::App& bench) {
  auto options = std::make_shared<BenchLimitsOptions>();
  CLI::App* limits = bench.add_subcommand("limits",
                                          "This machine's copy bandwidth, fp32 FMA peak and int8 "
                                          "dot-product peak, as the other benchmarks measure them");
  limits->add_flag("--json", options->json, "Print one JSON object");
  limits->add_option("--threads", options->threads, "Threads (0: all cores)")->check(IntegerAtLeast(0));
  limits->callback([options] { RunBenchLimits(*options, std::cout); });
}

}  // namespace posenc::cli
