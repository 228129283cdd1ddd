// posenc bench attention [--json] [--tokens N] [--threads N] [--reps N]
//
// Causal prefill (8 query heads, 2 KV heads, head_dim 128, f32) under each
// positional policy, and a naive materialized implementation. Each policy is
// checked against the float64 reference on a 256-token prefix before timing;
// GFLOP/s count only the useful work (4 * head_dim per visible pair per
// head) and are printed beside this machine's FMA peak measured in the same
// run, before and after the policies (the higher counts: machine_limits.h).
#include <cstdio>
#include <iostream>
#include <string>
#include <nlohmann/json.hpp>

#include "attention_workload.h"
#include "commands/bench_floors.h"
#include "commands.h"
#include "options/integer_options.h"
#include "machine_limits.h"
#include "posenc/parallel.h"
#include "rope_workload.h"

namespace posenc::cli {
namespace {

using Json = nlohmann::ordered_json;

struct BenchAttentionOptions {
  bool json = false;
  std::int64_t tokens = 4096;
  int threads = 0;
  int reps = 3;
};

struct PolicyResult {
  std::string name;
  double seconds = 0, gflops = 0, check_error = 0;
};

void Run(const BenchAttentionOptions& options) {
  if (options.threads > 0) SetNumThreads(options.threads);
  const bench::AttentionShape shape{.tokens = options.tokens};
  bench::AttentionWorkload work(shape);
  const auto policies = bench::BenchmarkPolicies(shape);
  const bench::FmaPeak peak_before = bench::MeasureFmaPeak();

  std::vector<PolicyResult> results;
  for (const auto& policy : policies) {
    PolicyResult r{policy.name};
    r.check_error = work.CheckAgainstReference(policy.options);
    if (r.check_error > 1e-4) {
      throw std::runtime_error("attention policy " + policy.name + " disagrees with the reference by " +
                               std::to_string(r.check_error));
    }
    work.Run(policy.options);  // warm-up
    r.seconds = 1e300;
    for (int rep = 0; rep < options.reps; ++rep) {
      r.seconds = std::min(r.seconds, bench::Seconds([&] { work.Run(policy.options); }));
    }
    r.gflops = work.Flops(policy.options) / r.seconds / 1e9;
    results.push_back(r);
  }
  PolicyResult naive{"naive"};
  naive.seconds = bench::Seconds([&] { work.RunNaive(policies.front().options); });
  naive.gflops = work.Flops(policies.front().options) / naive.seconds / 1e9;
  results.push_back(naive);

  const bench::FmaPeak peak_after = bench::MeasureFmaPeak();
  const bench::FmaPeak peak = bench::HigherFmaPeak(peak_before, peak_after);
  const double rope_seconds = results.front().seconds;
  double full_causal_seconds = rope_seconds;
  if (options.json) {
    Json out;
    for (const auto& r : results) {
      out[r.name] = {{"gflops", r.gflops},
                     {"seconds", r.seconds},
                     {"ratio_to_peak", r.gflops / peak.gflops},
                     {"time_vs_rope", r.seconds / rope_seconds}};
      if (r.name != "naive") out[r.name]["max_error_vs_reference"] = r.check_error;
    }
    out["peak_gflops"] = peak.gflops;
    out["peak_gflops_before"] = peak_before.gflops;
    out["peak_gflops_after"] = peak_after.gflops;
    out["threads"] = NumThreads();
    out["tokens"] = options.tokens;
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::printf("causal prefill: %lld tokens, 8 q heads, 2 kv heads, head_dim 128, f32, %d threads\n",
              static_cast<long long>(options.tokens), NumThreads());
  std::printf("FMA peak measured before and after, the higher: %.1f GFLOP/s (%s)\n\n", peak.gflops, peak.target);
  std::printf("%-13s %9s %10s %8s %9s %12s\n", "policy", "seconds", "GFLOP/s", "of peak", "vs rope", "max error");
  for (const auto& r : results) {
    std::printf("%-13s %9.4f %10.1f %7.1f%% %8.2fx", r.name.c_str(), r.seconds, r.gflops, 100 * r.gflops / peak.gflops,
                r.seconds / rope_seconds);
    if (r.name != "naive") std::printf(" %12.2e", r.check_error);
    std::printf("\n");
  }
  const auto seconds_of = [&](const std::string& name) {
    for (const auto& r : results) {
      if (r.name == name) return r.seconds;
    }
    return 0.0;
  };
  std::printf("\n");
  PrintFloorVerdict({
      {"rope >= 50% of peak", results.front().gflops >= 0.5 * peak.gflops},
      {"rerope <= 1.3x rope", seconds_of("rerope") <= 1.3 * rope_seconds},
      {"leaky_rerope <= 1.5x rope", seconds_of("leaky_rerope") <= 1.5 * rope_seconds},
      {"alibi <= 1.15x rope", seconds_of("alibi") <= 1.15 * rope_seconds},
      {"t5 <= 1.15x rope", seconds_of("t5") <= 1.15 * rope_seconds},
      {"lambda >= 2x faster than full causal", full_causal_seconds >= 2 * seconds_of("lambda")},
  });
}

}  // namespace

void AddBenchAttentionCommand(CLI::App& bench) {
  auto options = std::make_shared<BenchAttentionOptions>();
  CLI::App* attention = bench.add_subcommand(
      "attention",
      std::string("Causal prefill under each positional policy vs the FMA peak and a naive implementation") +
          kFloorsHelp);
  attention->add_flag("--json", options->json, "Print one JSON object");
  attention->add_option("--tokens", options->tokens, "Sequence length")
      ->capture_default_str()
      ->check(CLI::Range(16, 1 << 20));
  attention->add_option("--threads", options->threads, "Threads (default: all)")->check(IntegerAtLeast(0));
  attention->add_option("--reps", options->reps, "Timed repetitions (best counts)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  attention->callback([options] { Run(*options); });
}

}  // namespace posenc::cli
