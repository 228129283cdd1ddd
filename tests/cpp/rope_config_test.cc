// RoPE specs read from Hugging Face config.json and GGUF metadata, printed
// back, and the errors for configs that are wrong.
#include "posenc/rope_config.h"
#include "posenc/rope_frequencies.h"

#include <fstream>
#include <sstream>

#include "test_util.h"

namespace posenc {
namespace {

using testing::ExpectError;

std::string ReadExample(const std::string& name) {
  std::ifstream in(std::string(POSENC_SOURCE_DIR) + "/examples/configs/" + name);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(HfConfig, Llama31) {
  const auto config = RopeFromHfConfig(ReadExample("llama-3.1-8b.json"));
  EXPECT_EQ(config.spec.theta, 500000.0);
  EXPECT_EQ(config.spec.head_dim, 128);
  EXPECT_EQ(config.spec.RotaryDim(), 128);
  EXPECT_EQ(config.spec.layout, RopeLayout::kHalfSplit);
  EXPECT_EQ(config.max_position_embeddings, 131072);
  const auto& llama3 = std::get<Llama3Scaling>(config.spec.scaling);
  EXPECT_EQ(llama3.factor, 8.0);
  EXPECT_EQ(llama3.low_freq_factor, 1.0);
  EXPECT_EQ(llama3.high_freq_factor, 4.0);
  EXPECT_EQ(llama3.original_max_position, 8192);
}

TEST(HfConfig, Qwen2YarnWithLegacyTypeSpelling) {
  const auto config = RopeFromHfConfig(ReadExample("qwen2-7b-yarn.json"));
  const auto& yarn = std::get<YarnScaling>(config.spec.scaling);
  EXPECT_EQ(yarn.factor, 4.0);
  EXPECT_EQ(yarn.original_max_position, 32768);
  EXPECT_EQ(yarn.beta_fast, 32.0);
  EXPECT_EQ(yarn.beta_slow, 1.0);
  EXPECT_TRUE(yarn.truncate);
}

TEST(HfConfig, Llama2HasNoScaling) {
  const auto config = RopeFromHfConfig(ReadExample("llama-2-7b.json"));
  EXPECT_TRUE(std::holds_alternative<NoScaling>(config.spec.scaling));
  EXPECT_EQ(config.spec.theta, 10000.0);
}

TEST(HfConfig, GptNeoxPartialRotaryAndGptjInterleaved) {
  const auto neox = RopeFromHfConfig(R"({"model_type": "gpt_neox", "hidden_size": 6144,
      "num_attention_heads": 64, "rotary_pct": 0.25, "rotary_emb_base": 10000, "max_position_embeddings": 2048})");
  EXPECT_EQ(neox.spec.head_dim, 96);
  EXPECT_EQ(neox.spec.RotaryDim(), 24);
  const auto gptj = RopeFromHfConfig(R"({"model_type": "gptj", "n_embd": 4096, "n_head": 16,
      "rotary_dim": 64, "n_positions": 2048})");
  EXPECT_EQ(gptj.spec.head_dim, 256);
  EXPECT_EQ(gptj.spec.RotaryDim(), 64);
  EXPECT_EQ(gptj.spec.layout, RopeLayout::kInterleaved);
  EXPECT_EQ(gptj.max_position_embeddings, 2048);
}

TEST(HfConfig, RopeParametersSpellingOfTransformersV5) {
  const auto config = RopeFromHfConfig(R"({"head_dim": 64, "max_position_embeddings": 4096,
      "rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 250000}})");
  EXPECT_EQ(config.spec.theta, 250000.0);
  EXPECT_EQ(std::get<LinearScaling>(config.spec.scaling).factor, 2.0);
}

TEST(HfConfig, Phi3LongRopeTakesFactorFromTheLengths) {
  std::string shorts = "[", longs = "[";
  for (int k = 0; k < 48; ++k) {
    shorts += std::string(k ? "," : "") + "1.0";
    longs += std::string(k ? "," : "") + std::to_string(1.0 + k);
  }
  const auto config = RopeFromHfConfig(R"({"hidden_size": 3072, "num_attention_heads": 32,
      "max_position_embeddings": 131072, "original_max_position_embeddings": 4096,
      "rope_scaling": {"type": "longrope", "short_factor": )" +
                                       shorts + "], \"long_factor\": " + longs + "]}}");
  const auto& longrope = std::get<LongRopeScaling>(config.spec.scaling);
  EXPECT_EQ(longrope.original_max_position, 4096);
  EXPECT_EQ(longrope.factor, 32.0);
  EXPECT_EQ(longrope.long_factor[47], 48.0);
}

TEST(HfConfig, DeepSeekYarnFields) {
  const auto config = RopeFromHfConfig(R"({"head_dim": 64, "max_position_embeddings": 163840,
      "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096,
      "beta_fast": 32, "beta_slow": 1, "mscale": 0.707, "mscale_all_dim": 0.707}})");
  const auto& yarn = std::get<YarnScaling>(config.spec.scaling);
  EXPECT_EQ(yarn.original_max_position, 4096);
  EXPECT_EQ(*yarn.mscale, 0.707);
  EXPECT_EQ(*yarn.mscale_all_dim, 0.707);
  EXPECT_FALSE(yarn.attention_factor.has_value());
}

