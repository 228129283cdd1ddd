#include "attention_workload.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "naive_attention.h"
#include "posenc/rope.h"

namespace posenc::bench {

std::vector<AttentionPolicy> BenchmarkPolicies(const AttentionShape& shape) {
  const RopeSpec spec{.theta = 10000, .head_dim = shape.head_dim};
  const RopeFrequencies frequencies = ComputeRopeFrequencies(spec);
  std::vector<double> t5_weights(32 * static_cast<std::size_t>(shape.q_heads));
  for (std::size_t i = 0; i < t5_weights.size(); ++i) t5_weights[i] = std::sin(0.37 * static_cast<double>(i));
  return {
      {"rope", {.encoding = RopeEncoding{spec, frequencies}}},
      {"rerope", {.encoding = ReRopeEncoding{spec, frequencies, 512, std::nullopt}}},
      {"leaky_rerope", {.encoding = ReRopeEncoding{spec, frequencies, 512, 16.0}}},
      {"alibi", {.encoding = AlibiEncoding{AlibiSlopes(AlibiSpec{.heads = shape.q_heads}), AlibiForm::kDistance}}},
      {"t5",
       {.encoding =
            T5BiasEncoding{T5BucketSpec{.num_buckets = 32, .max_distance = 128, .direction = T5Direction::kCausal},
                           t5_weights}}},
      {"lambda", {.encoding = RopeEncoding{spec, frequencies}, .mask = {.window = 1024, .sinks = 4}}},
  };
}

AttentionWorkload::AttentionWorkload(const AttentionShape& shape) : shape_(shape) {
  const auto n = static_cast<std::size_t>(shape.tokens * shape.head_dim);
  q_.resize(n * shape.q_heads);
  k_.resize(n * shape.kv_heads);
  v_.resize(n * shape.kv_heads);
  out_.resize(n * shape.q_heads);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  for (auto* data : {&q_, &k_, &v_}) {
    for (float& x : *data) x = normal(rng);
  }
}

AttentionInputs AttentionWorkload::Inputs(std::int64_t tokens) {
  const auto view = [&](std::vector<float>& data, std::int64_t heads) {
    return TensorView::Contiguous(data.data(), DType::kF32, {1, tokens, heads, shape_.head_dim});
  };
  // A prefix of the tokens is a valid smaller problem: rows are [token][head][dim].
  return {view(q_, shape_.q_heads), view(k_, shape_.kv_heads), view(v_, shape_.kv_heads), view(out_, shape_.q_heads)};
}

double AttentionWorkload::Flops(const AttentionOptions& options) const {
  double pairs = 0;
  for (std::int64_t p = 0; p < shape_.tokens; ++p) {
    std::int64_t visible = p + 1;  // causal
    if (options.mask.window > 0) {
      visible =
          std::min(visible, options.mask.window) +
          std::clamp<std::int64_t>(std::min(options.mask.sinks, p + 1 - options.mask.window), 0, options.mask.sinks);
    }
    pairs += static_cast<double>(visible);
  }
  return 4.0 * static_cast<double>(shape_.head_dim) * static_cast<double>(shape_.q_heads) * pairs;
}

void AttentionWorkload::Run(const AttentionOptions& options) { Attention(Inputs(shape_.tokens), options); }

void AttentionWorkload::RunNaive(const AttentionOptions& rope_options) {
  NaiveCausalAttention(Inputs(shape_.tokens), std::get<RopeEncoding>(rope_options.encoding));
}

double AttentionWorkload::CheckAgainstReference(const AttentionOptions& options, std::int64_t tokens) {
  tokens = std::min(tokens, shape_.tokens);  // the buffers hold shape_.tokens
  AttentionInputs inputs = Inputs(tokens);
  std::vector<float> expected(static_cast<std::size_t>(tokens * shape_.q_heads * shape_.head_dim));
  AttentionInputs reference_inputs = inputs;
  reference_inputs.out = TensorView::Contiguous(expected.data(), DType::kF32, inputs.out.shape);
  reference::Attention(reference_inputs, options);
  Attention(inputs, options);
  double worst = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) worst = std::max(worst, std::abs(double{out_[i]} - expected[i]));
  return worst;
}

}  // namespace posenc::bench
