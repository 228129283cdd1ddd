// What `posenc ppl`, `posenc study` and `posenc bench model` load: the model
// and its tokenizer from one GGUF file, and a text tokenized by it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>
#include <memory>

#include "options/default_inputs.h"
#include "posenc/context_extension.h"
#include "posenc/decoder_model.h"
#include "posenc/tokenizer.h"

namespace posenc::cli {

struct LoadedModel {
  DecoderModel model;
  BpeTokenizer tokenizer;
  double load_seconds = 0;
};

// How the model keeps its weights and what its decode products read.
struct WeightOptions {
  WeightStorage storage = WeightStorage::kAsStored;
  DotActivations activations = DotActivations::kFloat32;
};

// Throws posenc::Error naming the path when the file is missing or bad.
LoadedModel LoadModel(const std::string& path, WeightOptions weights = {});

// --weights stored|f32: the weights kept as the file stores them (the
// default) or dequantized to float32 (the reference); --activations
// f32|int8: the decode products' activations as they are (the default) or
// rounded to int8 (integer dot products, as llama.cpp; stored weights only).
void AddWeightOptions(CLI::App& command, WeightOptions& weights);

// The tokens of a UTF-8 text file, as they are (no BOS: the default model's
// GGUF sets add_bos_token false). Throws posenc::Error naming the path.
std::vector<std::int32_t> TokenizeFile(const BpeTokenizer& tokenizer, const std::string& path);

// --model FILE.gguf: a Llama-family or Gemma 3 GGUF (default: the default
// model, kept in `path` as given).
void AddModelOption(CLI::App& command, std::string& path);

// --methods for study and passkey: method texts as separate arguments or
// joined by ';', parsed into `methods` (ParseContextExtensionList's rules).
void AddMethodsOption(CLI::App& command, const std::shared_ptr<std::vector<ContextExtension>>& methods,
                      const std::string& default_help);
// The same with a default list in that form ("none;yarn;lambda"), written
// once: `methods` starts as it, and the help shows it, then `note`.
void AddMethodsOption(CLI::App& command, const std::shared_ptr<std::vector<ContextExtension>>& methods,
                      std::string_view default_methods, std::string_view note);

}  // namespace posenc::cli
