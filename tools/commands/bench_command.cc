// posenc bench rope [--json] [--tokens N] [--threads N] [--reps N] [--dtypes f32,bf16]
//
// In-place RoPE on Llama-3-8B shaped q [1, T, 32, 128] and k [1, T, 8, 128]
// (half-split, Llama-3.1 frequencies), both in one ApplyRope call. Before any
// timing the fast result is compared with posenc::reference::ApplyRope; then
// every figure is printed beside this machine's copy bandwidth measured in the
// same run with the same threads, and beside a naive peer (measure/naive_rope.h).
//
// Bytes are what the tensors need: each element read once and written once,
// 2 * (q + k bytes) per call, for the naive peer too (its temporaries are its
// own cost).
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "options/integer_options.h"
#include "machine_limits.h"
#include "posenc/error.h"
#include "posenc/parallel.h"
#include "rope_workload.h"

namespace posenc::cli {
namespace {

using Json = nlohmann::ordered_json;
constexpr double kRatioFloor = 0.8;    // of copy bandwidth (f32)
constexpr double kSpeedupFloor = 1.5;  // over the naive peer (f32)

struct BenchRopeOptions {
  bool json = false;
  std::int64_t tokens = 4096;
  int threads = 0;  // 0: all hardware threads
  int reps = 15;
  int warmup = 2;
  std::vector<std::string> dtypes = {"f32", "bf16"};
};

struct DTypeResult {
  DType dtype;
  bench::RopeCheck check, naive_check;
  double bytes = 0;
  double rope_seconds = 0, naive_seconds = 0, naive_apply_seconds = 0;
  double rope_gbps() const { return bytes / rope_seconds / 1e9; }
  double naive_gbps() const { return bytes / naive_seconds / 1e9; }
  double naive_apply_gbps() const { return bytes / naive_apply_seconds / 1e9; }
};

// Checks, then times the kernel, the naive peer (with and without its table
// build) and the copy in turn, `reps` rounds, keeping each one's best: a busy
// neighbour then slows all of them in the same window.
DTypeResult MeasureDType(DType dtype, const BenchRopeOptions& options, bench::CopyProbe& copy) {
  bench::RopeWorkload work(bench::Llama31RopeSpec(), {.tokens = options.tokens}, dtype);
  DTypeResult r;
  r.dtype = dtype;
  r.bytes = work.BytesMoved();
  // Correctness first (llm.c's habit): never time a wrong kernel.
  r.check = work.CheckFast();
  if (!r.check.ok()) {
    ThrowError("bench rope", std::string(DTypeName(dtype)) + " max error", FormatValue(r.check.max_error),
               "exceeds the tolerance " + FormatValue(r.check.tolerance) +
                   " against posenc::reference::ApplyRope; not timing a wrong kernel");
  }
  r.naive_check = work.CheckNaive();
  if (!r.naive_check.ok()) {
    ThrowError("bench rope", std::string(DTypeName(dtype)) + " naive max error", FormatValue(r.naive_check.max_error),
               "exceeds the tolerance " + FormatValue(r.naive_check.tolerance));
  }
  // RunNaive rebuilds the same tables that RunNaiveApplyOnly then reuses.
  work.PrepareNaiveTables();
  for (int i = 0; i < options.warmup; ++i) {
    work.RunFast();
    work.RunNaive();
    work.RunNaiveApplyOnly();
  }
  r.rope_seconds = r.naive_seconds = r.naive_apply_seconds = 1e300;
  for (int i = 0; i < options.reps; ++i) {
    copy.Run();
    r.rope_seconds = std::min(r.rope_seconds, bench::Seconds([&] { work.RunFast(); }));
    r.naive_seconds = std::min(r.naive_seconds, bench::Seconds([&] { work.RunNaive(); }));
    r.naive_apply_seconds = std::min(r.naive_apply_seconds, bench::Seconds([&] { work.RunNaiveApplyOnly(); }));
  }
  return r;
}

Json DTypeJson(const DTypeResult& r, double copy_gbps) {
  return {{"rope_gbps", r.rope_gbps()},
          {"ratio", r.rope_gbps() / copy_gbps},
          {"naive_gbps", r.naive_gbps()},
          {"speedup", r.naive_seconds / r.rope_seconds},
          {"naive_apply_gbps", r.naive_apply_gbps()},
          {"speedup_vs_naive_apply", r.naive_apply_seconds / r.rope_seconds},
          {"rope_seconds", r.rope_seconds},
          {"naive_seconds", r.naive_seconds},
          {"naive_apply_seconds", r.naive_apply_seconds},
          {"bytes", r.bytes},
          {"max_error", r.check.max_error},
          {"tolerance", r.check.tolerance},
          {"naive_max_error", r.naive_check.max_error}};
}

void RunBenchRope(const BenchRopeOptions& options, std::ostream& out) {
  if (options.threads > 0) SetNumThreads(options.threads);
  const int threads = NumThreads();
  std::vector<DType> dtypes;
  for (const std::string& name : options.dtypes) dtypes.push_back(ParseDType(name));

  const bench::FmaPeak fma = bench::MeasureFmaPeak();
  // The copy runs between the kernels' repetitions; its best over the whole
  // run is the limit every dtype is compared with.
  bench::CopyProbe probe;
  std::vector<DTypeResult> results;
  results.reserve(dtypes.size());
  for (DType dtype : dtypes) results.push_back(MeasureDType(dtype, options, probe));
  const bench::CopyBandwidth copy = probe.Best();

  const RopeSpec spec = bench::Llama31RopeSpec();
  const std::string shapes =
      "q [1, " + std::to_string(options.tokens) + ", 32, 128], k [1, " + std::to_string(options.tokens) + ", 8, 128]";
  if (options.json) {
    Json j;
    j["workload"] = "in-place RoPE, Llama-3.1-8B (theta 500000, llama3 scaling), " +
                    std::string(RopeLayoutName(spec.layout)) + ", " + shapes + ", one ApplyRope call";
    j["tokens"] = options.tokens;
    j["threads"] = threads;
    j["reps"] = options.reps;
    j["copy_gbps"] = copy.gbps;
    j["copy_bytes"] = copy.bytes;
    j["copy_method"] = copy.method;
    j["fma_gflops"] = fma.gflops;
    j["fma_target"] = fma.target;
    // f32 figures at the top level, other dtypes prefixed (bf16_rope_gbps, ...).
    for (const DTypeResult& r : results) {
      const std::string prefix = r.dtype == DType::kF32 ? "" : std::string(DTypeName(r.dtype)) + "_";
      const Json fields = DTypeJson(r, copy.gbps);
      for (const auto& [key, value] : fields.items()) j[prefix + key] = value;
    }
    for (const DTypeResult& r : results) {
      if (r.dtype != DType::kF32) continue;
      const double ratio = r.rope_gbps() / copy.gbps, speedup = r.naive_seconds / r.rope_seconds;
      j["floors"] = {{"ratio", kRatioFloor},
                     {"speedup", kSpeedupFloor},
                     {"met", ratio >= kRatioFloor && speedup >= kSpeedupFloor}};
    }
    Json by_dtype;
    for (const DTypeResult& r : results) by_dtype[std::string(DTypeName(r.dtype))] = DTypeJson(r, copy.gbps);
    j["dtypes"] = by_dtype;
    out << j.dump(2) << "\n";
    return;
  }

  char line[512];
  out << "posenc bench rope: in-place RoPE, Llama-3.1-8B frequencies (theta 500000, llama3 scaling), "
      << RopeLayoutName(spec.layout) << "\n"
      << "  " << shapes << ", one ApplyRope call; " << threads << " threads; best of " << options.reps << " after "
      << options.warmup << " warm-up, interleaved with the naive peer and the copy\n";
  std::snprintf(line, sizeof line,
                "  copy bandwidth %.1f GB/s (%zu MiB copy, bytes read + written, same threads;\n"
                "    best of %d memcpy and %d streaming-store runs interleaved with the kernels', %s won)\n"
                "  fma peak %.0f GFLOP/s (%s, %d threads)\n\n",
                copy.gbps, copy.bytes >> 20, copy.runs, copy.runs, copy.method, fma.gflops, fma.target, fma.threads);
  out << line;
  std::snprintf(line, sizeof line, "%-5s  %-21s  %7s  %9s  %9s  %6s  %10s  %7s  %16s  %7s\n", "dtype",
                "max err (tolerance)", "MB", "rope ms", "rope GB/s", "ratio", "naive GB/s", "speedup",
                "naive apply GB/s", "speedup");
  out << line;
  for (const DTypeResult& r : results) {
    std::snprintf(
        line, sizeof line, "%-5s  %8.2e (%8.1e)%s  %7.1f  %9.3f  %9.1f  %6.2f  %10.1f  %6.2fx  %16.1f  %6.2fx\n",
        std::string(DTypeName(r.dtype)).c_str(), r.check.max_error, r.check.tolerance, r.check.ok() ? "  " : " !",
        r.bytes / 1e6, r.rope_seconds * 1e3, r.rope_gbps(), r.rope_gbps() / copy.gbps, r.naive_gbps(),
        r.naive_seconds / r.rope_seconds, r.naive_apply_gbps(), r.naive_apply_seconds / r.rope_seconds);
    out << line;
  }
  out << "\n  GB/s = 2 x (q + k bytes) / time. naive: Hugging Face-style eager RoPE "
         "(cos/sin tables [seq, head_dim] built in the call,\n"
         "  x * cos + rotate_half(x) * sin with a temporary); naive apply: the same with the tables "
         "prebuilt, as a forward pass shares them.\n";
  for (const DTypeResult& r : results) {
    if (r.dtype != DType::kF32) continue;
    const double ratio = r.rope_gbps() / copy.gbps;
    const double speedup = r.naive_seconds / r.rope_seconds;
    std::snprintf(line, sizeof line,
                  "  floors (f32): ratio %.2f %s %.1f; speedup over naive %.2fx %s %.1fx "
                  "(over naive apply alone %.2fx)\n",
                  ratio, ratio >= kRatioFloor ? ">=" : "< (MISSED)", kRatioFloor, speedup,
                  speedup >= kSpeedupFloor ? ">=" : "< (MISSED)", kSpeedupFloor,
                  r.naive_apply_seconds / r.rope_seconds);
    out << line;
  }
}

}  // namespace

void AddBenchCommands(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Measure kernels against this machine's limits");
  bench->require_subcommand(1);
  AddBenchAttentionCommand(*bench);
  AddBenchModelCommand(*bench);
  AddBenchTrainCommand(*bench);
  AddBenchLimitsCommand(*bench);

  auto options = std::make_shared<BenchRopeOptions>();
  CLI::App* rope = bench->add_subcommand(
      "rope", "In-place RoPE on Llama-3-8B q and k: GB/s, ratio to copy bandwidth, speedup over a naive peer");
  rope->add_flag("--json", options->json, "Print one JSON object");
  rope->add_option("--tokens", options->tokens, "Sequence length (tokens)")
      ->capture_default_str()
      ->check(IntegerAtLeast(1));
  rope->add_option("--threads", options->threads, "Threads for the kernel and the copy (0: all cores)")
      ->check(IntegerAtLeast(0));
  rope->add_option("--reps", options->reps, "Timed repetitions (best is kept)")
      ->capture_default_str()
      ->check(IntegerAtLeast(1));
  rope->add_option("--dtypes", options->dtypes, "Element types to measure (f32, bf16, f16)")
      ->capture_default_str()
      ->delimiter(',');
  rope->callback([options] { RunBenchRope(*options, std::cout); });
}

}  // namespace posenc::cli
