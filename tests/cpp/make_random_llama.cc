// Writes the tests' small random-weight Llama GGUF and a short English text,
// for the command-line tests of `posenc ppl`, `posenc study` and
// `posenc bench model`: make_random_llama OUT.gguf OUT.txt
#include <cstdio>
#include <fstream>
#include <string>

#include "random_llama.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: make_random_llama OUT.gguf OUT.txt\n");
    return 1;
  }
  const std::vector<unsigned char> bytes = posenc::testing::RandomLlamaGguf();
  std::ofstream(argv[1], std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  std::string text;
  for (int i = 0; i < 40; ++i) {
    text += "Sentence " + std::to_string(i) + ": positions are encoded so that attention can tell near from far.\n";
  }
  std::ofstream(argv[2]) << text;
  return 0;
}
