// RoPE specs from and to model configurations: Hugging Face config.json and
// GGUF metadata. Unknown scaling types and inconsistent fields are errors that
// name the field, never warnings.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/gguf_metadata.h"
#include "posenc/rope_spec.h"

namespace posenc {

// Whether a layer rotates q and k: Llama 4 interleaves NoPE layers (no
// position encoding at all) between RoPE layers.
enum class LayerPosition { kRope, kNope };

// What a model configuration says beyond the spec itself.
struct RopeModelConfig {
  RopeSpec spec;
  std::int64_t max_position_embeddings = 0;  // 0 if the config has none
  // Qwen2-VL's multimodal RoPE (rope_scaling {"type": "mrope",
  // "mrope_section": [t, h, w]}): the first t pairs rotate by a token's
  // temporal position, the next h by its height, the last w by its width
  // (ApplyMultimodalRope); t + h + w = rotary_dim / 2. Empty: one position.
  std::vector<std::int64_t> mrope_section;
  // The scale of q.k where the config sets one other than 1/sqrt(head_dim):
  // DeepSeek-V2/V3 (a YaRN rope_scaling with mscale_all_dim) use
  // (qk_nope_head_dim + qk_rope_head_dim)^(-1/2) * m^2 with
  // m = 0.1 mscale_all_dim ln(factor) + 1 (their modeling code's
  // yarn_get_mscale). None: the default.
  std::optional<double> softmax_scale;
  // Per layer (num_hidden_layers), whether it rotates: Llama 4's
  // no_rope_layers (1: RoPE, 0: NoPE) or no_rope_layer_interval (every
  // interval-th layer NoPE). Empty: every layer RoPE.
  std::vector<LayerPosition> layer_positions;
};

// Reads rope_theta (or rotary_emb_base), head_dim (or DeepSeek's
// qk_rope_head_dim, or hidden_size / num_attention_heads),
// partial_rotary_factor (or rotary_pct, or GPT-J's rotary_dim; it and
// rope_theta are read in transformers v5's rope_parameters first),
// max_position_embeddings, original_max_position_embeddings and rope_scaling
// or rope_parameters with `type` or `rope_type`. The layout is interleaved for
// GPT-J and DeepSeek-V2/V3 (model_type "gptj", "deepseek_v2", "deepseek_v3")
// and half-split otherwise, as their reference code applies it.
RopeModelConfig RopeFromHfConfig(std::string_view config_json);
// The same from a config.json file (a regular file of at most
// kMaxHfConfigBytes); errors name the file.
inline constexpr std::uint64_t kMaxHfConfigBytes = 16 << 20;
RopeModelConfig RopeFromHfConfigFile(const std::string& path);

// A config.json fragment that RopeFromHfConfig reads back to the same spec.
std::string RopeToHfConfig(const RopeModelConfig& config);

// What a rope_scaling object cannot say itself, from the config around it:
// the model's max_position_embeddings (dynamic NTK, YaRN and LongRoPE take it
// as the original length when the object has no
// original_max_position_embeddings), and Phi-3's top-level
// original_max_position_embeddings (LongRoPE's factor is then the ratio of
// the two). 0: not known.
struct RopeScalingContext {
  std::int64_t max_position_embeddings = 0;
  std::int64_t top_level_original_max_position = 0;
};

// The inverse of RopeScalingToJson, and the one reader of Hugging Face's
// rope_scaling / rope_parameters object (config.json, the CLI and Python all
// use it): `rope_type` or `type` names the method ("default", "none" or null
// text: no scaling). The rule for keys: every key must be one the method
// reads, or rope_type or type; any other key is an error naming it and the
// method's keys, so a misspelt key never passes silently (it is reported
// before a required key found missing). rope_theta and partial_rotary_factor
// are the model's, not the scaling's: RopeFromHfConfig reads them in
// transformers v5's rope_parameters; here, as in rope_scaling, they are
// unknown keys (transformers 4.x ignores them there with a warning).
RopeScaling RopeScalingFromJson(std::string_view text, const RopeScalingContext& context = {});

// The one serialized form of a scaling: a Hugging Face rope_scaling object
// ({"rope_type": "yarn", "factor": 4.0, ...}) with every field posenc keeps,
// or null for none. RopeFromHfConfig reads it back as rope_scaling;
// `posenc rope freqs --json` prints it and Python's RopeSpec.scaling is it as
// a dict.
std::string RopeScalingToJson(const RopeScaling& scaling);

// Reads general.architecture and `{arch}.rope.freq_base`,
// `{arch}.rope.dimension_count`, `{arch}.rope.scaling.*`,
// `{arch}.attention.key_length` / embedding_length / head_count and
// `{arch}.context_length`. The layout follows llama.cpp's per-architecture
// rope type (interleaved for llama-family GGUFs, whose Q/K weights were
// permuted by the converter; half-split for NeoX-style architectures).
RopeModelConfig RopeFromGguf(const GgufMetadata& metadata);

// The `{arch}.rope.*` keys (and head/context keys) that describe the spec.
GgufMetadata RopeToGguf(const RopeModelConfig& config, std::string_view architecture);

}  // namespace posenc