TEST(HfConfig, ErrorsNameTheField) {
  ExpectError([] { RopeFromHfConfig(R"({"head_dim": 64, "rope_scaling": {"rope_type": "su2"}})"); },
              {"[hf-config] rope_scaling.rope_type = \"su2\"", "unknown"});
  ExpectError(
      [] {
        RopeFromHfConfig(R"({"head_dim": 64, "rope_scaling": {"type": "linear", "rope_type": "yarn", "factor": 2}})");
      },
      {"disagrees"});
  ExpectError(
      [] {
        RopeFromHfConfig(R"({"head_dim": 64, "rope_scaling": {"rope_type": "llama3", "factor": 8,
      "high_freq_factor": 4, "original_max_position_embeddings": 8192}})");
      },
      {"rope_scaling.low_freq_factor = missing"});
  ExpectError([] { RopeFromHfConfig(R"({"head_dim": 64, "rope_scaling": {"rope_type": "linear"}})"); },
              {"rope_scaling.factor = missing"});
  ExpectError([] { RopeFromHfConfig(R"({"head_dim": 64, "rope_scaling": {"rope_type": "linear", "factor": 0}})"); },
              {"factor = 0", "> 0"});
  ExpectError([] { RopeFromHfConfig(R"({"head_dim": 64, "rope_theta": "big"})"); },
              {"rope_theta = \"big\"", "must be a number"});
  ExpectError([] { RopeFromHfConfig(R"({"model_type": "llama"})"); }, {"head_dim = missing"});
  ExpectError([] { RopeFromHfConfig("{not json"); }, {"config.json", "valid JSON"});
  ExpectError([] { RopeFromHfConfig(R"({"head_dim": 63})"); }, {"head_dim = 63", "even"});
  ExpectError([] { RopeFromHfConfig(R"({"head_dim": 64, "rope_scaling": {"type": "dynamic", "factor": 2}})"); },
              {"max_position_embeddings = missing"});
}

TEST(HfConfig, ScalingJsonIsReadBackAsRopeScaling) {
  EXPECT_EQ(RopeScalingToJson(NoScaling{}), "null");
  YarnScaling yarn;
  yarn.factor = 4;
  yarn.original_max_position = 32768;
  yarn.mscale = 0.707;
  const std::vector<RopeScaling> scalings{NoScaling{},
                                          LinearScaling{2},
                                          NtkAwareScaling{3},
                                          DynamicNtkScaling{2, 4096},
                                          yarn,
                                          Llama3Scaling{},
                                          FrequencyFactorScaling{std::vector<double>(32, 2.0)}};
  for (const RopeScaling& scaling : scalings) {
    const std::string json = RopeScalingToJson(scaling);
    EXPECT_EQ(json.rfind(scaling.index() == 0 ? "null" : "{\"rope_type\":", 0), 0u) << json;
    // No max_position_embeddings: every length the method needs is in the object.
    const auto back = RopeFromHfConfig(R"({"head_dim": 64, "rope_scaling": )" + json + "}").spec.scaling;
    EXPECT_EQ(RopeScalingToJson(back), json);
  }
}

