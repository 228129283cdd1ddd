// The decoder families the engine runs, keyed by general.architecture. A
// family is one function from the file's metadata to its features
// (decoder_features.h), given the shapes already read from the same
// metadata; the tensors a layer holds follow from the features (llama.cpp's
// names for each role: attn_q_norm for the QK norm, post_ffw_norm for a
// post-norm, ...). Adding a family: its file in this folder, its row below,
// and the file in src/CMakeLists.txt.
#pragma once

#include <string_view>

#include "posenc/decoder_features.h"
#include "posenc/gguf_metadata.h"
#include "posenc/decoder_model.h"

namespace posenc::families {

// `shapes`: the hyperparameters from `{arch}.*` without the features. Throws
// posenc::Error naming the key for a value the family cannot run.
using FeaturesFromGguf = DecoderFeatures (*)(const GgufMetadata& metadata, const DecoderHyperparams& shapes);

struct DecoderFamily {
  std::string_view architecture;  // general.architecture, and the prefix of its keys
  std::string_view models;        // what it covers, for the error naming the families
  FeaturesFromGguf features;
};

DecoderFeatures LlamaFeatures(const GgufMetadata& metadata, const DecoderHyperparams& shapes);   // llama.cc
DecoderFeatures Gemma3Features(const GgufMetadata& metadata, const DecoderHyperparams& shapes);  // gemma3.cc
DecoderFeatures Qwen2Features(const GgufMetadata& metadata, const DecoderHyperparams& shapes);   // qwen2.cc
DecoderFeatures Phi3Features(const GgufMetadata& metadata, const DecoderHyperparams& shapes);    // phi3.cc

inline constexpr DecoderFamily kDecoderFamilies[] = {
    {"llama", "Llama 2/3, SmolLM, TinyLlama, Mistral-style dense models", &LlamaFeatures},
    {"gemma3", "Gemma 3", &Gemma3Features},
    {"qwen2", "Qwen2, Qwen2.5", &Qwen2Features},
    {"phi3", "Phi-3, Phi-3.5, Phi-4", &Phi3Features},
};

}  // namespace posenc::families
