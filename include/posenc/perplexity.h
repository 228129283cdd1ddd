// Perplexity of a model over a token stream, in windows of `context` tokens.
//
// Windows start every `stride` tokens (stride = context: non-overlapping,
// the default). Each window is one forward pass from position 0 (or one
// decode step a token: PerplexityPass); it scores
// the tokens that no earlier window scored (all but its first token for the
// first window and for non-overlapping windows; the last `stride` tokens of
// a sliding window), and computes the logits of those rows only (llama.cpp's
// llama-perplexity likewise computes its scored second half's). Only whole
// windows are evaluated.
//   ppl = exp(mean over scored tokens of -ln p(token | the window before it))
//
// A model whose tokenizer starts every text with BOS (Gemma:
// BpeTokenizer::add_bos) is scored as it was trained: with `bos` set, each
// window is BOS followed by context - 1 tokens of the text, and BOS's own
// prediction of the first of them is scored too (a window of the text then
// starts every stride <= context - 1 text tokens). Without BOS, Gemma 3 270M's
// perplexity at 512 tokens more than doubles.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "posenc/context_extension.h"
#include "posenc/decoder_model.h"

namespace posenc {

// How a window runs through the model.
enum class PerplexityPass {
  kPrefill,  // one forward pass (DecoderModel::NextTokenNll)
  // token by token through a DecoderCache, as generation runs: what the decode
  // kernels and DotActivations::kInt8 change is what is scored (one step per
  // token: slow for long windows)
  kDecode,
};

struct PerplexityOptions {
  std::int64_t context = 512;
  std::int64_t stride = 0;  // 0: context
  ContextExtension extension;
  // How many windows at most (0: every whole window of the text).
  std::int64_t max_windows = 0;
  PerplexityPass pass = PerplexityPass::kPrefill;
  // kAsWritten (the decode pass only): each step plans the method again for
  // the window's tokens so far (length i + 1 at window position i) and the
  // cache keeps every key as that step rotated it (CachedKeys), as Hugging
  // Face's generation runs a dynamic method (dynamic NTK's inv_freq
  // recomputed every step, the cached keys left as they were). The default
  // plans once for the window's length.
  CachedKeys cached_keys = CachedKeys::kRelowered;
  // The model's BOS, put at position 0 of every window; none: windows are
  // the text's tokens alone.
  std::optional<std::int32_t> bos;
};

struct PerplexityResult {
  double ppl = 0;
  double mean_nll = 0;         // natural log
  std::int64_t scored = 0;     // tokens scored
  std::int64_t processed = 0;  // tokens run through the model
  std::int64_t windows = 0;
  double seconds = 0;
  double tokens_per_s = 0;  // processed / seconds
  ContextExtension method;  // with every default filled in
  // [context - 1]: entry i is the mean of -ln p(token i + 1 | tokens 0..i of
  // the window) over the windows that scored window position i + 1: the loss
  // against position in the window, which shows where a method breaks past
  // the training length. Every window scores every position when stride =
  // context; with a sliding window, the positions before its last `stride`
  // are the first window's alone (their logits are computed in no other).
  std::vector<double> position_nll;
};

// Called as the work advances (after each layer of each window): tokens
// processed so far (a window counts in proportion to its layers done), and
// tokens to process in all.
using PerplexityProgress = std::function<void(std::int64_t done, std::int64_t total)>;

// How many windows EvaluatePerplexity runs over `tokens` tokens: every whole
// window, at most max_windows; 0 when the text is shorter than one window.
std::int64_t PerplexityWindowCount(std::int64_t tokens, const PerplexityOptions& options);

// The first row of window `window` whose logits EvaluatePerplexity computes
// and scores (row i predicts window token i + 1): 0 for the first window and
// for non-overlapping ones, context - stride - 1 for a later sliding one. The
// window computes the logits of rows [first, context - 1).
std::int64_t PerplexityFirstScoredRow(std::int64_t window, const PerplexityOptions& options);

// Throws posenc::Error for cached_keys = kAsWritten without the decode pass,
// context < 2, stride outside [1, context], a text
// shorter than one window (naming the token count), values a forward pass
// refuses (DecoderModel::Forward: NaN or infinite activations, logits past
// 2^16; naming the position, the window and where it starts in the text), or
// a perplexity too large for a double (a mean loss past 709 nats).
PerplexityResult EvaluatePerplexity(const DecoderModel& model, std::span<const std::int32_t> tokens,
                                    const PerplexityOptions& options, const PerplexityProgress& progress = {});

}  // namespace posenc