// RopeScalingFromJson is the inverse of RopeScalingToJson, and the rule for
// keys is one: a key no method reads is an error.
TEST(HfConfig, RopeScalingFromJsonInvertsToJsonAndRefusesUnknownKeys) {
  LongRopeScaling longrope;
  longrope.short_factor = std::vector<double>(32, 1.0);
  longrope.long_factor = std::vector<double>(32, 3.0);
  longrope.original_max_position = 4096;
  longrope.factor = 32;
  const std::vector<RopeScaling> scalings{NoScaling{},
                                          LinearScaling{2},
                                          NtkAwareScaling{3},
                                          DynamicNtkScaling{2, 4096},
                                          Llama3Scaling{},
                                          longrope,
                                          FrequencyFactorScaling{std::vector<double>(32, 2.0)}};
  for (const RopeScaling& scaling : scalings) {
    const std::string json = RopeScalingToJson(scaling);
    EXPECT_EQ(RopeScalingToJson(RopeScalingFromJson(json)), json);
  }
  EXPECT_TRUE(std::holds_alternative<NoScaling>(RopeScalingFromJson(R"({"rope_type": "none"})")));
  ExpectError([] { RopeScalingFromJson(R"({"rope_type": "linear", "factor": 2, "factr": 2})"); },
              {"[rope] rope_scaling.factr = 2: unknown key for rope_type \"linear\"; known keys: factor"});
  ExpectError([] { RopeScalingFromJson(R"({"factor": 2})"); }, {"rope_scaling.rope_type = missing"});
  ExpectError([] { RopeScalingFromJson(R"({"rope_type": "linear", "factor": true})"); },
              {"rope_scaling.factor = true: must be a number"});
  ExpectError([] { RopeScalingFromJson(R"({"rope_type": "yarn", "factor": 4})"); },
              {"rope_scaling.original_max_position_embeddings = missing"});
  // The model's length stands in for a missing original length.
  const auto yarn = std::get<YarnScaling>(
      RopeScalingFromJson(R"({"rope_type": "yarn", "factor": 4})", {.max_position_embeddings = 32768}));
  EXPECT_EQ(yarn.original_max_position, 32768);
}

// A misspelt required key is reported as the unknown key it is, with the
// method's keys, not as the key it stands for being missing.
TEST(HfConfig, MisspeltRequiredKeyIsUnknownNotMissing) {
  ExpectError(
      [] { RopeScalingFromJson(R"({"rope_type": "yarn", "factor": 4, "original_max_position_embedding": 4096})"); },
      {"[rope] rope_scaling.original_max_position_embedding = 4096: unknown key for rope_type \"yarn\"; known keys: "
       "attention_factor, attn_factor, beta_fast, beta_slow, ext_factor, factor, mscale, mscale_all_dim, "
       "original_max_position_embeddings, truncate"});
  ExpectError([] { RopeScalingFromJson(R"({"rope_type": "linear", "factr": 2})"); },
              {"rope_scaling.factr = 2: unknown key for rope_type \"linear\"; known keys: factor"});
  ExpectError(
      [] {
        RopeScalingFromJson(R"({"rope_type": "llama3", "factor": 8, "low_freq_factor": 1, "high_freq_factor": 4,
            "original_max_position_embedding": 8192})");
      },
      {"rope_scaling.original_max_position_embedding = 8192: unknown key", "original_max_position_embeddings"});
  // With no unknown key, the missing one is named.
  ExpectError([] { RopeScalingFromJson(R"({"rope_type": "longrope", "long_factor": [1]})"); },
              {"rope_scaling.short_factor = missing: rope_type \"longrope\" needs it"});
}

// rope_theta and partial_rotary_factor are the model's: read in transformers
// v5's rope_parameters (as v5's RoPE init reads them there), unknown keys in
// rope_scaling (transformers 4.49's rope_config_validation warns
// "Unrecognized keys" and its RoPE init reads config.rope_theta only) and in
// a scaling object given alone (which has no theta to set).
TEST(HfConfig, ModelKeysOnlyInRopeParameters) {
  const auto v5 = RopeFromHfConfig(R"({"head_dim": 64, "rope_theta": 10000,
      "rope_parameters": {"rope_type": "default", "rope_theta": 1e6, "partial_rotary_factor": 0.25}})");
  EXPECT_EQ(v5.spec.theta, 1e6);
  EXPECT_EQ(v5.spec.RotaryDim(), 16);
  ExpectError(
      [] {
        RopeFromHfConfig(R"({"head_dim": 64, "rope_theta": 10000,
            "rope_scaling": {"rope_type": "linear", "factor": 2, "rope_theta": 1e6}})");
      },
      {"[hf-config] rope_scaling.rope_theta = 1000000.0: unknown key for rope_type \"linear\"; known keys: factor "
       "(rope_theta is the model's, not the scaling's"});
  ExpectError([] { RopeScalingFromJson(R"({"rope_theta": 1e6})"); },
              {"rope_scaling.rope_theta = 1000000.0: unknown key for rope_type \"default\"; known keys: none"});
  ExpectError([] { RopeScalingFromJson(R"({"rope_type": "linear", "factor": 2, "partial_rotary_factor": 0.5})"); },
              {"rope_scaling.partial_rotary_factor = 0.5: unknown key", "top level of config.json"});
}

