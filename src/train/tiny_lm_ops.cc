// The tiny model's float32 steps besides attention: linear layers through
// MatMul (forward and both backward products), RMSNorm, GELU, the
// cross-entropy and RoPE on q and k through the library's kernel. Row-wise steps run in parallel over rows, each row in
// a fixed order; reductions over rows (the norm gains) run in row order on one thread: nothing depends on the thread
// count.
#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "posenc/matmul.h"
#include "posenc/parallel.h"
#include "posenc/tensor.h"
#include "train/tiny_lm_internal.h"
#include "train/tiny_lm_kernels.h"

namespace posenc::tiny_lm {
namespace {

// [cols, rows] from [rows, cols], in 32 x 32 tiles: a tile's source and
// destination lines stay in the cache (column by column over whole rows,
// every write missed it: 13% of a training step).
std::vector<float> Transpose(std::span<const float> a, std::int64_t rows, std::int64_t cols) {
  constexpr std::int64_t kTile = 32;
  std::vector<float> t(static_cast<std::size_t>(rows * cols));
  ParallelFor((rows + kTile - 1) / kTile, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r0 = begin * kTile; r0 < std::min(rows, end * kTile); r0 += kTile) {
      for (std::int64_t c0 = 0; c0 < cols; c0 += kTile) {
        const std::int64_t r1 = std::min(rows, r0 + kTile), c1 = std::min(cols, c0 + kTile);
        for (std::int64_t c = c0; c < c1; ++c) {
          for (std::int64_t r = r0; r < r1; ++r) t[c * rows + r] = a[r * cols + c];
        }
      }
    }
  });
  return t;
}

// Rows per ParallelFor piece: about 16K elements, so small steps stay serial.
std::int64_t RowChunk(std::int64_t width) {
  return std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(1, width));
}

}  // namespace

void LinearForward(std::span<const float> x, std::int64_t rows, const TinyLmTensor& w, std::span<float> y) {
  // Packed per call: the weights change every optimizer step.
  MatMul(x, rows, PackedWeights::Pack(w.values, w.shape[0], w.shape[1]), y);
}

void LinearBackward(std::span<const float> x, std::span<const float> dy, std::int64_t rows, const TinyLmTensor& w,
                    std::span<float> dx, std::span<float> dw) {
  const std::int64_t out = w.shape[0], in = w.shape[1];
  // dx [rows, in] = dy [rows, out] W [out, in]: MatMul's weights are W^T [in, out].
  MatMul(dy, rows, PackedWeights::Pack(Transpose(w.values, out, in), in, out), dx);
  // dW [out, in] = dy^T [out, rows] x [rows, in]: weights x^T [in, rows];
  // each dW entry is one chain over the rows, whatever the threads.
  MatMul(Transpose(dy, rows, out), out, PackedWeights::Pack(Transpose(x, rows, in), in, rows), dw);
}

void RmsNormForward(std::span<const float> x, std::span<const float> gain, double eps, std::span<float> y,
                    std::span<float> inv_rms) {
  const auto d = static_cast<std::int64_t>(gain.size());
  ParallelFor(static_cast<std::int64_t>(inv_rms.size()), RowChunk(d), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t n = begin; n < end; ++n) {
      const float* row = x.data() + n * d;
      double squares = 0.0;  // in double, as the engine's RmsNorm
      for (std::int64_t c = 0; c < d; ++c) squares += static_cast<double>(row[c]) * row[c];
      const auto r = static_cast<float>(1.0 / std::sqrt(squares / static_cast<double>(d) + eps));
      inv_rms[n] = r;
      for (std::int64_t c = 0; c < d; ++c) y[n * d + c] = row[c] * r * gain[c];
    }
  });
}

