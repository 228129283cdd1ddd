// Copy bandwidth, FMA peak and int8 dot-product peak of this machine (see
// machine_limits.h). The FMA and dot-product loops are a Highway module
// compiled for every target and dispatched to the best one at run time,
// like posenc's own kernels (AVX3_DL too, as matmul.cc compiles it).
#ifndef HWY_WANT_AVX3_DL
#define HWY_WANT_AVX3_DL
#endif
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "machine_limits.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/cache_control.h"

#include <cstring>

HWY_BEFORE_NAMESPACE();
namespace posenc::bench::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// 12 independent chains acc = acc * m + a: Zen 3 and Intel cores need
// latency (4) x FMA pipes (2) = 8 in flight; 12 leaves margin and still fits
// 16 registers with m and a. m < 1 keeps every value finite and normal.
// Returns the flops done, and writes a lane sum so nothing is optimized away.
double FmaChains(std::int64_t iterations, float* sink) {
  const hn::ScalableTag<float> df;
  const auto m = hn::Set(df, 0.9999999f);
  const auto a = hn::Set(df, 1e-7f);
  auto a0 = hn::Set(df, 0.5f), a1 = hn::Set(df, 0.6f), a2 = hn::Set(df, 0.7f);
  auto a3 = hn::Set(df, 0.8f), a4 = hn::Set(df, 0.9f), a5 = hn::Set(df, 1.0f);
  auto a6 = hn::Set(df, 1.1f), a7 = hn::Set(df, 1.2f), a8 = hn::Set(df, 1.3f);
  auto a9 = hn::Set(df, 1.4f), a10 = hn::Set(df, 1.5f), a11 = hn::Set(df, 1.6f);
  for (std::int64_t i = 0; i < iterations; ++i) {
    a0 = hn::MulAdd(a0, m, a);
    a1 = hn::MulAdd(a1, m, a);
    a2 = hn::MulAdd(a2, m, a);
    a3 = hn::MulAdd(a3, m, a);
    a4 = hn::MulAdd(a4, m, a);
    a5 = hn::MulAdd(a5, m, a);
    a6 = hn::MulAdd(a6, m, a);
    a7 = hn::MulAdd(a7, m, a);
    a8 = hn::MulAdd(a8, m, a);
    a9 = hn::MulAdd(a9, m, a);
    a10 = hn::MulAdd(a10, m, a);
    a11 = hn::MulAdd(a11, m, a);
  }
  const auto sum =
      hn::Add(hn::Add(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)), hn::Add(hn::Add(a4, a5), hn::Add(a6, a7))),
              hn::Add(hn::Add(a8, a9), hn::Add(a10, a11)));
  *sink = hn::GetLane(hn::SumOfLanes(df, sum));
  return 2.0 * 12.0 * static_cast<double>(hn::Lanes(df)) * static_cast<double>(iterations);
}

// Copies with non-temporal (streaming) stores: the destination is written
// without first being read into the cache, so a copy moves exactly its bytes
// read + written, as an in-place kernel does. `dst` and `src` are 64-byte
// aligned; bytes a multiple of 64.
void StreamCopy(char* HWY_RESTRICT dst, const char* HWY_RESTRICT src, std::size_t bytes) {
  const hn::ScalableTag<std::uint8_t> d;
  const std::size_t lanes = hn::Lanes(d);
  std::size_t i = 0;
  for (; i + 4 * lanes <= bytes; i += 4 * lanes) {
    const auto v0 = hn::Load(d, reinterpret_cast<const std::uint8_t*>(src + i));
    const auto v1 = hn::Load(d, reinterpret_cast<const std::uint8_t*>(src + i + lanes));
    const auto v2 = hn::Load(d, reinterpret_cast<const std::uint8_t*>(src + i + 2 * lanes));
    const auto v3 = hn::Load(d, reinterpret_cast<const std::uint8_t*>(src + i + 3 * lanes));
    hn::Stream(v0, d, reinterpret_cast<std::uint8_t*>(dst + i));
    hn::Stream(v1, d, reinterpret_cast<std::uint8_t*>(dst + i + lanes));
    hn::Stream(v2, d, reinterpret_cast<std::uint8_t*>(dst + i + 2 * lanes));
    hn::Stream(v3, d, reinterpret_cast<std::uint8_t*>(dst + i + 3 * lanes));
  }
  hwy::FlushStream();
  std::memcpy(dst + i, src + i, bytes - i);
}

