#include "model_inputs.h"

#include <chrono>
#include <fstream>
#include <sstream>

#include "posenc/error.h"
#include "posenc/gguf.h"

namespace posenc::cli {

LoadedModel LoadModel(const std::string& path) {
  const auto start = std::chrono::steady_clock::now();
  const GgufFile file = GgufFile::Open(path);
  LoadedModel loaded{LlamaModel::FromGguf(file), BpeTokenizer::FromGguf(file.metadata())};
  loaded.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return loaded;
}

std::vector<std::int32_t> TokenizeFile(const BpeTokenizer& tokenizer, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  Require(in.good(), "text", "path", path, "cannot be opened");
  std::ostringstream text;
  text << in.rdbuf();
  return tokenizer.Encode(text.str());
}

}  // namespace posenc::cli
