#include "options/model_inputs.h"

#include <chrono>

#include "posenc/error.h"
#include "posenc/gguf.h"
#include "posenc/input_file.h"

namespace posenc::cli {

constexpr std::uint64_t kMaxTextBytes = std::uint64_t{1} << 30;

LoadedModel LoadModel(const std::string& path, WeightStorage weights) {
  const auto start = std::chrono::steady_clock::now();
  const GgufFile file = GgufFile::Open(path);
  LoadedModel loaded{LlamaModel::FromGguf(file, weights), BpeTokenizer::FromGguf(file.metadata())};
  loaded.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return loaded;
}

void AddWeightsOption(CLI::App& command, WeightStorage& weights) {
  command
      .add_option_function<std::string>(
          "--weights",
          [&weights](const std::string& text) {
            weights = text == "f32" ? WeightStorage::kFloat32 : WeightStorage::kAsStored;
          },
          "stored: the weights kept as the file stores them (the quantized kernels); f32: dequantized to float32 "
          "(the reference, 4 bytes a weight)")
      ->check(CLI::IsMember({"stored", "f32"}))
      ->default_str("stored");
}

std::vector<std::int32_t> TokenizeFile(const BpeTokenizer& tokenizer, const std::string& path) {
  return tokenizer.Encode(
      ReadRegularFile("text", "path", path, kMaxTextBytes, "the text is read and tokenized in memory"));
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

}  // namespace posenc::cli
