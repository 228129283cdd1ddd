// Windowed perplexity (the windowing is described in include/posenc/perplexity.h).
#include "posenc/perplexity.h"

#include <chrono>
#include <cmath>
#include <string>

#include "model/model_ops.h"
#include "posenc/error.h"

namespace posenc {
namespace {
constexpr const char* kOp = "perplexity";

// NextTokenNll(window, first)'s values computed token by token through a
// cache: step i feeds window[i] and, from step `first` on, scores
// window[i + 1] (the steps before compute no logits), under `plan`'s
// attention, or (CachedKeys::kAsWritten) under the method planned for i + 1
// tokens, the cache keeping its keys as written. progress(done, total)
// counts steps.
std::vector<double> DecodedNextTokenNll(const DecoderModel& model, std::span<const std::int32_t> window,
                                        std::int64_t first, const PerplexityOptions& options, const ExtensionPlan& plan,
                                        const LayerProgress& progress) {
  const auto n = static_cast<std::int64_t>(window.size());
  const std::int64_t vocab = model.hparams().vocab_size;
  std::vector<double> nll(static_cast<std::size_t>(n - 1 - first));
  const bool each_step = options.cached_keys == CachedKeys::kAsWritten;
  DecoderCache cache = model.NewCache(options.cached_keys);
  const std::int64_t row = 0;
  for (std::int64_t i = 0; i + 1 < n; ++i) {
    const bool scored = i >= first;
    const AttentionOptions attention =
        each_step ? PlanModelExtension(options.extension, model.hparams(), i + 1).attention : plan.attention;
    model.Extend(cache, window.subspan(i, 1), attention, scored ? std::span(&row, 1) : std::span<const std::int64_t>{},
                 [&](std::span<const std::int64_t>, std::span<const float> logits) {
                   const std::int32_t target = window[i + 1];
                   model::NegativeLogLikelihood(logits, vocab, std::span(&target, 1), std::span(&nll[i - first], 1));
                 });
    if (progress) progress(i + 1, n - 1);
  }
  return nll;
}
// The text's tokens in a window: all of it, or all but BOS.
std::int64_t TextTokensPerWindow(const PerplexityOptions& options) {
  return options.bos ? options.context - 1 : options.context;
}

}  // namespace

std::int64_t PerplexityWindowCount(std::int64_t tokens, const PerplexityOptions& options) {
  const std::int64_t text = TextTokensPerWindow(options);
  const std::int64_t stride = options.stride == 0 ? text : options.stride;
  if (text < 1 || stride < 1 || tokens < text) return 0;
  const std::int64_t windows = (tokens - text) / stride + 1;
  return options.max_windows > 0 ? std::min(windows, options.max_windows) : windows;
}

std::int64_t PerplexityFirstScoredRow(std::int64_t window, const PerplexityOptions& options) {
  const std::int64_t text = TextTokensPerWindow(options);
  const std::int64_t stride = options.stride == 0 ? text : options.stride;
  return window == 0 || stride == text ? 0 : options.context - stride - 1;
}

PerplexityResult EvaluatePerplexity(const DecoderModel& model, std::span<const std::int32_t> tokens,
                                    const PerplexityOptions& options, const PerplexityProgress& progress) {
  const std::int64_t ctx = options.context, text = TextTokensPerWindow(options);
  const std::int64_t stride = options.stride == 0 ? text : options.stride;
  const auto n = static_cast<std::int64_t>(tokens.size());
  Require(ctx >= 2, kOp, "context", ctx, "must be >= 2 (a window predicts its tokens after the first)");
  Require(options.cached_keys == CachedKeys::kRelowered || options.pass == PerplexityPass::kDecode, kOp, "cached_keys",
          Verbatim{"as-written"},
          "needs the decode pass (a forward pass has no cache: every key is rotated as the window's method rotates "
          "it)");
  Require(stride >= 1 && stride <= text, kOp, "stride", stride,
          "must be in [1, " + std::string(options.bos ? "context - 1 = " : "context = ") + std::to_string(text) +
              "] (the text's tokens in a window" + (options.bos ? ", after BOS)" : ")"));
  model.RequireActivationsFit(ctx);
  Require(options.max_windows >= 0, kOp, "max_windows", options.max_windows, "must be >= 0 (0: all)");
  Require(n >= text, kOp, "tokens", n,
          "the text must have at least one window of " +
              (options.bos ? "context - 1 = " + std::to_string(text) + " tokens after BOS"
                           : "context = " + std::to_string(text) + " tokens"));
  const std::int64_t windows = PerplexityWindowCount(n, options);

  const DecoderHyperparams& hp = model.hparams();
  const ExtensionPlan plan = PlanModelExtension(options.extension, hp, ctx);

  const auto start = std::chrono::steady_clock::now();
  double nll_sum = 0;
  std::int64_t scored = 0;
  // Per window position: the sum of its scored losses, and how many windows scored it.
  std::vector<double> position_sum(static_cast<std::size_t>(ctx - 1), 0.0);
  std::vector<std::int64_t> position_windows(static_cast<std::size_t>(ctx - 1), 0);
  std::vector<std::int32_t> with_bos;
  for (std::int64_t w = 0; w < windows; ++w) {
    std::span<const std::int32_t> window = tokens.subspan(w * stride, text);
    if (options.bos) {
      with_bos.assign(1, *options.bos);
      with_bos.insert(with_bos.end(), window.begin(), window.end());
      window = with_bos;
    }
    const LayerProgress window_progress = [&](std::int64_t done, std::int64_t total) {
      if (progress) progress(w * ctx + ctx * done / total, windows * ctx);
    };
    // The model refuses a NaN, an infinity or a logit past what a
    // log-softmax resolves (decoder_model.h), naming the position in the window;
    // the window and where it starts in the text are added here. Every nll
    // is then finite.
    // nll[i - first] scores window token i + 1. A sliding window scores only
    // its last `stride` tokens (the earlier ones were scored before), and
    // computes no other row's logits.
    const std::int64_t first = PerplexityFirstScoredRow(w, options);
    std::vector<double> nll;
    try {
      nll = options.pass == PerplexityPass::kDecode
                ? DecodedNextTokenNll(model, window, first, options, plan, window_progress)
                : model.NextTokenNll(window, first, plan.attention, window_progress);
    } catch (const Error& e) {
      throw Error(std::string(e.what()) + " (window " + std::to_string(w) + ", from token " +
                  std::to_string(w * stride) + " of the text" + (options.bos ? ", after BOS)" : ")"));
    }
    for (std::int64_t i = first; i < ctx - 1; ++i) {
      nll_sum += nll[i - first];
      position_sum[static_cast<std::size_t>(i)] += nll[i - first];
      ++position_windows[static_cast<std::size_t>(i)];
    }
    scored += ctx - 1 - first;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  PerplexityResult result;
  result.mean_nll = nll_sum / static_cast<double>(scored);
  result.ppl = std::exp(result.mean_nll);
  // Past about 709 nats a token, exp overflows: "ppl inf" would read as a
  // measurement.
  Require(std::isfinite(result.ppl), kOp, "ppl", result.ppl,
          "must be finite: the mean loss, " + FormatValue(result.mean_nll) +
              " nats a token, is past what a perplexity can express (exp overflows past 709 nats; chance is "
              "ln vocab_size): a corrupt or diverged model");
  result.scored = scored;
  result.processed = windows * ctx;
  result.windows = windows;
  result.seconds = seconds;
  result.tokens_per_s = seconds > 0 ? static_cast<double>(result.processed) / seconds : 0;
  result.method = plan.resolved;
  for (std::size_t i = 0; i < position_sum.size(); ++i) {
    position_sum[i] /= static_cast<double>(position_windows[i]);
  }
  result.position_nll = std::move(position_sum);
  return result;
}

}  // namespace posenc
