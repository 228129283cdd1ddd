// Perplexity of a GGUF model under a context-extension method, and the attention plan alone.
//   perplexity MODEL.gguf TEXT   (./scripts/fetch-model and ./scripts/fetch-texts print theirs)
// One window of 1.5x the model's training length: 12,288 tokens for SmolLM2, about a minute on 2 cores.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "posenc/error.h"  // posenc::Error
#include "posenc/gguf.h"
#include "posenc/input_file.h"
#include "posenc/perplexity.h"  // DecoderModel, ContextExtension, EvaluatePerplexity
#include "posenc/tokenizer.h"   // BpeTokenizer

int main(int argc, char** argv) try {
  if (argc != 3) {
    std::fprintf(stderr, "usage: perplexity MODEL.gguf TEXT\n");
    return 2;
  }
  const posenc::GgufFile file = posenc::GgufFile::Open(argv[1]);
  const posenc::DecoderModel model = posenc::DecoderModel::FromGguf(file);
  const std::string text = posenc::ReadRegularFile("example", "text", argv[2], 1 << 30, "read into memory");
  const std::vector<std::int32_t> tokens = posenc::BpeTokenizer::FromGguf(file.metadata()).Encode(text);
  const std::int64_t train_length = model.hparams().context_length;

  posenc::PerplexityOptions options;
  options.context = train_length * 3 / 2;
  options.max_windows = 1;
  options.extension = posenc::ParseContextExtension("yarn");
  const posenc::PerplexityResult r = posenc::EvaluatePerplexity(model, tokens, options);  // r.ppl, r.tokens_per_s
  // r.position_nll[i]: mean -ln p of the token at window position i + 1 (the study's curves)
  std::printf("%s at %lld tokens: ppl %.3f, %.0f tokens/s\n", posenc::FormatContextExtension(r.method).c_str(),
              static_cast<long long>(options.context), r.ppl, r.tokens_per_s);

  // Or the attention plan alone, for another engine: frequencies, distance map, mask, log-n.
  const posenc::ExtensionPlan plan = posenc::PlanContextExtension(posenc::ParseContextExtension("leaky-rerope"),
                                                                  model.hparams().rope, train_length, 2 * train_length);
  const std::vector<std::int32_t> prompt(tokens.begin(), tokens.begin() + std::min<std::size_t>(64, tokens.size()));
  const std::vector<float> logits = model.Logits(prompt, plan.attention);  // [n, vocab]: keep n small
  std::printf("%s: %zu logits\n", posenc::FormatContextExtension(plan.resolved).c_str(), logits.size());
  return 0;
} catch (const posenc::Error& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 2;
}
