// Matmul throughput (Google Benchmark) on the model's linear-layer shapes,
// for posenc's kernel and OpenBLAS (the peer, when CMake found it).
//
// y [m, n] = x [m, k] W [n, k]^T with m = 2048 tokens and (n, k) from a
// 576-wide model: (960, 576) qkv, (3072, 576) and (576, 1536) MLP,
// (576, 576) attention output, (49152, 576) tied-embedding logits.
// Implementations, each at 1 and 2 threads:
//   posenc            MatMul on weights packed once (not timed)
//   openblas          cblas_sgemm(RowMajor, NoTrans, Trans) with OpenBLAS's
//                     own threads (openblas_set_num_threads)
//   openblas_blocks   single-threaded cblas_sgemm calls on fixed blocks of
//                     128 rows inside posenc's ParallelFor: the result does
//                     not depend on the thread count, as posenc's
// Before timing, every implementation's output is checked against
// posenc::reference::MatMul on 24 rows (the first, middle and last 8).
// Counters: GFLOP/s (2 m n k per call, 1e9 flop/s), peak_ratio (that over
// peak_GFLOP/s, the best fp32 FMA peak measured with the same thread count
// at start-up and after each case so far),
// max_error (largest |y - reference| / sum |x||w| over the checked rows).
//
// Decode products (m = 1, int8 activations) of a quantized matrix beyond
// the caches (Q4_1 60 MiB, Q5_0 66 MiB, Q8_0 102 MiB, Q4_K 54 MiB, Q5_K
// 66 MiB, Q6_K 79 MiB: the weights come from memory at every call, as in a
// decode step), (n, k) = (65536, 1536), the
// rows as the GGUF stores them ("rows") and 8 interleaved as a model loaded
// for int8 decode keeps them ("groups", src/kernels/row_groups.h). Counters:
// GB/s of weights read, copy_ratio (that over copy_GB/s, the best copy
// bandwidth, read + written, measured with the same thread count and
// interleaved with the case's repetitions), max_error (against
// posenc::reference::MatMul on the dequantized weights and x rounded as
// int8, over 64 rows, relative to sum |x||w|).
//
// Int8 prefill products (m = 2048, int8 activations, the integer kernel of
// int8_prefill-inl.h) of Gemma 3 270M Q4_K_M's matrix types and shapes:
// Q8_0 (8192, 640) (its output matrix is 262,144 rows of these), Q5_0
// (4096, 640) (gate and up), Q4_K (640, 1024) (attention output), Q6_K
// (640, 2048) (down). Counters: GOP/s (2 m n k per call), int8_peak_ratio
// (that over the byte dot-product peak, MeasureInt8Peak, measured with the
// same thread count after the case), max_error (against the reference on
// x rounded as int8, 24 rows, relative to sum |x||w|).
//
//   matmul_benchmark [Google Benchmark flags]
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "machine_limits.h"
#include "posenc/matmul.h"
#include "posenc/parallel.h"
#include "random_blocks.h"

#ifdef POSENC_HAVE_OPENBLAS
#include <cblas.h>
#endif

namespace posenc::bench {
namespace {

constexpr std::int64_t kTokens = 2048;

// Largest |y - reference| / sum |x||w| of y [m, n] = x [m, k] w [n, k]^T.
double WorstRelativeError(std::span<const float> x, std::int64_t m, std::span<const float> w, std::int64_t n,
                          std::int64_t k, std::span<const float> y) {
  std::vector<float> expected(static_cast<std::size_t>(m * n));
  reference::MatMul(x, m, w, n, k, expected);
  double worst = 0;
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double magnitude = 0;
      for (std::int64_t kk = 0; kk < k; ++kk) magnitude += std::abs(static_cast<double>(x[i * k + kk]) * w[j * k + kk]);
      worst = std::max(worst, std::abs(static_cast<double>(y[i * n + j]) - expected[i * n + j]) / magnitude);
    }
  }
  return worst;
}
// WorstRelativeError over 24 of the m rows (8 at the start, the middle and
// the end) of y [m, n] = x [m, k] w [n, k]^T.
double WorstOfSampledRows(std::span<const float> x, std::int64_t m, std::span<const float> w, std::int64_t n,
                          std::int64_t k, std::span<const float> y) {
  double worst = 0;
  for (const std::int64_t row : {std::int64_t{0}, m / 2, m - 8}) {
    const auto rows = [&](std::span<const float> v, std::int64_t cols) {
      return v.subspan(static_cast<std::size_t>(row * cols), static_cast<std::size_t>(8 * cols));
    };
    worst = std::max(worst, WorstRelativeError(rows(x, k), 8, w, n, k, rows(y, n)));
  }
  return worst;
}