void RmsNormBackward(std::span<const float> x, std::span<const float> gain, std::span<const float> inv_rms,
                     std::span<const float> dy, std::span<float> dx, std::span<float> dgain) {
  // y_c = x_c r g_c with r = (mean(x^2) + eps)^(-1/2), dr/dx_c = -r^3 x_c / d:
  //   dx_c = r g_c dy_c - x_c r^3 / d * sum_c' g_c' dy_c' x_c'
  //   dg_c = sum_n dy_c x_c r
  const auto d = static_cast<std::int64_t>(gain.size());
  const auto rows = static_cast<std::int64_t>(inv_rms.size());
  ParallelFor(rows, RowChunk(d), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t n = begin; n < end; ++n) {
      const float r = inv_rms[n];
      const float* xr = x.data() + n * d;
      const float* g = dy.data() + n * d;
      float dot = 0.0f;
      for (std::int64_t c = 0; c < d; ++c) dot += gain[c] * g[c] * xr[c];
      const float k = r * r * r * dot / static_cast<float>(d);
      for (std::int64_t c = 0; c < d; ++c) dx[n * d + c] += r * gain[c] * g[c] - xr[c] * k;
    }
  });
  std::vector<double> sum(static_cast<std::size_t>(d), 0.0);
  for (std::int64_t n = 0; n < rows; ++n) {
    for (std::int64_t c = 0; c < d; ++c) sum[c] += static_cast<double>(dy[n * d + c]) * x[n * d + c] * inv_rms[n];
  }
  std::copy(sum.begin(), sum.end(), dgain.begin());
}

// a = u/2 (1 + tanh(k (u + 0.044715 u^3))), k = sqrt(2/pi) (GPT-2's gelu),
// in SIMD (tiny_lm_kernels.h): libm's scalar tanhf was a quarter of a step.
void GeluForward(std::span<const float> u, std::span<float> a) {
  ParallelFor(static_cast<std::int64_t>(u.size()), 16384, [&](std::int64_t begin, std::int64_t end) {
    GeluForwardKernel(u.data() + begin, a.data() + begin, end - begin);
  });
}

// da/du = (1 + t)/2 + u/2 (1 - t^2) k (1 + 3 0.044715 u^2), t the tanh above.
void GeluBackward(std::span<const float> u, std::span<const float> da, std::span<float> du) {
  ParallelFor(static_cast<std::int64_t>(u.size()), 16384, [&](std::int64_t begin, std::int64_t end) {
    GeluBackwardKernel(u.data() + begin, da.data() + begin, du.data() + begin, end - begin);
  });
}

void CrossEntropy(std::span<const float> logits, std::span<const std::uint8_t> targets,
                  std::span<const std::uint8_t> scored, float scale, std::span<double> row_loss,
                  std::span<std::uint8_t> argmax, std::span<float> dlogits) {
  constexpr std::int64_t kV = TinyLmConfig::kVocab;
  ParallelFor(static_cast<std::int64_t>(targets.size()), RowChunk(kV), [&](std::int64_t begin, std::int64_t end) {
    std::vector<float> e(kV);
    for (std::int64_t n = begin; n < end; ++n) {
      const float* l = logits.data() + n * kV;
      const float* top = std::max_element(l, l + kV);
      const float max = *top;
      argmax[n] = static_cast<std::uint8_t>(top - l);
      double sum = 0.0;
      for (std::int64_t v = 0; v < kV; ++v) {
        e[v] = std::exp(l[v] - max);
        sum += e[v];
      }
      row_loss[n] = static_cast<double>(max) + std::log(sum) - static_cast<double>(l[targets[n]]);
      if (dlogits.empty()) continue;
      float* dl = dlogits.data() + n * kV;
      if (!scored.empty() && scored[n] == 0) {
        std::fill(dl, dl + kV, 0.0f);
        continue;
      }
      const auto inv = static_cast<float>(1.0 / sum);
      for (std::int64_t v = 0; v < kV; ++v) dl[v] = e[v] * inv * scale;
      dl[targets[n]] -= scale;
    }
  });
}

void RotateQueriesKeys(const RopeSpec& spec, const RopeFrequencies& frequencies, std::span<float> qkv,
                       std::int64_t batch, std::int64_t length, std::int64_t heads, const TokenPositions& positions,
                       RopeDirection direction) {
  // q and k as strided [B, T, H, hd] views of the qkv rows [N, 3d]: the
  // library's kernel rotates them in place, no copy.
  const std::int64_t hd = spec.head_dim, d = heads * hd;
  const std::array<std::int64_t, 4> shape{batch, length, heads, hd};
  const std::array<std::int64_t, 4> strides{length * 3 * d, 3 * d, hd, 1};
  const TensorView q{qkv.data(), DType::kF32, shape, strides};
  const TensorView k{qkv.data() + d, DType::kF32, shape, strides};
  ApplyRope(spec, frequencies,
            RopeCall{.operands = {RopeOperand::InPlace(q), RopeOperand::InPlace(k)},
                     .positions = positions,
                     .direction = direction});
}

}  // namespace posenc::tiny_lm
