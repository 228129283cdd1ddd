// Writes the tests' small random-weight Llama GGUF and a short English text,
// for the command-line tests of `posenc ppl`, `posenc study` and
// `posenc bench model`: make_random_llama OUT.gguf OUT.txt [ARCHITECTURE]
// (llama by default; gemma3: six layers, every sixth global, the others a
// window of 8 keys).
#include <cstdio>
#include <fstream>
#include <string>

#include "random_llama.h"

int main(int argc, char** argv) {
  if (argc != 3 && argc != 4) {
    std::fprintf(stderr, "usage: make_random_llama OUT.gguf OUT.txt [llama|gemma3]\n");
    return 1;
  }
  posenc::testing::RandomLlamaOptions options;
  if (argc == 4) {
    options.architecture = argv[3];
    if (options.architecture == "gemma3") options.blocks = 6;
  }
  const std::vector<unsigned char> bytes = posenc::testing::RandomLlamaGguf(options);
  std::ofstream(argv[1], std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  std::string text;
  for (int i = 0; i < 40; ++i) {
    text += "Sentence " + std::to_string(i) + ": positions are encoded so that attention can tell near from far.\n";
  }
  std::ofstream(argv[2]) << text;
  return 0;
}
