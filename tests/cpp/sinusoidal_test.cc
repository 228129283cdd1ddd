// Sinusoidal encodings: the float64 table against the paper's formula, the
// relative property p_{k+D} = T(D) p_k, and the fast add kernel against the
// plain reference on every compiled SIMD target over a grid.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <string>

#include "posenc/parallel.h"
#include "posenc/sinusoidal.h"
#include "test_util.h"

namespace posenc {
namespace {

using testing::Buffer;
using testing::ExpectError;
using testing::ForEachTarget;

TEST(SinusoidalSpec, RejectsBadFields) {
  ExpectError([] { SinusoidalSpec{.dim = 0}.Validate(); }, {"[sinusoidal] dim = 0", "must be > 0"});
  ExpectError([] { SinusoidalSpec{.dim = 8, .base = 1.0}.Validate(); }, {"base = 1", "> 1"});
  ExpectError([] { SinusoidalSpec{.dim = 8, .base = NAN}.Validate(); }, {"base = nan"});
  ExpectError([] { SinusoidalSpec{.dim = 3, .spacing = SinusoidalSpacing::kEndpoints}.Validate(); },
              {"dim = 3", "endpoints"});
  ExpectError([] { ParseSinusoidalOrder("sin-cos"); }, {"order = \"sin-cos\"", "interleaved"});
  EXPECT_EQ(ParseSinusoidalOrder("concat"), SinusoidalOrder::kConcat);
  EXPECT_EQ(ParseSinusoidalSpacing("endpoints"), SinusoidalSpacing::kEndpoints);
}

// Sizes are checked before anything is allocated.
TEST(SinusoidalTable, RefusesSizesBeforeAllocating) {
  ExpectError([] { SinusoidalTable({.dim = std::int64_t{1} << 31}, 0, 4); }, {"dim = 2147483648", "<= 1048576"});
  ExpectError([] { SinusoidalTable({.dim = 1 << 20}, 0, std::int64_t{1} << 30); },
              {"count = 1073741824", "needs 8388608.0 GiB", "more than this machine's"});
  ExpectError([] { SinusoidalTable({.dim = 4}, std::numeric_limits<std::int64_t>::max() - 1, 4); },
              {"start = 9223372036854775806", "must fit in a signed 64-bit integer"});
}

// The paper: PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...).
TEST(SinusoidalTable, MatchesThePapersFormula) {
  const SinusoidalSpec spec{.dim = 16};
  const auto table = SinusoidalTable(spec, 0, 50);
  for (int pos = 0; pos < 50; ++pos) {
    for (int i = 0; i < 8; ++i) {
      const double angle = pos / std::pow(10000.0, 2.0 * i / 16);
      EXPECT_NEAR(table[pos * 16 + 2 * i], std::sin(angle), 1e-14);
      EXPECT_NEAR(table[pos * 16 + 2 * i + 1], std::cos(angle), 1e-14);
    }
  }
  // Position 0 is [0 1 0 1 ...]; the concat order is a permutation of it.
  const SinusoidalSpec concat{.dim = 16, .order = SinusoidalOrder::kConcat};
  const auto t2 = SinusoidalTable(concat, 0, 50);
  for (int pos = 0; pos < 50; ++pos) {
    for (int i = 0; i < 8; ++i) {
      EXPECT_EQ(t2[pos * 16 + i], table[pos * 16 + 2 * i]);
      EXPECT_EQ(t2[pos * 16 + 8 + i], table[pos * 16 + 2 * i + 1]);
    }
  }
}

// fairseq/tensor2tensor: w_k = exp(-k ln(base) / (P - 1)); first 1, last 1/base.
TEST(SinusoidalTable, EndpointsSpacingIsFairseqs) {
  const SinusoidalSpec spec{.dim = 10, .order = SinusoidalOrder::kConcat, .spacing = SinusoidalSpacing::kEndpoints};
  const auto w = SinusoidalInvFreq(spec);
  ASSERT_EQ(w.size(), 5u);
  EXPECT_EQ(w[0], 1.0);
  EXPECT_NEAR(w[4], 1e-4, 1e-18);
  for (int k = 0; k < 5; ++k) EXPECT_NEAR(w[k], std::exp(-k * std::log(10000.0) / 4), 1e-15 * w[k]);
}

TEST(SinusoidalTable, OddDimEndsInZero) {
  for (const auto order : {SinusoidalOrder::kInterleaved, SinusoidalOrder::kConcat}) {
    const SinusoidalSpec spec{.dim = 7, .order = order};
    const auto table = SinusoidalTable(spec, 0, 20);
    for (int pos = 0; pos < 20; ++pos) EXPECT_EQ(table[pos * 7 + 6], 0.0);
    // The pairs use w_k = base^(-2k/7).
    EXPECT_NEAR(table[5 * 7 + spec.SinIndex(2)], std::sin(5 * std::pow(10000.0, -4.0 / 7)), 1e-15);
  }
}

// Accurate far out: at position 10^6 + 7 the table agrees with long double.
TEST(SinusoidalTable, LargePositionsStayAccurate) {
  const SinusoidalSpec spec{.dim = 64};
  const auto table = SinusoidalTable(spec, 1000007, 1);
  const auto w = SinusoidalInvFreq(spec);
  double worst = 0;
  for (int k = 0; k < 32; ++k) {
    const long double angle = 1000007.0L * static_cast<long double>(w[k]);
    worst = std::max(worst, std::abs(table[spec.SinIndex(k)] - static_cast<double>(std::sin(angle))));
  }
  EXPECT_LT(worst, 1e-9);
}

// p_{k+D} = T(D) p_k, T(D) block-diagonal: for each pair the rotation
// [[cos Dw, sin Dw], [-sin Dw, cos Dw]] acting on (sin kw, cos kw). T is
// built from D alone and applied at many k; reports the worst error.
TEST(SinusoidalProperties, ShiftIsABlockDiagonalRotationDependingOnlyOnDelta) {
  double worst_f64 = 0, worst_f32_kernel = 0;
  for (const auto order : {SinusoidalOrder::kInterleaved, SinusoidalOrder::kConcat}) {
    const SinusoidalSpec spec{.dim = 64, .order = order};
    const std::int64_t d = spec.dim;
    const auto w = SinusoidalInvFreq(spec);
    // The kernel's float32 encodings: add to zero embeddings.
    const std::int64_t n = 600;
    Buffer zeros(DType::kF32, n * d);
    AddSinusoidal(spec, EmbeddingAddCall::InPlace(zeros.View({1, n, 1, d})));
    const auto table = SinusoidalTable(spec, 0, n);
    for (const std::int64_t delta : {1, 2, 7, 50, 123, 511}) {
      // Dense T(delta), dim x dim.
      std::vector<double> t(d * d, 0.0);
      for (std::int64_t k = 0; k < spec.Pairs(); ++k) {
        const double c = std::cos(delta * w[k]), s = std::sin(delta * w[k]);
        const std::int64_t si = spec.SinIndex(k), ci = spec.CosIndex(k);
        t[si * d + si] = c;
        t[si * d + ci] = s;
        t[ci * d + si] = -s;
        t[ci * d + ci] = c;
      }
      // Block-diagonal: nothing couples different pairs.
      for (std::int64_t r = 0; r < d; ++r) {
        for (std::int64_t col = 0; col < d; ++col) {
          const bool same_pair =
              (order == SinusoidalOrder::kInterleaved) ? r / 2 == col / 2 : r % (d / 2) == col % (d / 2);
          if (!same_pair) ASSERT_EQ(t[r * d + col], 0.0);
        }
      }
      for (std::int64_t k = 0; k + delta < n; k += 13) {
        for (std::int64_t r = 0; r < d; ++r) {
          double shifted = 0, shifted_f32 = 0;
          for (std::int64_t col = 0; col < d; ++col) {
            shifted += t[r * d + col] * table[k * d + col];
            shifted_f32 += t[r * d + col] * zeros.Get(k * d + col);
          }
          worst_f64 = std::max(worst_f64, std::abs(shifted - table[(k + delta) * d + r]));
          worst_f32_kernel = std::max(worst_f32_kernel, std::abs(shifted_f32 - zeros.Get((k + delta) * d + r)));
        }
      }
    }
  }
  RecordProperty("t_delta_max_error_f64", std::to_string(worst_f64));
  RecordProperty("t_delta_max_error_f32_kernel", std::to_string(worst_f32_kernel));
  std::printf("T(delta) max error: float64 table %.3g, float32 kernel output %.3g\n", worst_f64, worst_f32_kernel);
  EXPECT_LT(worst_f64, 1e-12);
  EXPECT_LT(worst_f32_kernel, 1e-6);
}

// ------------------------------------------------------------- the kernel

double Tolerance(DType dtype, double value) {
  return dtype == DType::kF32 ? 4e-7 * std::max(1.0, std::abs(value))
                              : testing::UnitInLastPlace(dtype, value) * 1.01 + 1e-7;
}

TokenPositions MakePositions(int kind, std::int64_t batch, std::int64_t seq) {
  switch (kind) {
    case 0: return TokenPositions::Offset(0);
    case 1: return TokenPositions::Offset(1000003);  // angle reduction matters
    case 2: {
      std::vector<std::int64_t> offsets;
      for (std::int64_t b = 0; b < batch; ++b) offsets.push_back(17 * b + 5);
      return TokenPositions::Offsets(offsets);
    }
    default: {
      std::vector<std::int64_t> ids;  // left padding, out of order
      for (std::int64_t b = 0; b < batch; ++b) {
        for (std::int64_t s = 0; s < seq; ++s) ids.push_back((s * 7 + b * 3) % (seq + 4));
      }
      return TokenPositions::Ids(ids);
    }
  }
}

struct Case {
  std::int64_t dim, batch, seq, rows;
};

TEST(SinusoidalAdd, FastMatchesReferenceOverGridOnEveryTarget) {
  const Case cases[] = {
      {1, 1, 3, 1},  {2, 2, 5, 1},   {3, 1, 4, 1},   {7, 2, 3, 2},   {8, 1, 9, 1},
      {15, 2, 4, 1}, {16, 3, 2, 1},  {17, 1, 6, 1},  {31, 2, 3, 1},  {33, 1, 5, 3},
      {64, 2, 7, 1}, {100, 1, 3, 1}, {512, 2, 4, 1}, {768, 1, 2, 1}, {1023, 1, 2, 1},
  };
  for (const Case& c : cases) {
    for (const auto order : {SinusoidalOrder::kInterleaved, SinusoidalOrder::kConcat}) {
      for (const auto spacing : {SinusoidalSpacing::kPaper, SinusoidalSpacing::kEndpoints}) {
        if (spacing == SinusoidalSpacing::kEndpoints && c.dim < 4) continue;
        const SinusoidalSpec spec{.dim = c.dim, .order = order, .spacing = spacing};
        for (const DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
          for (int kind = 0; kind < 4; ++kind) {
            for (const bool in_place : {false, true}) {
              for (const double scale : {1.0, std::sqrt(static_cast<double>(c.dim))}) {
                SCOPED_TRACE("dim=" + std::to_string(c.dim) + " order=" + std::string(SinusoidalOrderName(order)) +
                             " spacing=" + std::string(SinusoidalSpacingName(spacing)) +
                             " dtype=" + std::string(DTypeName(dtype)) + " positions=" + std::to_string(kind) +
                             (in_place ? " in-place" : "") + " scale=" + std::to_string(scale));
                const std::array<std::int64_t, 4> shape{c.batch, c.seq, c.rows, c.dim};
                Buffer x(dtype, c.batch * c.seq * c.rows * c.dim);
                x.FillUniform(static_cast<std::uint32_t>(c.dim * 31 + kind));
                const TokenPositions positions = MakePositions(kind, c.batch, c.seq);
                Buffer ref_in = x, ref_out(dtype, x.size());
                reference::AddSinusoidal(spec, {ref_in.View(shape), ref_out.View(shape), positions, scale});
                ForEachTarget([&] {
                  Buffer in = x, out(dtype, x.size());
                  if (in_place) {
                    AddSinusoidal(spec, {in.View(shape), in.View(shape), positions, scale});
                    out = in;
                  } else {
                    AddSinusoidal(spec, {in.View(shape), out.View(shape), positions, scale});
                    ASSERT_EQ(in.bytes, x.bytes) << "out-of-place must not write its input";
                  }
                  for (std::int64_t i = 0; i < out.size(); ++i) {
                    const double tol = Tolerance(dtype, ref_out.Get(i)) * std::max(1.0, scale);
                    ASSERT_NEAR(out.Get(i), ref_out.Get(i), tol) << "element " << i;
                  }
                });
              }
            }
          }
        }
      }
    }
  }
}

// A strided view (every other token row of a bigger buffer) leaves the gaps alone.
TEST(SinusoidalAdd, StridedViewsTouchOnlyTheirElements) {
  const SinusoidalSpec spec{.dim = 20};
  Buffer big(DType::kF32, 2 * 6 * 2 * 20);
  big.FillUniform(5);
  const Buffer before = big;
  TensorView view = big.View({2, 6, 1, 20});
  view.strides = {6 * 2 * 20, 2 * 20, 20, 1};  // rows 0 of each token, skipping rows 1
  Buffer expect = big;
  TensorView expect_view = expect.View({2, 6, 1, 20});
  expect_view.strides = view.strides;
  reference::AddSinusoidal(spec, EmbeddingAddCall::InPlace(expect_view, TokenPositions::Offset(3)));
  ForEachTarget([&] {
    Buffer work = before;
    TensorView v = work.View({2, 6, 1, 20});
    v.strides = view.strides;
    AddSinusoidal(spec, EmbeddingAddCall::InPlace(v, TokenPositions::Offset(3)));
    for (std::int64_t i = 0; i < work.size(); ++i) {
      if ((i / 20) % 2 == 1) {
        ASSERT_EQ(work.Get(i), before.Get(i)) << "gap element " << i;
      } else {
        ASSERT_NEAR(work.Get(i), expect.Get(i), 4e-7) << i;
      }
    }
  });
}

// Offsets, per-row offsets and ids giving the same positions agree bit for bit.
TEST(SinusoidalAdd, PositionFormsAgree) {
  const SinusoidalSpec spec{.dim = 40};
  const std::array<std::int64_t, 4> shape{3, 5, 1, 40};
  Buffer x(DType::kF32, 3 * 5 * 40);
  x.FillUniform(9);
  std::vector<std::int64_t> ids;
  for (int b = 0; b < 3; ++b) {
    for (int s = 0; s < 5; ++s) ids.push_back(11 + s);
  }
  Buffer a = x, b = x, c = x;
  AddSinusoidal(spec, EmbeddingAddCall::InPlace(a.View(shape), TokenPositions::Offset(11)));
  AddSinusoidal(spec, EmbeddingAddCall::InPlace(b.View(shape), TokenPositions::Offsets({11, 11, 11})));
  AddSinusoidal(spec, EmbeddingAddCall::InPlace(c.View(shape), TokenPositions::Ids(ids)));
  EXPECT_EQ(a.bytes, b.bytes);
  EXPECT_EQ(a.bytes, c.bytes);
}

// Rows are made exactly at multiples of 16 and rotated from there; the bits of
// a position's encoding must not depend on which positions came before it.
TEST(SinusoidalAdd, EachPositionHasOneEncodingWhateverTheOrder) {
  const SinusoidalSpec spec{.dim = 72};
  std::vector<std::int64_t> ids;
  for (std::int64_t p = 70; p >= 0; --p) ids.push_back(p * 37 % 71 + 1000000);  // scrambled, crossing anchors
  const std::int64_t seq = static_cast<std::int64_t>(ids.size());
  Buffer all(DType::kF32, seq * 72);
  AddSinusoidal(spec, EmbeddingAddCall::InPlace(all.View({1, seq, 1, 72}), TokenPositions::Ids(ids)));
  for (std::int64_t s = 0; s < seq; ++s) {
    Buffer one(DType::kF32, 72);
    AddSinusoidal(spec, EmbeddingAddCall::InPlace(one.View({1, 1, 1, 72}), TokenPositions::Offset(ids[s])));
    for (int d = 0; d < 72; ++d) ASSERT_EQ(one.Get(d), all.Get(s * 72 + d)) << "position " << ids[s];
  }
}

TEST(SinusoidalAdd, SameBitsForAnyThreadCount) {
  const SinusoidalSpec spec{.dim = 96};
  const std::array<std::int64_t, 4> shape{4, 33, 1, 96};
  Buffer x(DType::kBF16, 4 * 33 * 96);
  x.FillUniform(2);
  const int threads = NumThreads();
  SetNumThreads(1);
  Buffer one = x;
  AddSinusoidal(spec, EmbeddingAddCall::InPlace(one.View(shape), TokenPositions::Offsets({0, 5, 9, 100})));
  SetNumThreads(4);
  Buffer four = x;
  AddSinusoidal(spec, EmbeddingAddCall::InPlace(four.View(shape), TokenPositions::Offsets({0, 5, 9, 100})));
  SetNumThreads(threads);
  EXPECT_EQ(one.bytes, four.bytes);
}

TEST(SinusoidalAdd, RejectsBadCalls) {
  const SinusoidalSpec spec{.dim = 8};
  Buffer x(DType::kF32, 2 * 3 * 8), y(DType::kF16, 2 * 3 * 8);
  ExpectError(
      [&] {
        AddSinusoidal(spec, EmbeddingAddCall::InPlace(x.View({2, 3, 1, 6})));
      },
      {"[sinusoidal] in.shape[3] = 6", "dim = 8"});
  ExpectError([&] { AddSinusoidal(spec, {x.View({2, 3, 1, 8}), y.View({2, 3, 1, 8})}); }, {"out.dtype = \"f16\""});
  ExpectError(
      [&] {
        AddSinusoidal(spec, EmbeddingAddCall::InPlace(x.View({2, 3, 1, 8}), TokenPositions::Offset(-1)));
      },
      {"[sinusoidal] offset = -1", "negative"});
  ExpectError(
      [&] {
        AddSinusoidal(spec, EmbeddingAddCall::InPlace(x.View({2, 3, 1, 8}), TokenPositions::Ids({0, 1, 2})));
      },
      {"position_ids.size() = 3", "batch * seq = 6"});
  // An output that overlaps its input without being it, or an expanded one
  // (stride 0), would add the encoding to some rows more than once.
  const auto* base = reinterpret_cast<float*>(x.bytes.data());
  const ConstTensorView first{base, DType::kF32, {1, 2, 1, 8}, {16, 8, 8, 1}};
  const TensorView next{const_cast<float*>(base) + 8, DType::kF32, {1, 2, 1, 8}, {16, 8, 8, 1}};
  ExpectError([&] { AddSinusoidal(spec, {first, next}); }, {"[sinusoidal] out = overlaps its input"});
  ExpectError([&] { reference::AddSinusoidal(spec, {first, next}); }, {"[sinusoidal] out = overlaps its input"});
  const TensorView expanded{const_cast<float*>(base), DType::kF32, {1, 3, 2, 8}, {8, 0, 0, 1}};
  ExpectError([&] { AddSinusoidal(spec, EmbeddingAddCall::InPlace(expanded)); },
              {"[sinusoidal] out = shape [1, 3, 2, 8], strides [8, 0, 0, 1]", "written more than once"});
}

}  // namespace
}  // namespace posenc