TEST(HfConfig, PrintsBackToTheSameSpec) {
  for (const char* name : {"llama-3.1-8b.json", "qwen2-7b-yarn.json", "llama-2-7b.json"}) {
    const auto config = RopeFromHfConfig(ReadExample(name));
    const auto again = RopeFromHfConfig(RopeToHfConfig(config));
    EXPECT_EQ(RopeToHfConfig(again), RopeToHfConfig(config)) << name;
    EXPECT_EQ(ComputeRopeFrequencies(again.spec).inv_freq, ComputeRopeFrequencies(config.spec).inv_freq);
  }
  RopeModelConfig partial{.spec = {.theta = 10000, .head_dim = 96, .rotary_dim = 64}};
  EXPECT_EQ(RopeFromHfConfig(RopeToHfConfig(partial)).spec.RotaryDim(), 64);
}

GgufMetadata LlamaGguf() {
  return {{"general.architecture", std::string("llama")},   {"llama.rope.freq_base", 100000.0},
          {"llama.embedding_length", std::int64_t{576}},    {"llama.attention.head_count", std::int64_t{9}},
          {"llama.rope.dimension_count", std::int64_t{64}}, {"llama.context_length", std::int64_t{8192}}};
}

TEST(GgufConfig, SmolLm2StyleLlama) {
  const auto config = RopeFromGguf(LlamaGguf());
  EXPECT_EQ(config.spec.theta, 100000.0);
  EXPECT_EQ(config.spec.head_dim, 64);
  EXPECT_EQ(config.spec.layout, RopeLayout::kInterleaved);  // llama.cpp permuted Q/K
  EXPECT_EQ(config.max_position_embeddings, 8192);
}

TEST(GgufConfig, YarnKeysAndRoundTrip) {
  auto meta = LlamaGguf();
  meta["general.architecture"] = std::string("qwen2");
  for (const auto* key :
       {"rope.freq_base", "embedding_length", "attention.head_count", "rope.dimension_count", "context_length"}) {
    meta["qwen2." + std::string(key)] = meta["llama." + std::string(key)];
  }
  meta["qwen2.rope.scaling.type"] = std::string("yarn");
  meta["qwen2.rope.scaling.factor"] = 4.0;
  meta["qwen2.rope.scaling.original_context_length"] = std::int64_t{32768};
  const auto config = RopeFromGguf(meta);
  EXPECT_EQ(config.spec.layout, RopeLayout::kHalfSplit);
  EXPECT_EQ(std::get<YarnScaling>(config.spec.scaling).original_max_position, 32768);
  const auto again = RopeFromGguf(RopeToGguf(config, "qwen2"));
  EXPECT_EQ(ComputeRopeFrequencies(again.spec).inv_freq, ComputeRopeFrequencies(config.spec).inv_freq);
  EXPECT_EQ(ComputeRopeFrequencies(again.spec).attention_factor, ComputeRopeFrequencies(config.spec).attention_factor);
}

TEST(GgufConfig, ErrorsNameTheKey) {
  ExpectError([] { RopeFromGguf({}); }, {"[gguf] general.architecture = missing"});
  ExpectError(
      [] {
        RopeFromGguf({{"general.architecture", std::string("bloom")}});
      },
      {"general.architecture = \"bloom\"", "no known RoPE layout"});
  auto meta = LlamaGguf();
  meta["llama.rope.scaling.type"] = std::string("su");
  ExpectError([&] { RopeFromGguf(meta); }, {"llama.rope.scaling.type = \"su\""});
  meta["llama.rope.scaling.type"] = std::string("linear");
  ExpectError([&] { RopeFromGguf(meta); }, {"llama.rope.scaling.factor = missing"});
  meta["llama.rope.freq_base"] = std::string("x");
  ExpectError([&] { RopeFromGguf(meta); }, {"llama.rope.freq_base", "must be a number"});
}

}  // namespace
}  // namespace posenc