const char* FmaTargetName() { return hwy::TargetName(HWY_TARGET); }

// 12 independent chains of the integer prefill kernel's step
// (int8_prefill-inl.h): AVX3_DL acc += vpdpbusd(a, b), 4 byte products an
// int32 lane in one instruction; AVX3 and AVX2 acc16 += pmaddubsw(a, b), 2
// products an int16 lane (the kernel sums several in int16 before one
// pmaddwd; the lanes wrap here, which costs nothing). Returns 2 x the byte
// products done (0 on a target without them) and writes a lane so nothing
// is optimized away.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
#if HWY_TARGET <= HWY_AVX3
using Int8Vector = __m512i;
HWY_INLINE Int8Vector Int8Set(std::int32_t v) { return _mm512_set1_epi32(v); }
HWY_INLINE Int8Vector Int8Step(Int8Vector acc, Int8Vector a, Int8Vector b) {
#if HWY_TARGET == HWY_AVX3_DL
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
  return acc;
#else
  return _mm512_add_epi16(acc, _mm512_maddubs_epi16(a, b));
#endif
}
HWY_INLINE std::int32_t Int8Lane(Int8Vector v) { return _mm_cvtsi128_si32(_mm512_castsi512_si128(v)); }
#else
using Int8Vector = __m256i;
HWY_INLINE Int8Vector Int8Set(std::int32_t v) { return _mm256_set1_epi32(v); }
HWY_INLINE Int8Vector Int8Step(Int8Vector acc, Int8Vector a, Int8Vector b) {
  return _mm256_add_epi16(acc, _mm256_maddubs_epi16(a, b));
}
HWY_INLINE std::int32_t Int8Lane(Int8Vector v) { return _mm_cvtsi128_si32(_mm256_castsi256_si128(v)); }
#endif
double Int8DotChains(std::int64_t iterations, std::int32_t* sink) {
  const Int8Vector a = Int8Set(0x01020304), b = Int8Set(0x05060708);
  Int8Vector acc[12];
  for (int c = 0; c < 12; ++c) acc[c] = Int8Set(c);
  for (std::int64_t i = 0; i < iterations; ++i) {
#pragma GCC unroll 12
    for (auto& chain : acc) chain = Int8Step(chain, a, b);
  }
  std::int32_t sum = 0;
  for (const auto& chain : acc) sum += Int8Lane(chain);
  *sink = sum;
  const double products = HWY_TARGET == HWY_AVX3_DL ? 4.0 : 2.0;  // a 32-bit lane's
  return 2.0 * 12.0 * products * static_cast<double>(sizeof(Int8Vector) / 4) * static_cast<double>(iterations);
}
const char* Int8Instruction() { return HWY_TARGET == HWY_AVX3_DL ? "vpdpbusd" : "pmaddubsw"; }
#else
double Int8DotChains(std::int64_t, std::int32_t* sink) {
  *sink = 0;
  return 0.0;
}
const char* Int8Instruction() { return ""; }
#endif

}  // namespace posenc::bench::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <algorithm>
#include <chrono>
#include <vector>

#include "hwy/aligned_allocator.h"
#include "machine_limits.h"
#include "posenc/parallel.h"

