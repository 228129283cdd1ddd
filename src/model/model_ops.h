// The element-wise and row-wise steps of the Llama forward (everything but
// the matrix products and attention), float32, parallel over rows. Each row
// is computed by one thread in a fixed order: results do not depend on the
// thread count.
#pragma once

#include <cstdint>
#include <span>

#include "posenc/decoder_features.h"
#include "posenc/matmul.h"

namespace posenc::model {

// out[i, :] = table[tokens[i], :] as float32; table [vocab, d], out [n, d].
void GatherRows(const PackedWeights& table, std::span<const std::int32_t> tokens, std::span<float> out);

// out[i, j] = x[i, j] / sqrt(mean_j x[i, j]^2 + eps) * weight[j]; x, out [n, d]
// (the mean of squares accumulated in double); out may be x.
void RmsNorm(std::span<const float> x, std::span<const float> weight, double eps, std::span<float> out);

// x[i, j] += y[i, j].
void AddInPlace(std::span<float> x, std::span<const float> y);

// x[i, j] += bias[j] for every row of x [n, bias.size()].
void AddBias(std::span<float> x, std::span<const float> bias);

// out[i, j] = x[i, j] / sqrt(mean x^2 + eps) * weight[j] for each of the
// `count` vectors of weight.size() floats at columns begin, begin + hd, ...
// of every row of rows [n, row_stride], in place: the per-head QK norm
// on the q or k heads of the fused q | k | v rows.
void RmsNormHeads(std::span<float> rows, std::int64_t row_stride, std::int64_t begin, std::int64_t count,
                  std::span<const float> weight, double eps);

// x[i] *= scale.
void Scale(std::span<float> x, float scale);

// The MLP's gated unit: gate_up [n, 2 ffn] holds gate | up per row;
// out[i, j] = act(gate) * up, out [n, ffn] (GatedRow, gated_row.h).
void GatedUnit(std::span<const float> gate_up, std::int64_t ffn, GateActivation activation, std::span<float> out);

// For each row r of logits [rows, vocab] with a target: -log softmax(row)[target]
// (detail::LogSumExp over the row minus the target's logit). targets[r] < 0:
// no target.
void NegativeLogLikelihood(std::span<const float> logits, std::int64_t vocab, std::span<const std::int32_t> targets,
                           std::span<double> nll);

}  // namespace posenc::model
