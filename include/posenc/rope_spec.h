// The typed description of a rotary position embedding (RoPE): base, rotary
// dimension, pair layout and frequency scaling method. One place validates it.
//
// Pair layouts for head_dim d = 8, rotary_dim 8 (x_i rotated with x_j by angle
// p * inv_freq[k]):
//
//   kInterleaved (GPT-J, RoFormer, Meta's Llama weights, MLX traditional=True):
//     [x0 x1][x2 x3][x4 x5][x6 x7]        pair k = (2k, 2k+1)
//   kHalfSplit (GPT-NeoX, Hugging Face Llama/Qwen2, MLX traditional=False):
//     [x0 x1 x2 x3 | x4 x5 x6 x7]          pair k = (k, k + d/2)
//
// With partial rotary (rotary_dim r < head_dim) only the first r dimensions
// are rotated (pairs (k, k + r/2) in half-split); the rest pass through
// bit-identical.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace posenc {

enum class RopeLayout { kInterleaved, kHalfSplit };

std::string_view RopeLayoutName(RopeLayout layout);  // "interleaved" / "half-split"
RopeLayout ParseRopeLayout(std::string_view name);

// Plain RoPE: inv_freq[k] = theta^(-2k/r).
struct NoScaling {};

// Position interpolation (Chen et al. 2023): positions divided by `factor`.
struct LinearScaling {
  double factor = 1.0;
};

// NTK-aware scaling with a fixed alpha: theta' = theta * alpha^(r/(r-2)).
// Hugging Face configs write it as rope_type "dynamic" with `alpha` (the
// NTK-alpha form of Hunyuan's models: a fixed base, no length).
struct NtkAwareScaling {
  double alpha = 1.0;
};

// Dynamic NTK (Hugging Face "dynamic"): for a current length L above the
// original length L0, theta' = theta * (factor*L/L0 - (factor-1))^(r/(r-2));
// at or below L0 the plain frequencies. A pure function of (spec, L).
struct DynamicNtkScaling {
  double factor = 1.0;
  std::int64_t original_max_position = 0;
};

// YaRN (Peng et al. 2023). Per pair, a ramp over the dimensions whose number
// of rotations within the original length lies between beta_slow and
// beta_fast mixes interpolated (theta^(-2k/r)/factor) and extrapolated
// frequencies. The attention factor multiplies q and k (logits by its square):
//   attention_factor if given, else
//   mscale(factor, mscale) / mscale(factor, mscale_all_dim) if both are given
//   and non-zero (DeepSeek-V2), else 0.1 ln(factor) + 1;
// then times attn_factor (llama.cpp's multiplier, 1 by default).
// ext_factor scales the ramp as llama.cpp does (1 = the paper, 0 = pure
// interpolation). truncate rounds the correction range outward to whole
// dimensions (floor/ceil) as the paper's code does; false keeps it fractional.
struct YarnScaling {
  double factor = 1.0;
  std::int64_t original_max_position = 0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  std::optional<double> mscale;
  std::optional<double> mscale_all_dim;
  std::optional<double> attention_factor;
  bool truncate = true;
  double ext_factor = 1.0;
  double attn_factor = 1.0;
};

// Llama 3.1: wavelengths above original/low_freq_factor are divided by
// factor, below original/high_freq_factor kept, smoothly mixed in between.
struct Llama3Scaling {
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  std::int64_t original_max_position = 8192;
};

// LongRoPE (Phi-3): per-pair rescale factors, the short set for sequences of
// at most original_max_position tokens and the long set beyond, chosen per
// sequence. factor = extended length / original length sets the default
// attention factor sqrt(1 + ln(factor)/ln(original_max_position)).
// short_mscale / long_mscale (PhiMoE) replace the attention factor for the
// sequences of each set, where given, as Hugging Face's PhimoeRotaryEmbedding does.
struct LongRopeScaling {
  std::vector<double> short_factor;
  std::vector<double> long_factor;
  std::int64_t original_max_position = 0;
  double factor = 1.0;
  std::optional<double> attention_factor;
  std::optional<double> short_mscale;
  std::optional<double> long_mscale;
};

// Caller-given per-pair divisors of the frequencies (llama.cpp's rope_freqs
// tensor, which is how GGUF files carry Llama-3 scaling): inv_freq[k] /= factors[k].
struct FrequencyFactorScaling {
  std::vector<double> factors;
};

using RopeScaling = std::variant<NoScaling, LinearScaling, NtkAwareScaling, DynamicNtkScaling, YarnScaling,
                                 Llama3Scaling, LongRopeScaling, FrequencyFactorScaling>;

// "none", "linear", "ntk", "dynamic", "yarn", "llama3", "longrope", "factors".
std::string_view RopeScalingName(const RopeScaling& scaling);

// The largest head_dim a RopeSpec accepts. Real heads are 64..576 wide; a
// larger value is a mistake (a typo, a hidden size passed as head_dim) that
// would otherwise allocate frequency tables and analyses of that width.
inline constexpr std::int64_t kMaxHeadDim = 65536;

struct RopeSpec {
  double theta = 10000.0;
  std::int64_t head_dim = 0;
  std::int64_t rotary_dim = 0;  // 0 means head_dim
  RopeLayout layout = RopeLayout::kHalfSplit;
  RopeScaling scaling = NoScaling{};

  std::int64_t RotaryDim() const { return rotary_dim == 0 ? head_dim : rotary_dim; }
  std::int64_t Pairs() const { return RotaryDim() / 2; }
  // Throws posenc::Error naming the first field that breaks a rule.
  void Validate() const;
};

// Hugging Face's rule: rotary_dim = int(head_dim * partial_rotary_factor);
// the factor must be in (0, 1] and the result even.
std::int64_t RotaryDimFromFactor(std::int64_t head_dim, double partial_rotary_factor);

}  // namespace posenc
