// posenc::RoPE, the Tiny-LLM course's class, against the course's own
// computation transcribed in double precision: cos and sin of position p
// times freqs[k] = base^(-2k/dims), x1 and x2 the interleaved pairs
// (traditional) or the two halves, real = x1 cos - x2 sin and
// imag = x2 cos + x1 sin put back as pairs or halves. Both pairings, the
// three offset forms, f32/f16/bf16, positions up to 10^6; and each of the
// course's asserts as a posenc::Error.
#include "posenc/tiny_llm_rope.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "test_util.h"

namespace posenc {
namespace {

using testing::Buffer;
using testing::ExpectError;

constexpr std::int64_t kN = 2, kS = 5, kH = 3;

// The course's __call__ in double: row b's positions are starts[b] + s.
std::vector<double> CourseRope(const Buffer& x, std::int64_t dims, double base, bool traditional,
                               const std::vector<std::int64_t>& starts) {
  const std::int64_t half = dims / 2;
  std::vector<double> y(static_cast<std::size_t>(x.size()));
  for (std::int64_t b = 0; b < kN; ++b) {
    for (std::int64_t s = 0; s < kS; ++s) {
      const double p = static_cast<double>(starts[static_cast<std::size_t>(b)] + s);
      for (std::int64_t h = 0; h < kH; ++h) {
        const std::int64_t row = ((b * kS + s) * kH + h) * dims;
        for (std::int64_t k = 0; k < half; ++k) {
          const double angle = p * std::pow(base, -static_cast<double>(k) / static_cast<double>(half));
          const std::int64_t i = row + (traditional ? 2 * k : k), j = row + (traditional ? 2 * k + 1 : k + half);
          const double x1 = x.Get(i), x2 = x.Get(j);
          y[static_cast<std::size_t>(i)] = x1 * std::cos(angle) - x2 * std::sin(angle);
          y[static_cast<std::size_t>(j)] = x2 * std::cos(angle) + x1 * std::sin(angle);
        }
      }
    }
  }
  return y;
}

// posenc computes in float32 from double angles and rounds once: a few
// float32 ulps of |x| <= 1, or one ulp of the f16/bf16 output.
double Tolerance(DType dtype, double value) {
  return dtype == DType::kF32 ? 1e-6 : testing::UnitInLastPlace(dtype, value) * 1.01 + 1e-7;
}

void ExpectCourse(const Buffer& out, const std::vector<double>& expected) {
  for (std::int64_t i = 0; i < out.size(); ++i) {
    const double e = expected[static_cast<std::size_t>(i)];
    ASSERT_NEAR(out.Get(i), e, Tolerance(out.dtype, e)) << "element " << i;
  }
}

enum class Form { kNone, kSlice, kSlices };

struct Case {
  bool traditional;
  Form form;
  std::int64_t start;  // of the slice; row 1 of the slices form starts at 3 * start + 1
};

TEST(TinyLlmRope, MatchesTheCourseInDouble) {
  constexpr std::int64_t kDims = 16;
  for (const DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
    for (const bool traditional : {false, true}) {
      for (const Case c :
           {Case{traditional, Form::kNone, 0}, Case{traditional, Form::kSlice, 7}, Case{traditional, Form::kSlices, 4},
            Case{traditional, Form::kSlice, 1000000}, Case{traditional, Form::kSlices, 333333}}) {
        SCOPED_TRACE(std::string(DTypeName(dtype)) + (traditional ? " traditional" : " half-split") + " form " +
                     std::to_string(static_cast<int>(c.form)) + " start " + std::to_string(c.start));
        const std::vector<std::int64_t> starts =
            c.form == Form::kSlices ? std::vector{c.start, 3 * c.start + 1} : std::vector{c.start, c.start};
        const RoPE rope(kDims, *std::max_element(starts.begin(), starts.end()) + kS, 10000.0, traditional);
        Buffer x(dtype, kN * kS * kH * kDims), out(dtype, x.size());
        x.FillUniform(42);
        const std::array<std::int64_t, 4> shape{kN, kS, kH, kDims};
        if (c.form == Form::kNone) {
          rope(x.View(shape), out.View(shape));
        } else if (c.form == Form::kSlice) {
          rope(x.View(shape), out.View(shape), PositionSlice{c.start, c.start + kS});
        } else {
          const std::vector<PositionSlice> slices{{starts[0], starts[0] + kS}, {starts[1], starts[1] + kS}};
          rope(x.View(shape), out.View(shape), slices);
        }
        ExpectCourse(out, CourseRope(x, kDims, 10000.0, traditional, starts));
      }
    }
  }
}

TEST(TinyLlmRope, BaseAndInPlace) {
  constexpr std::int64_t kDims = 8;
  const RoPE rope(kDims, 64, 500000.0, /*traditional=*/true);
  Buffer x(DType::kF32, kN * kS * kH * kDims);
  x.FillUniform(7);
  const std::vector<double> expected = CourseRope(x, kDims, 500000.0, true, {10, 10});
  const TensorView view = x.View({kN, kS, kH, kDims});
  rope(view, view, PositionSlice{10, 10 + kS});
  ExpectCourse(x, expected);
}

TEST(TinyLlmRope, TheCoursesAssertsAsErrors) {
  Buffer x(DType::kF32, kN * kS * kH * 8), out(DType::kF32, x.size());
  const std::array<std::int64_t, 4> shape{kN, kS, kH, 8};
  const RoPE rope(8, 16);
  ExpectError(
      [&] {
        rope(x.View(shape), out.View(shape), PositionSlice{0, 4});
      },
      {"[rope] offset = slice(0, 4): must have length S = 5"});
  ExpectError(
      [&] {
        rope(x.View(shape), out.View(shape), PositionSlice{5, 0});
      },
      {"[rope] offset = slice(5, 0): must have length S = 5"});
  const std::int64_t max = std::numeric_limits<std::int64_t>::max();
  ExpectError(
      [&] {
        rope(x.View(shape), out.View(shape), PositionSlice{-max, max});
      },
      {"must have length S = 5"});  // stop - start does not fit an int64
  ExpectError(
      [&] {
        rope(x.View(shape), out.View(shape), PositionSlice{-2, 3});
      },
      {"[rope] offset = slice(-2, 3): must start at position 0 or later"});
  ExpectError(
      [&] {
        rope(x.View(shape), out.View(shape), PositionSlice{12, 17});
      },
      {"[rope] offset = slice(12, 17): must end at or before seq_len = 16 (the positions this RoPE was "
       "built for)"});
  const std::vector<PositionSlice> three{{0, 5}, {0, 5}, {0, 5}};
  ExpectError([&] { rope(x.View(shape), out.View(shape), three); },
              {"[rope] offset = a list of 3 slices: must have one slice per batch row, N = 2"});
  const std::vector<PositionSlice> second_short{{0, 5}, {1, 5}};
  ExpectError([&] { rope(x.View(shape), out.View(shape), second_short); },
              {"[rope] offset[1] = slice(1, 5): must have length S = 5"});
  const RoPE short_rope(8, 4);
  ExpectError([&] { short_rope(x.View(shape), out.View(shape)); },
              {"[rope] x.shape[1] = 5: must be at most seq_len = 4 (offset None: positions 0 to S - 1)"});
  const RoPE wide(16, 16);
  ExpectError([&] { wide(x.View(shape), out.View(shape)); }, {"[rope] x.shape[3] = 8: must equal dims = 16"});
  ExpectError([] { RoPE(7, 16); }, {"[rope] dims = 7: must be even and > 0 (dimensions rotate in pairs)"});
  ExpectError([] { RoPE(0, 16); }, {"[rope] dims = 0: must be even and > 0"});
  ExpectError([] { RoPE(8, 0); }, {"[rope] seq_len = 0: must be >= 1"});
  ExpectError([] { RoPE(8, 16, 1.0); }, {"[rope] base = 1: must be a finite number > 1"});
  ExpectError([] { RoPE(8, 16, std::nan("")); }, {"[rope] base = nan: must be a finite number > 1"});
}

}  // namespace
}  // namespace posenc