namespace posenc::bench {

HWY_EXPORT(FmaChains);
HWY_EXPORT(FmaTargetName);
HWY_EXPORT(Int8DotChains);
HWY_EXPORT(Int8Instruction);
HWY_EXPORT(StreamCopy);

namespace {

double Now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// The fastest of reps timed calls of run, after one untimed call (the
// warm-up: wakes the pool, lets clocks settle).
template <typename Run>
double BestSeconds(const Run& run, int reps) {
  run();
  double best = 1e300;
  for (int i = 0; i < std::max(1, reps); ++i) {
    const double start = Now();
    run();
    best = std::min(best, Now() - start);
  }
  return best;
}

// Splits [0, bytes) into one slice per thread at 4 KiB granularity.
void ParallelCopy(char* dst, const char* src, std::size_t bytes, bool stream) {
  constexpr std::size_t kBlock = 4096;
  const auto blocks = static_cast<std::int64_t>((bytes + kBlock - 1) / kBlock);
  ParallelFor(blocks, 1, [&](std::int64_t begin, std::int64_t end) {
    const std::size_t from = static_cast<std::size_t>(begin) * kBlock;
    const std::size_t to = std::min(bytes, static_cast<std::size_t>(end) * kBlock);
    if (stream) {
      HWY_DYNAMIC_DISPATCH(StreamCopy)(dst + from, src + from, to - from);
    } else {
      std::memcpy(dst + from, src + from, to - from);
    }
  });
}

}  // namespace

CopyProbe::CopyProbe(std::size_t bytes)
    : bytes_(bytes), src_(hwy::AllocateAligned<char>(bytes)), dst_(hwy::AllocateAligned<char>(bytes)) {
  // First touch from the pool's threads, so pages are mapped (and placed)
  // by the threads that later copy them.
  const std::int64_t pages = static_cast<std::int64_t>(bytes / 4096);
  ParallelFor(pages, 1, [&](std::int64_t begin, std::int64_t end) {
    const std::size_t from = static_cast<std::size_t>(begin) * 4096;
    const std::size_t count = static_cast<std::size_t>(end - begin) * 4096;
    std::memset(src_.get() + from, 1, count);
    std::memset(dst_.get() + from, 0, count);
  });
  std::memset(src_.get() + pages * 4096, 1, bytes - pages * 4096);
  std::memset(dst_.get() + pages * 4096, 0, bytes - pages * 4096);
  for (bool stream : {false, true}) ParallelCopy(dst_.get(), src_.get(), bytes_, stream);  // warm-up, untimed
}

void CopyProbe::Run() {
  for (bool stream : {false, true}) {
    const double start = Now();
    ParallelCopy(dst_.get(), src_.get(), bytes_, stream);
    const double seconds = Now() - start;
    if (seconds < best_seconds_) {
      best_seconds_ = seconds;
      best_method_ = stream ? "stream" : "memcpy";
    }
  }
  ++runs_;
}

CopyBandwidth CopyProbe::Best() const {
  return {.gbps = 2.0 * static_cast<double>(bytes_) / best_seconds_ / 1e9,
          .seconds = best_seconds_,
          .bytes = bytes_,
          .threads = NumThreads(),
          .method = best_method_,
          .runs = runs_};
}

CopyBandwidth MeasureCopyBandwidth(const CopyBandwidthOptions& options) {
  CopyProbe probe(options.bytes);
  probe.RunUntil(std::max(1, options.reps));
  return probe.Best();
}

FmaPeak MeasureFmaPeak(int reps) {
  const int threads = NumThreads();
  // ~2^23 iterations of 12 vector FMAs: tens of milliseconds per thread on
  // AVX2, long enough to dwarf the pool's wake-up.
  constexpr std::int64_t kIterations = std::int64_t{1} << 23;
  std::vector<float> sinks(static_cast<std::size_t>(threads) * 16);
  std::vector<double> flops(static_cast<std::size_t>(threads));
  const auto run = [&] {
    ParallelFor(threads, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t t = begin; t < end; ++t) {
        flops[t] = HWY_DYNAMIC_DISPATCH(FmaChains)(kIterations, &sinks[t * 16]);
      }
    });
  };
  const double best = BestSeconds(run, reps);
  double total = 0;
  for (double f : flops) total += f;
  return {.gflops = total / best / 1e9, .threads = threads, .target = HWY_DYNAMIC_DISPATCH(FmaTargetName)()};
}

Int8Peak MeasureInt8Peak(int reps) {
  const int threads = NumThreads();
  constexpr std::int64_t kIterations = std::int64_t{1} << 23;  // as MeasureFmaPeak
  std::vector<std::int32_t> sinks(static_cast<std::size_t>(threads) * 16);
  std::vector<double> ops(static_cast<std::size_t>(threads));
  const auto run = [&] {
    ParallelFor(threads, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t t = begin; t < end; ++t) {
        ops[t] = HWY_DYNAMIC_DISPATCH(Int8DotChains)(kIterations, &sinks[t * 16]);
      }
    });
  };
  const double best = BestSeconds(run, reps);
  double total = 0;
  for (double o : ops) total += o;
  return {.gops = total / best / 1e9,
          .threads = threads,
          .target = HWY_DYNAMIC_DISPATCH(FmaTargetName)(),
          .instruction = HWY_DYNAMIC_DISPATCH(Int8Instruction)()};
}

}  // namespace posenc::bench
#endif  // HWY_ONCE
