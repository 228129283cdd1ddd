// SharedMemory and InternalOverlap (src/util/tensor_overlap.h) against the
// plain definition: every byte of every element enumerated, over random
// small views of one buffer (slices, transposes, zero, negative and
// overlapping strides), and the layouts the kernels meet.
#include "util/tensor_overlap.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <map>
#include <random>
#include <set>

#include "test_util.h"

namespace posenc {
namespace {

using testing::ExpectError;

// Byte offset -> how many elements hold it, and the element count.
std::map<std::int64_t, int> BytesOf(const ConstTensorView& v, const unsigned char* base) {
  std::map<std::int64_t, int> bytes;
  const auto item = static_cast<std::int64_t>(DTypeSize(v.dtype));
  const std::int64_t start = static_cast<const unsigned char*>(v.data) - base;
  for (std::int64_t b = 0; b < v.shape[0]; ++b) {
    for (std::int64_t s = 0; s < v.shape[1]; ++s) {
      for (std::int64_t h = 0; h < v.shape[2]; ++h) {
        for (std::int64_t d = 0; d < v.shape[3]; ++d) {
          const std::int64_t at = start + (v.Offset(b, s, h) + d * v.strides[3]) * item;
          for (std::int64_t e = 0; e < item; ++e) ++bytes[at + e];
        }
      }
    }
  }
  return bytes;
}

bool BruteShared(const ConstTensorView& a, const ConstTensorView& b, const unsigned char* base) {
  const auto x = BytesOf(a, base), y = BytesOf(b, base);
  for (const auto& [at, count] : x) {
    if (y.contains(at)) return true;
  }
  return false;
}

bool BruteInternal(const ConstTensorView& v, const unsigned char* base) {
  for (const auto& [at, count] : BytesOf(v, base)) {
    if (count > 1) return true;
  }
  return false;
}

// A random view inside a buffer of `size` elements of 4 bytes: small
// shapes, strides in [-6, 6] (the last 1 or anything), an element offset
// that keeps every element inside; sometimes 2-byte elements at an odd
// 2-byte offset (a float16 view sharing half of a float).
ConstTensorView RandomView(std::mt19937_64& rng, const unsigned char* base, std::int64_t size) {
  while (true) {
    ConstTensorView v;
    v.dtype = rng() % 4 == 0 ? DType::kF16 : DType::kF32;
    for (std::size_t d = 0; d < 4; ++d) {
      v.shape[d] = static_cast<std::int64_t>(1 + rng() % 3);
      v.strides[d] = static_cast<std::int64_t>(rng() % 13) - 6;
    }
    if (rng() % 2) v.strides[3] = 1;
    const auto item = static_cast<std::int64_t>(DTypeSize(v.dtype));
    std::int64_t low = 0, high = 0;  // element offsets from the start
    for (std::size_t d = 0; d < 4; ++d) {
      const std::int64_t reach = (v.shape[d] - 1) * v.strides[d];
      (reach < 0 ? low : high) += reach;
    }
    const std::int64_t elements = size * 4 / item;
    if (high - low >= elements) continue;
    const std::int64_t start =
        -low + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(elements - (high - low)));
    v.data = base + start * item;
    return v;
  }
}

TEST(TensorOverlap, AgreesWithEnumeratingEveryByte) {
  std::vector<unsigned char> buffer(4 * 64);
  const unsigned char* base = buffer.data();
  std::mt19937_64 rng(7);
  int shared = 0, internal = 0;
  for (int trial = 0; trial < 5000; ++trial) {
    const ConstTensorView a = RandomView(rng, base, 64), b = RandomView(rng, base, 64);
    const bool expect_shared = BruteShared(a, b, base), expect_internal = BruteInternal(a, base);
    shared += expect_shared;
    internal += expect_internal;
    ASSERT_EQ(SharedMemory(a, b), expect_shared ? Overlap::kShared : Overlap::kNone) << trial;
    ASSERT_EQ(InternalOverlap(a), expect_internal ? Overlap::kShared : Overlap::kNone) << trial;
  }
  // Both answers occur often enough for the comparison to mean something.
  EXPECT_GT(shared, 500);
  EXPECT_LT(shared, 4500);
  EXPECT_GT(internal, 500);
  EXPECT_LT(internal, 4500);
}

// The layouts of real calls: q and k slices of one fused projection share
// no element (at any sequence length: equal strides are merged, so the
// search stays short), two windows of one tensor do, an expanded tensor
// overlaps itself, a dense one does not.
TEST(TensorOverlap, KernelLayouts) {
  constexpr std::int64_t kSeq = 1 << 16, kQ = 32, kKv = 8, kDim = 128, kWidth = (kQ + 2 * kKv) * kDim;
  // Addresses only (a 1.5 GiB tensor is never allocated nor read).
  const auto at = [](std::int64_t element) {
    // NOLINTNEXTLINE(performance-no-int-to-ptr): an address to compare, never dereferenced
    return reinterpret_cast<const void*>((std::uintptr_t{1} << 20) + 4 * static_cast<std::uintptr_t>(element));
  };
  const std::array<std::int64_t, 4> strides{kSeq * kWidth, kWidth, kDim, 1};
  const ConstTensorView q{at(0), DType::kF32, {1, kSeq, kQ, kDim}, strides};
  const ConstTensorView k{at(kQ * kDim), DType::kF32, {1, kSeq, kKv, kDim}, strides};
  const ConstTensorView v{at((kQ + kKv) * kDim), DType::kF32, {1, kSeq, kKv, kDim}, strides};
  EXPECT_EQ(SharedMemory(q, k), Overlap::kNone);
  EXPECT_EQ(SharedMemory(k, v), Overlap::kNone);
  EXPECT_EQ(InternalOverlap(q), Overlap::kNone);
  // k one element further overlaps q's last head.
  const ConstTensorView k_shifted{at(kQ * kDim - 1), DType::kF32, {1, kSeq, kKv, kDim}, strides};
  EXPECT_EQ(SharedMemory(q, k_shifted), Overlap::kShared);
  // Windows x[:, 0:4] and x[:, 2:6] of x [1, 6, 4, 8].
  const std::array<std::int64_t, 4> dense{6 * 32, 32, 8, 1};
  EXPECT_EQ(SharedMemory({at(0), DType::kF32, {1, 4, 4, 8}, dense}, {at(2 * 32), DType::kF32, {1, 4, 4, 8}, dense}),
            Overlap::kShared);
  // torch.randn(1, 1, 1, 8).expand(1, 4, 3, 8).
  EXPECT_EQ(InternalOverlap({at(0), DType::kF32, {1, 4, 3, 8}, {8, 0, 0, 1}}), Overlap::kShared);
  // Empty views hold nothing.
  EXPECT_EQ(SharedMemory({at(0), DType::kF32, {1, 0, 4, 8}, dense}, q), Overlap::kNone);
}

TEST(TensorOverlap, RequireSeparateOutputNamesTheOutput) {
  std::vector<float> x(6 * 8);
  const std::array<std::int64_t, 4> dense{48, 8, 8, 1};
  const ConstTensorView all{x.data(), DType::kF32, {1, 6, 1, 8}, dense};
  EXPECT_NO_THROW(RequireSeparateOutput("rope", "out", all, all));  // in place
  ExpectError(
      [&] {
        RequireSeparateOutput("rope", "operands[0].out", {x.data(), DType::kF32, {1, 4, 1, 8}, dense},
                              {x.data() + 16, DType::kF32, {1, 4, 1, 8}, dense});
      },
      {"[rope] operands[0].out = overlaps its input", "either the input itself (in place) or separate memory"});
  const ConstTensorView expanded{x.data(), DType::kF32, {1, 4, 3, 8}, {8, 0, 0, 1}};
  ExpectError([&] { RequireSeparateOutput("sinusoidal", "out", expanded, expanded); },
              {"[sinusoidal] out = shape [1, 4, 3, 8], strides [8, 0, 0, 1]", "written more than once"});
}

}  // namespace
}  // namespace posenc
