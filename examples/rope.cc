// RoPE in C++: a spec from a Hugging Face config.json, q and k rotated in place.
//   rope [CONFIG.json]   (default: examples/configs/llama-3.1-8b.json)
#include <cstdio>
#include <vector>

#include "posenc/error.h"  // posenc::Error: every bad argument, "[op] parameter = value: rule"
#include "posenc/rope.h"
#include "posenc/rope_config.h"

int main(int argc, char** argv) try {
  // A spec from a Hugging Face config.json (or build posenc::RopeSpec by hand).
  const posenc::RopeModelConfig config =
      posenc::RopeFromHfConfigFile(argc > 1 ? argv[1] : "examples/configs/llama-3.1-8b.json");
  const posenc::RopeSpec& spec = config.spec;  // theta, head_dim, rotary_dim, layout, scaling

  // q: [batch, seq, 32 heads, 128], k: [batch, seq, 8 heads, 128] (GQA); f32 here, f16/bf16 and strided views too.
  const std::int64_t batch = 2, seq = 16;
  std::vector<float> q_data(batch * seq * 32 * 128, 1.0f), k_data(batch * seq * 8 * 128, 1.0f);
  auto q = posenc::TensorView::Contiguous(q_data.data(), posenc::DType::kF32, {batch, seq, 32, 128});
  auto k = posenc::TensorView::Contiguous(k_data.data(), posenc::DType::kF32, {batch, seq, 8, 128});

  // One call rotates q and k in place; token s of row b sits at offsets[b] + s.
  posenc::ApplyRope(spec, posenc::RopeCall{
                              .operands = {posenc::RopeOperand::InPlace(q), posenc::RopeOperand::InPlace(k)},
                              .positions = posenc::RopePositions::Offsets({0, 17}),
                          });
  // The gradient is the same kernel with the sine negated:
  //   RopeCall{..., .direction = posenc::RopeDirection::kBackward}

  // The frequency table, computed once per spec and sequence length, in double:
  const posenc::RopeFrequencies f = posenc::ComputeRopeFrequencies(spec, /*seq_len=*/32768);
  // f.inv_freq[k] (rotary_dim / 2 values), f.attention_factor (YaRN, LongRoPE)
  std::printf("rotary_dim %lld, inv_freq[1] %.6g, q[0][1][0][0] %.6f\n", static_cast<long long>(spec.RotaryDim()),
              f.inv_freq[1], q_data[32 * 128]);
  return 0;
} catch (const posenc::Error& e) {  // e.g. [rope] rotary_dim = 63: must be even (dimensions rotate in pairs)
  std::fprintf(stderr, "%s\n", e.what());
  return 2;
}
