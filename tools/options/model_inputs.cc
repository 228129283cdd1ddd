#include "options/model_inputs.h"

#include <algorithm>
#include <chrono>

#include "posenc/error.h"
#include "posenc/gguf.h"
#include "posenc/input_file.h"

namespace posenc::cli {

constexpr std::uint64_t kMaxTextBytes = std::uint64_t{1} << 30;

LoadedModel LoadModel(const std::string& path, WeightOptions weights) {
  const auto start = std::chrono::steady_clock::now();
  const GgufFile file = GgufFile::Open(path);
  LoadedModel loaded{DecoderModel::FromGguf(file, weights.storage, weights.activations),
                     BpeTokenizer::FromGguf(file.metadata())};
  loaded.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return loaded;
}

void AddWeightOptions(CLI::App& command, WeightOptions& weights) {
  command
      .add_option_function<std::string>(
          "--weights",
          [&weights](const std::string& text) {
            weights.storage = text == "f32" ? WeightStorage::kFloat32 : WeightStorage::kAsStored;
          },
          "stored: the weights kept as the file stores them (the quantized kernels); f32: dequantized to float32 "
          "(the reference, 4 bytes a weight)")
      ->check(CLI::IsMember({"stored", "f32"}))
      ->default_str("stored");
  command
      .add_option_function<std::string>(
          "--activations",
          [&weights](const std::string& text) {
            weights.activations = text == "int8" ? DotActivations::kInt8 : DotActivations::kFloat32;
          },
          "of the products with quantized weights (prefill and decode): f32 as they are; int8 rounded in blocks of "
          "32 for integer dot products (as llama.cpp; faster decode, and prefill where the CPU has AVX2 or "
          "AVX-512 VNNI; a small cost in perplexity; needs --weights stored)")
      ->check(CLI::IsMember({"f32", "int8"}))
      ->default_str("f32");
}

std::vector<std::int32_t> TokenizeFile(const BpeTokenizer& tokenizer, const std::string& path) {
  return tokenizer.Encode(
      ReadRegularFile("text", "path", path, kMaxTextBytes, "the text is read and tokenized in memory"));
}

void AddModelOption(CLI::App& command, std::string& path) {
  command.add_option("--model", path, "GGUF model file of a family the engine runs: " + DecoderFamilies())
      ->capture_default_str();
}

void AddMethodsOption(CLI::App& command, const std::shared_ptr<std::vector<ContextExtension>>& methods,
                      const std::string& default_help) {
  command.add_option_function<std::vector<std::string>>(
      "--methods",
      [methods](const std::vector<std::string>& lists) {
        std::string all;
        for (const std::string& list : lists) all += (all.empty() ? "" : ";") + list;
        *methods = ParseContextExtensionList(all);
      },
      "Methods in the ppl --method form, as separate arguments or separated by ';' (--methods none "
      "yarn:factor=2,logn \"rerope:window=512;lambda\"); default: " +
          default_help);
}

void AddMethodsOption(CLI::App& command, const std::shared_ptr<std::vector<ContextExtension>>& methods,
                      std::string_view default_methods, std::string_view note) {
  *methods = ParseContextExtensionList(default_methods);
  std::string help(default_methods);
  std::replace(help.begin(), help.end(), ';', ' ');
  AddMethodsOption(command, methods, note.empty() ? help : help + " " + std::string(note));
}

}  // namespace posenc::cli
