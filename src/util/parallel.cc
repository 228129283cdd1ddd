#include "posenc/parallel.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "posenc/error.h"

namespace posenc {
namespace {

// A fixed set of workers that each run one contiguous slice of a ParallelFor.
// Slice t of n items is [t*n/T, (t+1)*n/T): a pure function of (n, T).
class Pool {
 public:
  // Starts threads - 1 workers (the caller is the first). When the system
  // refuses one (process or memory limits), the ones started are stopped and
  // the failure is an error naming the count: waiting on a worker that never
  // started would hang the first ParallelFor.
  explicit Pool(int threads) : size_(threads) {
    for (int t = 1; t < threads; ++t) {
      try {
        workers_.emplace_back([this, t] { Work(t); });
      } catch (const std::system_error& e) {
        Stop();
        ThrowError("threads", "n", std::to_string(threads),
                   "the system refused to start worker thread " + std::to_string(t + 1) + " (" + e.what() +
                       "); lower the thread count or raise the process limit");
      }
    }
  }
  ~Pool() { Stop(); }
  int size() const { return size_; }

  // slice(t) for t < slices, the caller running slice 0. The job is kept as
  // a pointer and a function that calls it: a std::function of the caller's
  // lambda would allocate at every call (a decode step makes ~150).
  template <class Slice>
  void Run(int slices, const Slice& slice) {
    {
      std::lock_guard lock(mutex_);
      job_ = &slice;
      call_ = [](const void* job, int t) { (*static_cast<const Slice*>(job))(t); };
      pending_.store(slices - 1, std::memory_order_relaxed);
      const std::uint64_t job = (generation_.load(std::memory_order_relaxed) >> kSliceBits) + 1;
      generation_.store(job << kSliceBits | static_cast<std::uint64_t>(slices), std::memory_order_release);
    }
    wake_.notify_all();  // no system call when every worker is still spinning
    slice(0);
    SpinUntil([this] { return pending_.load(std::memory_order_acquire) == 0; });
    std::unique_lock lock(mutex_);
    done_.wait(lock, [this] { return pending_.load(std::memory_order_acquire) == 0; });
    job_ = nullptr;
  }

 private:
  // Back-to-back ParallelFors (a decode step makes ~10 a layer, each of tens
  // of microseconds) would spend as long waking sleeping threads as working:
  // a worker that finished, and the caller waiting for its workers, first
  // spin for up to kSpin before sleeping on the condition variable.
  static constexpr std::chrono::microseconds kSpin{200};
  // The clock is read every kSpinChecks polls only: a read costs more than
  // a poll (a system call's worth on some virtual machines), and a thread
  // that looks at it between polls sees a new job later.
  static constexpr int kSpinChecks = 64;
  template <class Ready>
  static void SpinUntil(const Ready& ready) {
    const auto until = std::chrono::steady_clock::now() + kSpin;
    for (;;) {
      for (int i = 0; i < kSpinChecks; ++i) {
        if (ready()) return;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#elif defined(__aarch64__)
        asm volatile("yield");
#endif
      }
      if (std::chrono::steady_clock::now() >= until) return;
    }
  }

  // A worker that sees the next job while it spins runs it without taking
  // the mutex: job_ and call_ are written before the generation they are published with
  // (release, read with acquire), and the job's slice count travels in the
  // same word, so that a worker outside the job (t >= slices) never reads a
  // later job's fields. Only a worker that stopped spinning sleeps on wake_.
  void Work(int t) {
    std::uint64_t seen = 0;
    for (;;) {
      SpinUntil([&] { return generation_.load(std::memory_order_acquire) != seen; });
      std::uint64_t generation = generation_.load(std::memory_order_acquire);
      if (generation == seen) {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || generation_.load(std::memory_order_acquire) != seen; });
        if (stop_) return;
        generation = generation_.load(std::memory_order_relaxed);
      }
      seen = generation;
      if (static_cast<std::uint64_t>(t) >= (generation & kSliceMask)) continue;
      call_(job_, t);
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        const std::lock_guard lock(mutex_);  // the caller checks pending_ under the mutex before it sleeps
        done_.notify_one();
      }
    }
  }

  void Stop() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& worker : workers_) worker.join();
    workers_.clear();
  }

  int size_;
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const void* job_ = nullptr;
  void (*call_)(const void* job, int t) = nullptr;
  std::atomic<int> pending_{0};
  // The job's number << kSliceBits | its slice count (at most kMaxThreads).
  static constexpr int kSliceBits = 16;
  static constexpr std::uint64_t kSliceMask = (std::uint64_t{1} << kSliceBits) - 1;
  static_assert(kMaxThreads <= kSliceMask);
  std::atomic<std::uint64_t> generation_{0};
  bool stop_ = false;
};

std::mutex pool_mutex;  // serializes ParallelFor callers and SetNumThreads
std::unique_ptr<Pool> pool;
// A ParallelFor inside a body runs serially on its thread instead of waiting
// for the pool it is already part of.
thread_local bool inside_parallel_for = false;

Pool& GetPool() {
  if (!pool) pool = std::make_unique<Pool>(std::max(1u, std::thread::hardware_concurrency()));
  return *pool;
}

}  // namespace

int NumThreads() {
  std::lock_guard lock(pool_mutex);
  return GetPool().size();
}

void SetNumThreads(int n) {
  Require(n >= 1, "threads", "n", n, "must be at least 1");
  Require(n <= kMaxThreads, "threads", "n", n,
          "must be at most " + std::to_string(kMaxThreads) + " (far more than any machine's cores)");
  std::lock_guard lock(pool_mutex);
  if (!pool || pool->size() != n) {
    pool.reset();
    pool = std::make_unique<Pool>(n);
  }
}

void ParallelFor(std::int64_t n, std::int64_t min_chunk, const std::function<void(std::int64_t, std::int64_t)>& body) {
  if (n <= 0) return;
  if (inside_parallel_for) {
    body(0, n);
    return;
  }
  std::lock_guard lock(pool_mutex);
  Pool& workers = GetPool();
  const std::int64_t chunks = std::max<std::int64_t>(1, n / std::max<std::int64_t>(1, min_chunk));
  const int slices = static_cast<int>(std::min<std::int64_t>(workers.size(), chunks));
  // A ParallelFor inside `body` runs serially on its thread (the pool is
  // busy, and pool_mutex is held), on one slice as on many.
  struct Inside {
    Inside() { inside_parallel_for = true; }
    ~Inside() { inside_parallel_for = false; }
    Inside(const Inside&) = delete;
    Inside& operator=(const Inside&) = delete;
  };
  if (slices == 1) {
    const Inside inside;
    body(0, n);
    return;
  }
  workers.Run(slices, [&](int t) {
    const Inside inside;
    body(t * n / slices, (t + 1) * n / slices);
  });
}

}  // namespace posenc