namespace posenc {
namespace {

// Config variants (issue 51): LongRoPE's "su" alias and PhiMoE's short/long
// mscale, dynamic with alpha, DeepSeek's softmax scale, NoPE layers and
// Qwen2-VL's mrope sections. Hugging Face's values are held in
// tests/python/test_rope_config_variants_hf.py; here the reading and errors.
std::string Config(const std::string& rope_scaling, const std::string& extra = "") {
  return R"({"hidden_size": 256, "num_attention_heads": 4, "max_position_embeddings": 8192, )" + extra +
         R"("rope_scaling": )" + rope_scaling + "}";
}

TEST(HfConfigVariants, SuIsLongRopeAndMscalesReplaceTheAttentionFactor) {
  std::string list = "[1";
  for (int i = 1; i < 32; ++i) list += ", 1";
  list += "]";
  const auto su = RopeFromHfConfig(
      Config(R"({"type": "su", "short_factor": )" + list + R"(, "long_factor": )" + list +
                 R"(, "short_mscale": 1.25, "long_mscale": 1.5, "original_max_position_embeddings": 4096})",
             R"("original_max_position_embeddings": 4096, )"));
  const auto& longrope = std::get<LongRopeScaling>(su.spec.scaling);
  EXPECT_EQ(longrope.short_mscale, 1.25);
  EXPECT_EQ(ComputeRopeFrequencies(su.spec, 4096).attention_factor, 1.25);
  EXPECT_EQ(ComputeRopeFrequencies(su.spec, 4097).attention_factor, 1.5);
  // Written back as longrope with the mscales, read back the same.
  EXPECT_EQ(RopeScalingFromJson(RopeScalingToJson(su.spec.scaling)).index(), su.spec.scaling.index());
  EXPECT_EQ(std::get<LongRopeScaling>(RopeScalingFromJson(RopeScalingToJson(su.spec.scaling))).long_mscale, 1.5);
  ExpectError(
      [&] {
        RopeFromHfConfig(Config(R"({"type": "longrope", "short_factor": )" + list + R"(, "long_factor": )" + list +
                                R"(, "long_mscale": -1})"));
      },
      {"long_mscale = -1", "must be a finite number > 0"});
}

TEST(HfConfigVariants, DynamicWithAlphaIsTheNtkAlphaBase) {
  const auto config = RopeFromHfConfig(Config(R"({"type": "dynamic", "alpha": 1000.0, "factor": 1.0})"));
  EXPECT_EQ(std::get<NtkAwareScaling>(config.spec.scaling).alpha, 1000.0);
  // base x alpha^(d/(d-2)), d = 64: the slowest pair is divided by alpha exactly.
  const auto f = ComputeRopeFrequencies(config.spec);
  EXPECT_NEAR(f.inv_freq.back(), std::pow(10000.0 * std::pow(1000.0, 64.0 / 62.0), -62.0 / 64.0), 1e-20);
  EXPECT_NEAR(f.inv_freq.back() * 1000.0, std::pow(10000.0, -62.0 / 64.0), 1e-15);
  ExpectError([] { RopeFromHfConfig(Config(R"({"type": "dynamic", "alpha": 0})")); },
              {"rope_scaling.alpha = 0", "must be a finite number > 0"});
  ExpectError([] { RopeFromHfConfig(Config(R"({"type": "dynamic", "alpha": -2})")); }, {"alpha = -2"});
  ExpectError([] { RopeFromHfConfig(Config(R"({"type": "dynamic", "alpha": 4, "factor": 2})")); },
              {"rope_scaling.factor = 2", "must be 1 or absent with alpha"});
}

TEST(HfConfigVariants, DeepSeekSoftmaxScaleIsMscaleSquared) {
  // DeepSeek-V3: q_head_dim 128 + 64, factor 40, mscale_all_dim 1:
  // 192^-1/2 (0.1 ln 40 + 1)^2.
  const auto v3 = RopeFromHfConfig(
      R"({"model_type": "deepseek_v3", "hidden_size": 7168, "num_attention_heads": 128, "qk_nope_head_dim": 128,
          "qk_rope_head_dim": 64, "max_position_embeddings": 163840, "rope_scaling": {"type": "yarn",
          "factor": 40, "original_max_position_embeddings": 4096, "mscale": 1.0, "mscale_all_dim": 1.0,
          "beta_fast": 32, "beta_slow": 1}})");
  const double m = 0.1 * std::log(40.0) + 1;
  ASSERT_TRUE(v3.softmax_scale.has_value());
  EXPECT_NEAR(*v3.softmax_scale, m * m / std::sqrt(192.0), 1e-15);
  EXPECT_EQ(ComputeRopeFrequencies(v3.spec).attention_factor, 1.0);  // the ratio mscale / mscale_all_dim
  EXPECT_FALSE(RopeFromHfConfig(ReadExample("llama-3.1-8b.json")).softmax_scale.has_value());
}

TEST(HfConfigVariants, NopeLayersFromTheListOrTheInterval) {
  const auto listed = RopeFromHfConfig(Config("null", R"("num_hidden_layers": 3, "no_rope_layers": [1, 0, 1], )"));
  EXPECT_EQ(listed.layer_positions,
            (std::vector<LayerPosition>{LayerPosition::kRope, LayerPosition::kNope, LayerPosition::kRope}));
  const auto llama4 = RopeFromHfConfig(
      Config("null", R"("model_type": "llama4_text", "num_hidden_layers": 8, "no_rope_layers": [], )"));
  ASSERT_EQ(llama4.layer_positions.size(), 8u);
  for (std::size_t l = 0; l < 8; ++l) {
    EXPECT_EQ(llama4.layer_positions[l], (l + 1) % 4 == 0 ? LayerPosition::kNope : LayerPosition::kRope) << l;
  }
  EXPECT_TRUE(RopeFromHfConfig(ReadExample("llama-3.1-8b.json")).layer_positions.empty());
  ExpectError([] { RopeFromHfConfig(Config("null", R"("num_hidden_layers": 2, "no_rope_layers": [1, 2], )")); },
              {"no_rope_layers = 2", "must hold 0"});
  ExpectError([] { RopeFromHfConfig(Config("null", R"("num_hidden_layers": 3, "no_rope_layers": [1, 0], )")); },
              {"no_rope_layers.size() = 2", "num_hidden_layers = 3"});
}

TEST(HfConfigVariants, MropeSectionsAreReadAndChecked) {
  const auto qwen2vl = RopeFromHfConfig(Config(R"({"type": "mrope", "mrope_section": [8, 12, 12]})"));
  EXPECT_EQ(qwen2vl.mrope_section, (std::vector<std::int64_t>{8, 12, 12}));
  EXPECT_TRUE(std::holds_alternative<NoScaling>(qwen2vl.spec.scaling));
  // transformers rewrites the type to "default" and keeps the sections.
  EXPECT_EQ(RopeFromHfConfig(Config(R"({"rope_type": "default", "mrope_section": [8, 12, 12]})")).mrope_section,
            qwen2vl.mrope_section);
  EXPECT_EQ(RopeFromHfConfig(RopeToHfConfig(qwen2vl)).mrope_section, qwen2vl.mrope_section);
  ExpectError([] { RopeFromHfConfig(Config(R"({"type": "mrope", "mrope_section": [8, 12, 10]})")); },
              {"rope_scaling.mrope_section = [8, 12, 10]", "must sum to rotary_dim / 2 = 32", "not 30"});
  ExpectError([] { RopeFromHfConfig(Config(R"({"type": "mrope"})")); }, {"rope_scaling.mrope_section = missing"});
  ExpectError([] { RopeScalingFromJson(R"({"type": "mrope", "mrope_section": [8, 12, 12]})"); },
              {"rope_type = \"mrope\"", "a model's 3-D positions"});
  ExpectError([] { RopeFromHfConfig(Config(R"({"type": "ntk-by-parts", "factor": 2})")); },
              {"rope_type = \"ntk-by-parts\"", "unknown; must be one of default, none, linear, ntk, dynamic",
               "longrope (or su)", "mrope"});
}

}  // namespace
}  // namespace posenc
