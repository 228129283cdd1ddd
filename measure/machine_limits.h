// This machine's limits, measured in the same run as the benchmark that is
// compared with them: every throughput posenc prints comes with its ratio to
// one of these.
//
// Both use posenc's thread pool (posenc::NumThreads() threads), so set the
// thread count first and keep it for the kernel being measured.
#pragma once

#include <cstddef>
#include <cstdint>

#include "hwy/aligned_allocator.h"

namespace posenc::bench {

struct CopyBandwidthOptions {
  // Bytes per buffer (source and destination each): far beyond any cache.
  std::size_t bytes = std::size_t{256} << 20;
  int reps = 7;
};

struct CopyBandwidth {
  double gbps = 0;     // (bytes read + bytes written) / best time, in 1e9 B/s
  double seconds = 0;  // the best time of one copy
  std::size_t bytes = 0;
  int threads = 0;
  const char* method = "";  // the copy that was fastest: "memcpy" or "stream"
  int runs = 0;             // timed runs (each copies both ways)
};

// Source and destination buffers, first touched by the pool's threads and
// copied once untimed (a warm-up), and the best copy time seen since.
// Benchmarks interleave Run() with their own repetitions, so that a busy
// neighbour slows both alike and the ratio of the best times stays
// meaningful.
class CopyProbe {
 public:
  explicit CopyProbe(std::size_t bytes = std::size_t{256} << 20);
  // Copies once with memcpy and once with streaming stores, keeping the best.
  void Run();
  // Runs until at least `runs` timed runs are in the best.
  void RunUntil(int runs) {
    while (runs_ < runs) Run();
  }
  CopyBandwidth Best() const;

 private:
  std::size_t bytes_;
  hwy::AlignedFreeUniquePtr<char[]> src_, dst_;
  double best_seconds_ = 1e300;
  const char* best_method_ = "";
  int runs_ = 0;
};

// A copy of `bytes` split into one contiguous slice per thread (ParallelFor),
// best of `reps`, done two ways: std::memcpy and a streaming-store loop (which
// writes without reading the destination first; glibc's memcpy does not always
// reach the memory's limit with several threads). The faster one counts.
// Counts 2 * bytes per copy (read + write), the same accounting as an in-place
// kernel that reads and writes each byte once.
CopyBandwidth MeasureCopyBandwidth(const CopyBandwidthOptions& options = {});

struct FmaPeak {
  double gflops = 0;  // 2 flops per fp32 FMA lane, summed over all threads
  int threads = 0;
  const char* target = "";  // the Highway target that ran, e.g. "AVX2"
};

// Independent fp32 FMA chains (enough to cover latency x pipes) on the best
// SIMD target this CPU supports, on every pool thread, best of `reps`.
FmaPeak MeasureFmaPeak(int reps = 5);

// The higher of two measurements of the peak. Another tenant of the host or
// a kernel thread can only lower one, so a benchmark that measures before
// and after its work keeps the higher: its ratios then never rest on one
// disturbed measurement (bench attention's once read half the peak).
inline FmaPeak HigherFmaPeak(const FmaPeak& a, const FmaPeak& b) { return a.gflops >= b.gflops ? a : b; }

struct Int8Peak {
  double gops = 0;  // 2 ops per byte product (as 2 flops per FMA lane), summed over all threads
  int threads = 0;
  const char* target = "";
  const char* instruction = "";  // "vpdpbusd" (AVX-512 VNNI), "pmaddubsw" (AVX2, AVX-512); "" without
};

// Independent chains of the byte dot-product instruction the integer
// prefill kernel (DotActivations::kInt8) uses on the best SIMD target, on
// every pool thread, best of `reps`: the limit of its products. 0 where the
// target has none (non-x86: the int8 prefill runs the float32 kernel).
Int8Peak MeasureInt8Peak(int reps = 5);

}  // namespace posenc::bench
