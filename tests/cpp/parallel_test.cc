#include "posenc/parallel.h"

#include <atomic>
#include <vector>

#include "test_util.h"

namespace posenc {
namespace {

TEST(ParallelFor, CoversEveryIndexExactlyOnce) {
  for (int threads : {1, 2, 5}) {
    SetNumThreads(threads);
    for (std::int64_t n : {0, 1, 7, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<std::size_t>(n));
      ParallelFor(n, 1, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) hits[i]++;
      });
      for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i], 1) << "n " << n << " i " << i;
    }
  }
  SetNumThreads(2);
}

// Also when the outer call runs on one slice (one thread, or one chunk):
// it once held the pool's lock there and the inner call waited for it
// forever.
TEST(ParallelFor, NestedCallsRunInline) {
  for (int threads : {1, 2}) {
    SetNumThreads(threads);
    for (std::int64_t outer : {1, 4}) {
      std::atomic<int> total = 0;
      ParallelFor(outer, 1, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) {
          ParallelFor(10, 1, [&](std::int64_t b2, std::int64_t e2) { total += static_cast<int>(e2 - b2); });
        }
      });
      EXPECT_EQ(total, 10 * outer) << threads << " threads, outer " << outer;
    }
  }
  SetNumThreads(2);
}

TEST(ParallelFor, ThreadCountMustBePositive) {
  testing::ExpectError([] { SetNumThreads(0); }, {"[threads] n = 0", "at least 1"});
}

TEST(ParallelFor, ThreadCountAboveTheLimitIsRefusedAndThePoolStillWorks) {
  testing::ExpectError([] { SetNumThreads(kMaxThreads + 1); }, {"[threads] n = 1025", "at most 1024"});
  SetNumThreads(2);
  std::atomic<int> total{0};
  ParallelFor(10, 1, [&](std::int64_t begin, std::int64_t end) { total += static_cast<int>(end - begin); });
  EXPECT_EQ(total, 10);
}

}  // namespace
}  // namespace posenc
