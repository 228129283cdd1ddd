#include "posenc/parallel.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
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

// The paths where a thread sleeps: workers idle longer than the pool's spin
// (the next loop must wake them), and a slice longer than it (the caller
// must sleep and be woken). Plain ints, so that ThreadSanitizer sees a
// missing happens-before between a slice's writes and the caller's reads,
// and loops of fewer slices than threads (the others sit the loop out).
TEST(ParallelFor, WakesSleepingWorkersAndASleepingCaller) {
  using std::chrono::microseconds;
  // A lost wake-up hangs: fail within a minute, not at ctest's timeout.
  std::atomic<bool> done{false};
  std::thread watchdog([&] {
    for (int i = 0; i < 600 && !done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!done) {
      std::fputs("ParallelFor.WakesSleepingWorkersAndASleepingCaller: no progress in 60 s (a lost wake-up)\n", stderr);
      std::abort();
    }
  });
  for (int threads : {2, 3}) {
    SetNumThreads(threads);
    for (int round = 0; round < 60; ++round) {
      const std::int64_t n = 1 + round % threads;
      std::vector<int> values(static_cast<std::size_t>(n), 0);
      ParallelFor(n, 1, [&](std::int64_t begin, std::int64_t end) {
        if (round % 7 == 3 && end == n && begin > 0) std::this_thread::sleep_for(microseconds(400));
        for (std::int64_t i = begin; i < end; ++i) values[i] = round + static_cast<int>(i);
      });
      for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(values[i], round + i) << threads << " threads, round " << round;
      if (round % 5 == 4) std::this_thread::sleep_for(microseconds(400));
    }
  }
  SetNumThreads(2);
  done = true;
  watchdog.join();
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