constexpr std::int64_t kBlasBlockRows = 128;

// Best fp32 FMA peak seen so far, by thread count: measured in main and again
// after every case, so that a neighbour busy on a core during one
// measurement does not inflate the ratios.
std::map<int, double> peak_gflops;

double UpdatePeak(int reps) {
  const FmaPeak peak = MeasureFmaPeak(reps);
  double& best = peak_gflops[peak.threads];
  best = std::max(best, peak.gflops);
  return best;
}

enum class Impl { kPosenc, kOpenBlas, kOpenBlasBlocks };

const char* ImplName(Impl impl) {
  switch (impl) {
    case Impl::kPosenc: return "posenc";
    case Impl::kOpenBlas: return "openblas";
    case Impl::kOpenBlasBlocks: return "openblas_blocks";
  }
  return "";
}

struct Shape {
  std::int64_t n, k;
};

// Inputs and outputs of one shape, made once and shared by every case of it.
struct Workload {
  std::int64_t m, n, k;
  std::vector<float> x, w, y;
  PackedWeights packed;

  Workload(std::int64_t m, std::int64_t n, std::int64_t k)
      : m(m), n(n), k(k), x(Random(m * k, 1)), w(Random(n * k, 2)), y(static_cast<std::size_t>(m * n)),
        packed(PackedWeights::Pack(w, n, k)) {}

  static std::vector<float> Random(std::int64_t count, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> v(static_cast<std::size_t>(count));
    for (float& f : v) f = dist(rng);
    return v;
  }

  void Run(Impl impl) {
    switch (impl) {
      case Impl::kPosenc: MatMul(x, m, packed, y); return;
#ifdef POSENC_HAVE_OPENBLAS
      case Impl::kOpenBlas:
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n),
                    static_cast<int>(k), 1.0f, x.data(), static_cast<int>(k), w.data(), static_cast<int>(k), 0.0f,
                    y.data(), static_cast<int>(n));
        return;
      case Impl::kOpenBlasBlocks: {
        const std::int64_t blocks = (m + kBlasBlockRows - 1) / kBlasBlockRows;
        ParallelFor(blocks, 1, [&](std::int64_t begin, std::int64_t end) {
          const std::int64_t row = begin * kBlasBlockRows;
          const std::int64_t rows = std::min(m, end * kBlasBlockRows) - row;
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows), static_cast<int>(n),
                      static_cast<int>(k), 1.0f, x.data() + row * k, static_cast<int>(k), w.data(), static_cast<int>(k),
                      0.0f, y.data() + row * n, static_cast<int>(n));
        });
        return;
      }
#else
      default: return;
#endif
    }
  }

  double CheckError() const { return WorstOfSampledRows(x, m, w, n, k, y); }
};

Workload& Prepare(Shape shape) {
  static std::unique_ptr<Workload> last;
  if (!last || last->n != shape.n || last->k != shape.k) {
    last.reset();  // free the previous shape first
    last = std::make_unique<Workload>(kTokens, shape.n, shape.k);
  }
  return *last;
}

void SetThreads(Impl impl, int threads) {
  SetNumThreads(threads);
#ifdef POSENC_HAVE_OPENBLAS
  openblas_set_num_threads(impl == Impl::kOpenBlas ? threads : 1);
#else
  (void)impl;
#endif
}

