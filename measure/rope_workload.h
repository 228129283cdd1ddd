// The RoPE workload that `posenc bench rope` and bench/rope_benchmark.cc both
// measure: q [1, tokens, q_heads, head_dim] and k [1, tokens, kv_heads,
// head_dim] rotated in place in one ApplyRope call (Llama-3-8B shapes by
// default), with the correctness check that runs before any timing.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "hwy/aligned_allocator.h"
#include "naive_rope.h"
#include "posenc/rope.h"

namespace posenc::bench {

// Llama-3.1-8B's rotary embedding: theta 500000, llama3 scaling (factor 8,
// low/high frequency factors 1 and 4, original length 8192), half-split.
// head_dim and layout can be varied for sweeps.
RopeSpec Llama31RopeSpec(std::int64_t head_dim = 128, RopeLayout layout = RopeLayout::kHalfSplit);

struct RopeShape {
  std::int64_t tokens = 4096;
  std::int64_t q_heads = 32;  // Llama-3-8B: 32 query heads, 8 KV heads (GQA)
  std::int64_t kv_heads = 8;
};

struct RopeCheck {
  double max_error = 0;  // max |result - reference| over q and k
  double tolerance = 0;
  bool ok() const { return max_error <= tolerance; }
};

// Absolute tolerance against the double-precision reference for inputs in
// [-1, 1): about two units in the last place of the largest outputs.
double RopeTolerance(DType dtype);

class RopeWorkload {
 public:
  RopeWorkload(const RopeSpec& spec, const RopeShape& shape, DType dtype);

  const RopeSpec& spec() const { return spec_; }
  const RopeFrequencies& frequencies() const { return frequencies_; }
  const RopeShape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }

  // Bytes of q and k together; an in-place pass reads and writes each once,
  // so throughput counts 2 * TensorBytes() per call.
  std::size_t TensorBytes() const { return q_bytes_ + k_bytes_; }
  double BytesMoved() const { return 2.0 * static_cast<double>(TensorBytes()); }

  // Fills q and k with a fixed pseudo-random pattern in [-1, 1).
  void Fill(std::uint32_t seed = 1);

  // posenc::ApplyRope on q and k in place, one call, positions 0..tokens-1.
  void RunFast();
  // The naive peer (naive_rope.h), cos/sin tables built inside the call.
  void RunNaive();
  // The naive peer's rotation alone, with tables from PrepareNaiveTables()
  // (how Hugging Face amortizes them over the layers of a forward pass).
  void PrepareNaiveTables();
  void RunNaiveApplyOnly();

  // Refill, run, and compare with posenc::reference::ApplyRope; q and k are
  // refilled afterwards. Run these before timing.
  RopeCheck CheckFast();
  // The naive peer's float32 angles lose about position * 2^-24 rad, so its
  // tolerance grows with the largest position.
  RopeCheck CheckNaive();

 private:
  template <class Run>
  RopeCheck Check(Run&& run, double tolerance);

  RopeSpec spec_;
  RopeShape shape_;
  DType dtype_;
  RopeFrequencies frequencies_;
  std::size_t q_bytes_ = 0, k_bytes_ = 0;
  hwy::AlignedFreeUniquePtr<std::uint8_t[]> q_, k_;
  std::vector<TensorView> views_;  // {q, k}
  RopeCall call_;
  NaiveRope naive_;
};

// Wall time of one call of fn(), in seconds.
template <class Fn>
double Seconds(Fn&& fn) {
  const auto start = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace posenc::bench
