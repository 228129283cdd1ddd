// posenc ppl [--model FILE.gguf] [--text FILE] --ctx N [--stride S]
//            [--method NAME[:k=v,...]] [--max-windows W] [--decode [--keys-as-written]]
//            [--weights stored|f32] [--activations f32|int8] [--threads T] [--json]
//
// Perplexity of a GGUF model (Llama family or Gemma 3) over a text in windows of N tokens
// (include/posenc/perplexity.h), under one context-extension method
// (include/posenc/context_extension.h) whose defaults follow the model's
// training length and N.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "options/model_inputs.h"
#include "options/integer_options.h"
#include "options/pass_options.h"
#include "posenc/parallel.h"
#include "posenc/perplexity.h"
#include "options/progress_bar.h"
#include "options/run_estimate.h"

namespace posenc::cli {
namespace {

struct PplOptions {
  std::string model{kDefaultModel.path};
  WeightOptions weights;
  // study's text, so that the documented first command
  // (`posenc ppl --ctx 2048 --max-windows 4 --method yarn`) needs no --text.
  std::string text{kDefaultStudyText.path};
  std::int64_t ctx = 0;
  std::int64_t stride = 0;
  std::string method = "none";
  std::int64_t max_windows = 0;
  PassOptions pass;
  int threads = 0;
  bool json = false;
};

// Before the work starts (stderr): how many windows and tokens will be run,
// an estimate of the time, and a method that is the model's own RoPE at
// this length said as such (its defaults give factor 1 within the training
// length), so that a long run or a no-op method is no surprise.
void AnnounceWork(const DecoderModel& model, std::int64_t text_tokens, const PerplexityOptions& options) {
  const std::int64_t windows = PerplexityWindowCount(text_tokens, options);
  if (windows == 0) return;  // EvaluatePerplexity says why
  const DecoderHyperparams& hp = model.hparams();
  const ExtensionPlan plan = PlanModelExtension(options.extension, hp, options.context);
  const std::string method = FormatContextExtension(plan.resolved);
  if (!std::holds_alternative<NoneMethod>(plan.resolved.method) && SameAsModelRope(plan, hp.rope, options.context)) {
    std::fprintf(stderr,
                 "ppl: %s at ctx %lld is exactly the model's own RoPE, the same as --method none (trained on %lld "
                 "tokens)\n",
                 method.c_str(), static_cast<long long>(options.context), static_cast<long long>(hp.context_length));
  }
  // A sliding window computes the logits of the rows it scores only.
  double flops = 0;
  for (const std::int64_t w : {std::int64_t{0}, std::int64_t{1}}) {
    if (w >= windows) break;
    const double count = w == 0 ? 1.0 : static_cast<double>(windows - 1);
    flops += count * model.ForwardFlops(options.context, options.context - 1 - PerplexityFirstScoredRow(w, options));
  }
  const RunEstimate estimate = EstimateRun(flops);
  const std::int64_t scored = windows * options.context;
  std::fprintf(stderr, "ppl: %lld window(s) of %lld tokens (%lld of the text's %lld tokens), %s%s\n",
               static_cast<long long>(windows), static_cast<long long>(options.context), static_cast<long long>(scored),
               static_cast<long long>(text_tokens), DescribeRunEstimate(estimate).c_str(),
               options.max_windows == 0 ? "; --max-windows N runs fewer" : "");
}

void Run(const PplOptions& o) {
  if (o.threads > 0) SetNumThreads(o.threads);
  PerplexityOptions options;
  options.context = o.ctx;
  options.stride = o.stride;
  options.extension = ParseContextExtension(o.method);  // bad methods fail before the model loads
  options.max_windows = o.max_windows;
  options.pass = o.pass.pass();
  options.cached_keys = o.pass.cached_keys();

  const LoadedModel loaded = LoadModel(o.model, o.weights);
  // A model trained with BOS first (Gemma) has it at the start of every window.
  if (loaded.tokenizer.add_bos()) options.bos = loaded.tokenizer.bos_id();
  const std::vector<std::int32_t> tokens = TokenizeFile(loaded.tokenizer, o.text);
  AnnounceWork(loaded.model, static_cast<std::int64_t>(tokens.size()), options);
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
                               {"stride", o.stride == 0 ? o.ctx - (options.bos ? 1 : 0) : o.stride},
                               {"bos", options.bos.has_value()},
                               {"method", method},
                               {"pass", o.pass.pass_name()},
                               {"weights", o.weights.storage == WeightStorage::kFloat32 ? "f32" : "stored"},
                               {"activations", o.weights.activations == DotActivations::kInt8 ? "int8" : "f32"},
                               {"cached_keys", o.pass.keys_name()},
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
  AddModelOption(*ppl, o->model);
  AddWeightOptions(*ppl, o->weights);
  ppl->add_option("--text", o->text, "UTF-8 text file (scripts/fetch-texts)")->capture_default_str();
  ppl->add_option("--ctx", o->ctx, "Tokens per window")->required();
  ppl->add_option("--stride", o->stride, "Tokens between window starts, 1..ctx (default: ctx, non-overlapping)")
      ->check(IntegerAtLeast(1));
  ppl->add_option("--method", o->method, ExtensionMethodsSynopsis() + " (defaults from the training length and ctx)")
      ->capture_default_str();
  ppl->add_option("--max-windows", o->max_windows, "Evaluate at most this many windows (0: all)");
  AddPassOptions(*ppl, o->pass);
  ppl->add_option("--threads", o->threads, "Threads (default: all)")->check(IntegerAtLeast(0));
  ppl->add_flag("--json", o->json, "Print one JSON object");
  ppl->callback([o] {
    o->model = ResolveInput("ppl", "--model", o->model, kDefaultModel);
    o->text = ResolveInput("ppl", "--text", o->text, kDefaultStudyText);
    Run(*o);
  });
}

}  // namespace posenc::cli