// Skips the case when `error` is above what a float32 sum of k terms can
// err by (~k * 6e-8 of sum |x||w|); otherwise times run() over the case's
// iterations: the seconds.
template <class Run>
std::optional<double> TimeIfAccurate(benchmark::State& state, double error, std::int64_t k, const Run& run) {
  const double tolerance = 1e-7 * static_cast<double>(k);
  if (!(error <= tolerance)) {
    state.SkipWithError(("max error " + std::to_string(error) + " above " + std::to_string(tolerance)).c_str());
    return std::nullopt;
  }
  const auto start = std::chrono::steady_clock::now();
  for (auto _ : state) {
    run();
    benchmark::ClobberMemory();
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void BM_MatMul(benchmark::State& state, Impl impl, Shape shape) {
  const int threads = static_cast<int>(state.range(0));
  SetThreads(impl, threads);
  Workload& work = Prepare(shape);
  std::fill(work.y.begin(), work.y.end(), std::nanf(""));
  work.Run(impl);
  const double error = work.CheckError();
  const std::optional<double> timed = TimeIfAccurate(state, error, shape.k, [&] { work.Run(impl); });
  if (!timed) return;
  const double seconds = *timed;
  const double flops = 2.0 * static_cast<double>(kTokens * shape.n * shape.k) * static_cast<double>(state.iterations());
  const double peak = UpdatePeak(3);
  state.counters["GFLOP/s"] = flops / seconds / 1e9;
  state.counters["peak_ratio"] = flops / seconds / 1e9 / peak;
  state.counters["peak_GFLOP/s"] = peak;
  state.counters["max_error"] = error;
}

// A decode product: one row of x against n rows of random `type` blocks
// (testing::RandomBlocks), kept as rows or in groups.
struct DecodeWorkload {
  static constexpr std::int64_t kN = 65536, kK = 1536;
  GgmlType type;
  std::vector<std::byte> bytes;
  std::vector<float> x, y;
  PackedWeights packed;

  DecodeWorkload(GgmlType type, DotActivations layout)
      : type(type), bytes(testing::RandomBlocks(type, kN, kK, 4)), x(Workload::Random(kK, 3)),
        y(static_cast<std::size_t>(kN)), packed(Pack(type, bytes, kN, kK, layout)) {}

  static PackedWeights Pack(GgmlType type, const std::vector<std::byte>& bytes, std::int64_t n, std::int64_t k,
                            DotActivations layout) {
    const WeightRows part{type, n, bytes};
    return PackedWeights::FromRows({&part, 1}, k, WeightStorage::kAsStored, layout);
  }

  void Run() { MatMul(x, 1, packed, y, DotActivations::kInt8); }

  // Against the reference on x rounded as int8 and the first 64 rows.
  double CheckError() const {
    constexpr std::int64_t kRows = 64;
    const std::int64_t row_bytes = static_cast<std::int64_t>(bytes.size()) / kN;
    std::vector<float> w(static_cast<std::size_t>(kRows * kK));
    for (std::int64_t j = 0; j < kRows; ++j) {
      DequantizeRow(type, bytes.data() + j * row_bytes, w.data() + j * kK, kK, "w");
    }
    return WorstRelativeError(reference::Int8Activations(x), 1, w, kRows, kK, std::span(y).first(kRows));
  }
};

void BM_Decode(benchmark::State& state, GgmlType type, DotActivations layout) {
  const int threads = static_cast<int>(state.range(0));
  SetNumThreads(threads);
  DecodeWorkload work(type, layout);
  work.Run();
  const double error = work.CheckError();
  const double tolerance = 1e-7 * static_cast<double>(DecodeWorkload::kK);
  if (!(error <= tolerance)) {
    state.SkipWithError(("max error " + std::to_string(error) + " above " + std::to_string(tolerance)).c_str());
    return;
  }
  CopyProbe copy(std::size_t{128} << 20);
  double best = 1e300;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    work.Run();
    benchmark::ClobberMemory();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    state.PauseTiming();
    copy.Run();
    state.ResumeTiming();
  }
  const double gbps = work.packed.Bytes() / best / 1e9;
  state.counters["GB/s"] = gbps;
  state.counters["copy_GB/s"] = copy.Best().gbps;
  state.counters["copy_ratio"] = gbps / copy.Best().gbps;
  state.counters["max_error"] = error;
}

// An int8 prefill product: kTokens rows of x against n rows of random
// `type` blocks.
struct PrefillWorkload {
  GgmlType type;
  std::int64_t n, k;
  std::vector<std::byte> bytes;
  std::vector<float> x, y;
  PackedWeights packed;

  PrefillWorkload(GgmlType type, Shape shape)
      : type(type), n(shape.n), k(shape.k), bytes(testing::RandomBlocks(type, n, k, 5)),
        x(Workload::Random(kTokens * k, 6)), y(static_cast<std::size_t>(kTokens * n)),
        packed(DecodeWorkload::Pack(type, bytes, n, k, DotActivations::kInt8)) {}

  void Run() { MatMul(x, kTokens, packed, y, DotActivations::kInt8); }

  double CheckError() const {
    const std::int64_t row_bytes = static_cast<std::int64_t>(bytes.size()) / n;
    std::vector<float> w(static_cast<std::size_t>(n * k));
    for (std::int64_t j = 0; j < n; ++j) DequantizeRow(type, bytes.data() + j * row_bytes, w.data() + j * k, k, "w");
    return WorstOfSampledRows(reference::Int8Activations(x), kTokens, w, n, k, y);
  }
};

void BM_Int8Prefill(benchmark::State& state, GgmlType type, Shape shape) {
  const int threads = static_cast<int>(state.range(0));
  SetNumThreads(threads);
  PrefillWorkload work(type, shape);
  work.Run();
  const double error = work.CheckError();
  const std::optional<double> timed = TimeIfAccurate(state, error, shape.k, [&] { work.Run(); });
  if (!timed) return;
  const double seconds = *timed;
  const double ops = 2.0 * static_cast<double>(kTokens * shape.n * shape.k) * static_cast<double>(state.iterations());
  const Int8Peak peak = MeasureInt8Peak(3);
  state.counters["GOP/s"] = ops / seconds / 1e9;
  state.counters["int8_peak_ratio"] = peak.gops > 0 ? ops / seconds / 1e9 / peak.gops : 0.0;
  state.counters["int8_peak_GOP/s"] = peak.gops;
  state.counters["max_error"] = error;
}

void RegisterAll() {
  std::vector<Impl> impls{Impl::kPosenc};
#ifdef POSENC_HAVE_OPENBLAS
  impls.push_back(Impl::kOpenBlas);
  impls.push_back(Impl::kOpenBlasBlocks);
#endif
  for (const Shape shape : {Shape{960, 576}, Shape{3072, 576}, Shape{576, 1536}, Shape{576, 576}, Shape{49152, 576}}) {
    for (const Impl impl : impls) {
      const std::string name = std::string("matmul/") + ImplName(impl) + "/m=" + std::to_string(kTokens) +
                               "/n=" + std::to_string(shape.n) + "/k=" + std::to_string(shape.k);
      benchmark::RegisterBenchmark(name.c_str(), BM_MatMul, impl, shape)
          ->ArgName("threads")
          ->Arg(1)
          ->Arg(2)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  for (const auto& [type, shape] :
       {std::pair{GgmlType::kQ8_0, Shape{8192, 640}}, std::pair{GgmlType::kQ5_0, Shape{4096, 640}},
        std::pair{GgmlType::kQ4_K, Shape{640, 1024}}, std::pair{GgmlType::kQ6_K, Shape{640, 2048}}}) {
    const std::string name = "prefill/int8/" + std::string(TraitsOf(type).name) + "/m=" + std::to_string(kTokens) +
                             "/n=" + std::to_string(shape.n) + "/k=" + std::to_string(shape.k);
    benchmark::RegisterBenchmark(name.c_str(), BM_Int8Prefill, type, shape)
        ->ArgName("threads")
        ->Arg(1)
        ->Arg(2)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  for (const GgmlType type :
       {GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K}) {
    for (const DotActivations layout : {DotActivations::kFloat32, DotActivations::kInt8}) {
      const std::string name = std::string("decode/") + (layout == DotActivations::kInt8 ? "groups" : "rows") + "/" +
                               std::string(TraitsOf(type).name) + "/m=1/n=" + std::to_string(DecodeWorkload::kN) +
                               "/k=" + std::to_string(DecodeWorkload::kK);
      benchmark::RegisterBenchmark(name.c_str(), BM_Decode, type, layout)
          ->ArgName("threads")
          ->Arg(1)
          ->Arg(2)
          ->Iterations(20)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
}

}  // namespace
}  // namespace posenc::bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;

  for (const int threads : {1, 2}) {
    posenc::SetNumThreads(threads);
    const double peak = posenc::bench::UpdatePeak(20);
    benchmark::AddCustomContext("fma_peak_gflops_" + std::to_string(threads) + "t", std::to_string(peak));
  }
  benchmark::AddCustomContext("fma_target", posenc::bench::MeasureFmaPeak(1).target);
#ifdef POSENC_HAVE_OPENBLAS
  benchmark::AddCustomContext("openblas", openblas_get_config());
#endif

  posenc::bench::RegisterAll();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
