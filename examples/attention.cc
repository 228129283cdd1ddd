// Attention in C++: one decode step of 4 new tokens against 1,536 cached keys,
// Leaky ReRoPE under a Λ mask with log-n scaling, checked against the float64 reference.
#include <cmath>
#include <cstdio>
#include <vector>

#include "posenc/attention.h"
#include "posenc/error.h"  // posenc::Error
#include "posenc/rope_frequencies.h"

int main() try {
  const posenc::RopeSpec spec{.theta = 10000.0, .head_dim = 64};
  const std::int64_t past = 1532, len = 4, kv_len = past + len;  // 4 queries after 1532 cached tokens
  std::vector<float> q_data(len * 8 * 64), k_data(kv_len * 2 * 64), v_data(kv_len * 2 * 64), out_data(len * 8 * 64);
  for (std::size_t i = 0; i < k_data.size(); ++i) k_data[i] = v_data[i] = static_cast<float>(std::sin(0.1 * i));
  for (std::size_t i = 0; i < q_data.size(); ++i) q_data[i] = static_cast<float>(std::cos(0.3 * i));
  const auto view = [](std::vector<float>& data, std::int64_t n, std::int64_t heads) {
    return posenc::TensorView::Contiguous(data.data(), posenc::DType::kF32, {1, n, heads, 64});
  };
  const auto q = view(q_data, len, 8), k = view(k_data, kv_len, 2), v = view(v_data, kv_len, 2);
  const auto out = view(out_data, len, 8);

  posenc::AttentionInputs in{q, k, v, out};               // [batch, len, heads, dim] views; GQA/MQA by head counts
  in.q_positions = posenc::TokenPositions::Offset(past);  // decode against a cache: positions, not indices
  posenc::AttentionOptions options{
      .encoding = posenc::ReRopeEncoding{spec, posenc::ComputeRopeFrequencies(spec), /*window=*/512, /*leak=*/16.0},
      .mask = {.causal = true, .window = 1024, .sinks = 4},  // Λ mask: first 4 tokens + the last 1024
      .logn_train_length = 1024,                             // log-n query scaling past the training length
  };
  posenc::Attention(in, options);  // posenc::reference::Attention: float64, materialized

  std::vector<float> expected(out_data.size());
  in.out = view(expected, len, 8);
  posenc::reference::Attention(in, options);
  double worst = 0;
  for (std::size_t i = 0; i < expected.size(); ++i)
    worst = std::max(worst, std::abs(double(out_data[i]) - expected[i]));
  std::printf("max |fast - float64 reference| = %.2g\n", worst);
  return worst < 1e-4 ? 0 : 1;
} catch (const posenc::Error& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 2;
}
