// The position schemes' part of the tiny model, built from the library's
// encodings: the sinusoid and the learned table (with Su's hierarchical
// extension) added at the input, the distance biases of ALiBi, T5 and
// KERPLE with their gradients, and RoPE on q and k.
#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "posenc/alibi.h"
#include "posenc/learned_table.h"
#include "posenc/sinusoidal.h"
#include "posenc/t5_bias.h"
#include "posenc/tensor.h"
#include "train/tiny_lm_internal.h"

namespace posenc::tiny_lm {
namespace {

T5BucketSpec T5Spec(const TinyLmConfig& config) {
  return {.num_buckets = config.t5_buckets, .max_distance = config.t5_max_distance, .direction = T5Direction::kCausal};
}

// T5's bucket of key j = i - delta: relative position j - i = -delta.
std::vector<std::int64_t> T5Buckets(const TinyLmConfig& config, std::int64_t length) {
  const T5BucketSpec spec = T5Spec(config);
  std::vector<std::int64_t> buckets(static_cast<std::size_t>(length));
  for (std::int64_t delta = 0; delta < length; ++delta) buckets[delta] = T5RelativeBucket(spec, -delta);
  return buckets;
}

}  // namespace

// Both written so that exp never overflows: softplus(x) = max(x, 0) + log1p(exp(-|x|)).
double Softplus(double x) { return std::max(x, 0.0) + std::log1p(std::exp(-std::abs(x))); }
double Sigmoid(double x) { return x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x)); }

bool HasDistanceBias(PositionScheme scheme) {
  return scheme == PositionScheme::kAlibi || scheme == PositionScheme::kT5 || scheme == PositionScheme::kKerple;
}

double EmbeddingScale(const TinyLmConfig& config) {
  return config.scheme == PositionScheme::kSinusoidal ? std::sqrt(static_cast<double>(config.d_model)) : 1.0;
}

std::vector<double> InputPositions(const TinyLmConfig& config, const TinyLmParams& params, std::int64_t length) {
  const std::int64_t d = config.d_model;
  if (config.scheme == PositionScheme::kSinusoidal) {
    // The paper's interleaved sin/cos, base 10000, w_k = base^(-2k/d).
    return SinusoidalTable(SinusoidalSpec{.dim = d}, 0, length);
  }
  if (config.scheme != PositionScheme::kLearned) return {};
  std::vector<double> out(static_cast<std::size_t>(length * d));
  const std::int64_t rows = config.train_length;
  for (std::int64_t p = 0; p < std::min(length, rows); ++p) {
    for (std::int64_t c = 0; c < d; ++c) out[p * d + c] = params.position_embd.values[p * d + c];
  }
  if (length > rows) {
    // Past the table (evaluation; ValidateLossCall allowed it only under
    // kHierarchical): the library's decomposition, alpha = 0.4 (Su's).
    const LearnedTable table(rows, d, params.position_embd.values);
    const LearnedTableSpec spec{.out_of_range = OutOfRangePolicy::kHierarchical};
    for (std::int64_t p = rows; p < length; ++p) {
      const std::vector<double> row = table.RowF64(spec, p);
      std::copy(row.begin(), row.end(), out.begin() + p * d);
    }
  }
  return out;
}

