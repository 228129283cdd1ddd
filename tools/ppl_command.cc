// posenc ppl --model FILE.gguf --text FILE --ctx N [--stride S]
//            [--method NAME[:k=v,...]] [--max-windows W] [--threads T] [--json]
//
// Perplexity of a GGUF llama-family model over a text in windows of N tokens
// (include/posenc/perplexity.h), under one context-extension method
// (include/posenc/context_extension.h) whose defaults follow the model's
// training length and N.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "integer_options.h"
#include "model_inputs.h"
#include "posenc/parallel.h"
#include "posenc/perplexity.h"
#include "progress_bar.h"

namespace posenc::cli {
namespace {

struct PplOptions {
  std::string model = kDefaultModelPath;
  std::string text;
  std::int64_t ctx = 0;
  std::int64_t stride = 0;
  std::string method = "none";
  std::int64_t max_windows = 0;
  int threads = 0;
  bool json = false;
};

void Run(const PplOptions& o) {
  if (o.threads > 0) SetNumThreads(o.threads);
  PerplexityOptions options;
  options.context = o.ctx;
  options.stride = o.stride;
  options.extension = ParseContextExtension(o.method);  // bad methods fail before the model loads
  options.max_windows = o.max_windows;

  const LoadedModel loaded = LoadModel(o.model);
  const std::vector<std::int32_t> tokens = TokenizeFile(loaded.tokenizer, o.text);
  ProgressBar bar("ppl " + o.method + " ctx " + std::to_string(o.ctx), "tok");
  const PerplexityResult r = EvaluatePerplexity(
      loaded.model, tokens, options, [&](std::int64_t done, std::int64_t total) { bar.Update(done, total); });
  bar.Finish();

  const std::string method = FormatContextExtension(r.method);
  if (o.json) {
    nlohmann::ordered_json out{{"ppl", r.ppl},
                               {"mean_nll", r.mean_nll},
                               {"tokens", r.scored},
                               {"tokens_per_s", r.tokens_per_s},
                               {"seconds", r.seconds},
                               {"processed", r.processed},
                               {"windows", r.windows},
                               {"ctx", o.ctx},
                               {"stride", o.stride == 0 ? o.ctx : o.stride},
                               {"method", method},
                               {"train_length", loaded.model.hparams().context_length},
                               {"text_tokens", tokens.size()},
                               {"threads", NumThreads()},
                               {"model", o.model},
                               {"text", o.text}};
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::printf("model %s (trained on %lld tokens), text %s: %zu tokens\n", o.model.c_str(),
              static_cast<long long>(loaded.model.hparams().context_length), o.text.c_str(), tokens.size());
  std::printf("method %s, ctx %lld, stride %lld: %lld windows, %lld tokens scored\n", method.c_str(),
              static_cast<long long>(o.ctx), static_cast<long long>(o.stride == 0 ? o.ctx : o.stride),
              static_cast<long long>(r.windows), static_cast<long long>(r.scored));
  std::printf("ppl %.4f (mean NLL %.5f nats)\n", r.ppl, r.mean_nll);
  std::printf("%.1f tokens/s, %.1f s (%d threads; model loaded in %.1f s)\n", r.tokens_per_s, r.seconds, NumThreads(),
              loaded.load_seconds);
}

}  // namespace

void AddPplCommand(CLI::App& app) {
  auto o = std::make_shared<PplOptions>();
  CLI::App* ppl = app.add_subcommand("ppl", "Perplexity of a GGUF model over a text under a context-extension method");
  ppl->add_option("--model", o->model, "GGUF model file (llama family)")->capture_default_str();
  ppl->add_option("--text", o->text, "UTF-8 text file")->required();
  ppl->add_option("--ctx", o->ctx, "Tokens per window")->required();
  ppl->add_option("--stride", o->stride, "Tokens between window starts, 1..ctx (default: ctx, non-overlapping)")
      ->check(IntegerAtLeast(1));
  ppl->add_option("--method", o->method, ExtensionMethodsSynopsis() + " (defaults from the training length and ctx)")
      ->capture_default_str();
  ppl->add_option("--max-windows", o->max_windows, "Evaluate at most this many windows (0: all)");
  ppl->add_option("--threads", o->threads, "Threads (default: all)")->check(IntegerAtLeast(0));
  ppl->add_flag("--json", o->json, "Print one JSON object");
  ppl->callback([o] { Run(*o); });
}

}  // namespace posenc::cli
