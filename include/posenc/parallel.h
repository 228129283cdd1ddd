// Threads. Work is split into contiguous index ranges; every kernel computes
// each output element from the same inputs in the same order whatever the
// split, so results are bitwise identical for any thread count.
#pragma once

#include <cstdint>
#include <functional>

namespace posenc {

// Number of worker threads used by posenc kernels (default: hardware threads).
int NumThreads();
// The most threads SetNumThreads accepts: far above any core count, low
// enough that a typo (--threads 40000) is refused before the system is asked
// for that many stacks.
inline constexpr int kMaxThreads = 1024;

// Sets it; 1 runs everything on the calling thread. Throws posenc::Error for
// n outside [1, kMaxThreads], and when the system refuses to start a worker
// (the previous pool is gone then; the next call starts the default one).
void SetNumThreads(int n);

// Calls body(begin, end) over disjoint ranges covering [0, n), in parallel.
// `min_chunk` bounds how finely the range is split (small work stays serial).
void ParallelFor(std::int64_t n, std::int64_t min_chunk,
                 const std::function<void(std::int64_t begin, std::int64_t end)>& body);

}  // namespace posenc