std::vector<double> DistanceBias(const TinyLmConfig& config, const TinyLmParams& params, std::int64_t layer,
                                 std::int64_t length) {
  if (!HasDistanceBias(config.scheme)) return {};
  const std::int64_t heads = config.heads;
  std::vector<double> bias(static_cast<std::size_t>(heads * length));
  if (config.scheme == PositionScheme::kAlibi) {
    const std::vector<double> slopes = AlibiSlopes(AlibiSpec{.heads = heads});
    for (std::int64_t h = 0; h < heads; ++h) {
      for (std::int64_t delta = 0; delta < length; ++delta) {
        bias[h * length + delta] = AlibiBiasAt(AlibiForm::kDistance, slopes[h], delta, 0);
      }
    }
  } else if (config.scheme == PositionScheme::kT5) {
    // attn_rel_b is [buckets, heads], Hugging Face's relative_attention_bias layout.
    const std::vector<std::int64_t> buckets = T5Buckets(config, length);
    for (std::int64_t h = 0; h < heads; ++h) {
      for (std::int64_t delta = 0; delta < length; ++delta) {
        bias[h * length + delta] = params.attn_rel_b.values[buckets[delta] * heads + h];
      }
    }
  } else {
    const TinyLmBlock& block = params.blocks[static_cast<std::size_t>(layer)];
    for (std::int64_t h = 0; h < heads; ++h) {
      const double r1 = Softplus(block.attn_kerple_r1.values[h]), r2 = Softplus(block.attn_kerple_r2.values[h]);
      for (std::int64_t delta = 0; delta < length; ++delta) {
        bias[h * length + delta] = -r1 * std::log1p(r2 * static_cast<double>(delta));
      }
    }
  }
  return bias;
}

void DistanceBiasBackward(const TinyLmConfig& config, const TinyLmParams& params,
                          const std::vector<std::vector<double>>& dbias, std::int64_t length, TinyLmParams& grads) {
  const std::int64_t heads = config.heads;
  if (config.scheme == PositionScheme::kT5) {
    // One table for every layer: its gradient sums the layers (in order).
    const std::vector<std::int64_t> buckets = T5Buckets(config, length);
    std::vector<double> sum(grads.attn_rel_b.values.size(), 0.0);
    for (const std::vector<double>& layer : dbias) {
      for (std::int64_t h = 0; h < heads; ++h) {
        for (std::int64_t delta = 0; delta < length; ++delta) {
          sum[buckets[delta] * heads + h] += layer[h * length + delta];
        }
      }
    }
    std::copy(sum.begin(), sum.end(), grads.attn_rel_b.values.begin());
  } else if (config.scheme == PositionScheme::kKerple) {
    // bias = -r1 log(1 + r2 delta), r = softplus(raw), dr/draw = sigmoid(raw).
    for (std::size_t l = 0; l < dbias.size(); ++l) {
      const TinyLmBlock& block = params.blocks[l];
      TinyLmBlock& grad = grads.blocks[l];
      for (std::int64_t h = 0; h < heads; ++h) {
        const double raw1 = block.attn_kerple_r1.values[h], raw2 = block.attn_kerple_r2.values[h];
        const double r1 = Softplus(raw1), r2 = Softplus(raw2);
        double d1 = 0, d2 = 0;
        for (std::int64_t delta = 0; delta < length; ++delta) {
          const double g = dbias[l][h * length + delta];
          const auto x = static_cast<double>(delta);
          d1 -= g * std::log1p(r2 * x);
          d2 -= g * r1 * x / (1.0 + r2 * x);
        }
        grad.attn_kerple_r1.values[h] = static_cast<float>(d1 * Sigmoid(raw1));
        grad.attn_kerple_r2.values[h] = static_cast<float>(d2 * Sigmoid(raw2));
      }
    }
  }
}

void RotateQueriesKeys(const TinyLmConfig& config, const RopeFrequencies& frequencies, std::span<float> qkv,
                       std::int64_t batch, std::int64_t length, RopeDirection direction) {
  // q and k as strided [B, T, H, hd] views of the qkv rows [N, 3d]: the
  // library's kernel rotates them in place, no copy.
  const std::int64_t d = config.d_model, hd = config.HeadDim();
  const std::array<std::int64_t, 4> shape{batch, length, config.heads, hd};
  const std::array<std::int64_t, 4> strides{length * 3 * d, 3 * d, hd, 1};
  const TensorView q{qkv.data(), DType::kF32, shape, strides};
  const TensorView k{qkv.data() + d, DType::kF32, shape, strides};
  ApplyRope(TinyLmRopeSpec(config), frequencies,
            RopeCall{.operands = {RopeOperand::InPlace(q), RopeOperand::InPlace(k)},
                     .positions = RopePositions::Offset(0),
                     .direction = direction});
}

}  // namespace posenc::tiny_lm
