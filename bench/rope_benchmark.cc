// RoPE throughput (Google Benchmark) over head_dim {64, 128, 256}, both pair
// layouts and the dtypes, for posenc's kernel and the naive peer.
//
// Each case rotates q [1, 4096, 4096/head_dim, head_dim] and k with a quarter
// of the heads in place (Llama-3-8B's hidden size and GQA ratio, so every case
// moves the same bytes), after checking the result against the reference.
// Counters: bytes_per_second and GB/s (2 x tensor bytes per call, in GiB/s
// and 1e9 B/s), copy_ratio (that rate over the copy bandwidth measured at
// start-up with the same threads), max_error (against
// posenc::reference::ApplyRope, or for the naive peer with its own tolerance).
//
//   rope_benchmark [--threads=N] [Google Benchmark flags]
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "machine_limits.h"
#include "posenc/parallel.h"
#include "rope_workload.h"

namespace posenc::bench {
namespace {

constexpr std::int64_t kTokens = 4096;
constexpr std::int64_t kHiddenSize = 4096;

double copy_bytes_per_second = 0;  // measured in main before any case runs

enum class Impl { kPosenc, kNaive };

// Google Benchmark calls a case several times while it sizes the iteration
// count; the workload and its reference check are made once per case.
struct Prepared {
  std::int64_t head_dim;
  Impl impl;
  RopeLayout layout;
  DType dtype;
  std::unique_ptr<RopeWorkload> work;
  RopeCheck check;
};

Prepared& Prepare(std::int64_t head_dim, Impl impl, RopeLayout layout, DType dtype) {
  static Prepared last{};
  if (last.work && last.head_dim == head_dim && last.impl == impl && last.layout == layout && last.dtype == dtype) {
    return last;
  }
  last.work.reset();  // free the previous case's tensors first
  const std::int64_t q_heads = kHiddenSize / head_dim;
  last = {
      head_dim,
      impl,
      layout,
      dtype,
      std::make_unique<RopeWorkload>(Llama31RopeSpec(head_dim, layout),
                                     RopeShape{.tokens = kTokens, .q_heads = q_heads, .kv_heads = q_heads / 4}, dtype),
      {}};
  last.check = impl == Impl::kPosenc ? last.work->CheckFast() : last.work->CheckNaive();
  return last;
}

void BM_Rope(benchmark::State& state, Impl impl, RopeLayout layout, DType dtype) {
  Prepared& prepared = Prepare(state.range(0), impl, layout, dtype);
  RopeWorkload& work = *prepared.work;
  const RopeCheck& check = prepared.check;
  if (!check.ok()) {
    state.SkipWithError(
        ("max error " + std::to_string(check.max_error) + " above tolerance " + std::to_string(check.tolerance))
            .c_str());
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    if (impl == Impl::kPosenc) {
      work.RunFast();
    } else {
      work.RunNaive();
    }
    benchmark::ClobberMemory();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double bytes = static_cast<double>(state.iterations()) * work.BytesMoved();
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
  state.counters["GB/s"] = bytes / seconds / 1e9;  // 1e9 bytes, as `posenc bench` prints
  state.counters["copy_ratio"] = bytes / seconds / copy_bytes_per_second;
  state.counters["max_error"] = check.max_error;
}

void RegisterAll() {
  for (const Impl impl : {Impl::kPosenc, Impl::kNaive}) {
    for (const RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved}) {
      for (const DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
        const std::string name = std::string("rope/") + (impl == Impl::kPosenc ? "posenc" : "naive") + "/" +
                                 std::string(RopeLayoutName(layout)) + "/" + std::string(DTypeName(dtype));
        benchmark::RegisterBenchmark(name.c_str(), BM_Rope, impl, layout, dtype)
            ->ArgName("head_dim")
            ->Arg(64)
            ->Arg(128)
            ->Arg(256)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
}

}  // namespace
}  // namespace posenc::bench

int main(int argc, char** argv) {
  // Our own flag first: --threads=N sets posenc's pool (default: all cores).
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--threads=", 10) == 0) {
      posenc::SetNumThreads(std::atoi(argv[i] + 10));
    } else {
      args.push_back(argv[i]);
    }
  }
  int count = static_cast<int>(args.size());
  benchmark::Initialize(&count, args.data());
  if (benchmark::ReportUnrecognizedArguments(count, args.data())) return 1;

  const posenc::bench::CopyBandwidth copy = posenc::bench::MeasureCopyBandwidth();
  posenc::bench::copy_bytes_per_second = copy.gbps * 1e9;
  benchmark::AddCustomContext("posenc_threads", std::to_string(posenc::NumThreads()));
  benchmark::AddCustomContext("copy_bandwidth_gbps", std::to_string(copy.gbps));

  posenc::bench::RegisterAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
