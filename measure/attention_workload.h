// The attention workload of `posenc bench attention`: causal prefill with 8
// query heads, 2 KV heads, head_dim 128, f32, one positional policy per run,
// checked against the float64 reference on a short prefix before timing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "posenc/attention.h"

namespace posenc::bench {

struct AttentionShape {
  std::int64_t tokens = 4096;
  std::int64_t q_heads = 8;
  std::int64_t kv_heads = 2;
  std::int64_t head_dim = 128;
};

struct AttentionPolicy {
  std::string name;  // rope, rerope, leaky_rerope, alibi, t5, lambda
  AttentionOptions options;
};

// The policies the benchmark compares, with the parameters: ReRoPE
// w = 512, Leaky ReRoPE w = 512 k = 16, Λ mask S = 4 W = 1024.
std::vector<AttentionPolicy> BenchmarkPolicies(const AttentionShape& shape);

class AttentionWorkload {
 public:
  explicit AttentionWorkload(const AttentionShape& shape);

  // Useful floating-point work of a policy: 4 * head_dim per visible
  // (query, key) pair per head (q.k and p.v, a multiply and an add each).
  double Flops(const AttentionOptions& options) const;
  void Run(const AttentionOptions& options);
  void RunNaive(const AttentionOptions& rope_options);
  // Max |fast - float64 reference| over the first `tokens` tokens (at most
  // the workload's length).
  double CheckAgainstReference(const AttentionOptions& options, std::int64_t tokens = 256);

 private:
  AttentionInputs Inputs(std::int64_t tokens);

  AttentionShape shape_;
  std::vector<float> q_, k_, v_, out_;
};

}  // namespace posenc::bench
