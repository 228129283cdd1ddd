// Threads. Work is split into contiguous index ranges; every kernel computes
// each output element from the same inputs in the same order whatever the
// split, so results are bitwise identical for any thread count.
#pragma once

#include <cstdint>
#include <functional>

namespace posenc {

// Number of worker threads used by posenc kernels (default: hardware threads).
int NumThreads();
// Sets it; 1 runs everything on the calling thread. Throws for n < 1.
void SetNumThreads(int n);

// Calls body(begin, end) over disjoint ranges covering [0, n), in parallel.
// `min_chunk` bounds how finely the range is split (small work stays serial).
void ParallelFor(std::int64_t n, std::int64_t min_chunk,
                 const std::function<void(std::int64_t begin, std::int64_t end)>& body);

}  // namespace posenc
