// Evaluating the tiny byte-level model (tiny_lm.h) on a held-out text at
// any length, the training length or far past it ("test long"), and the
// byte-unigram floor a model must beat to have learned anything.
//
// An evaluation runs windows of T + 1 bytes of the text (T inputs, each
// predicting the byte after it) and scores some of their predictions:
// every one for evenly spaced windows that never overlap (posenc eval:
// byte t of a window sees the t bytes before it in the window), or, for
// sliding windows (posenc zoo), only the predictions no earlier window
// made, so that every predicted byte of the text is scored once with close
// to T bytes of context. Cross-entropy in natural log. Deterministic: the
// same windows and batches on every machine and thread count.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numbers>
#include <optional>
#include <span>
#include <vector>

#include "posenc/context_extension.h"
#include "posenc/tiny_lm.h"

namespace posenc {

// Windows of a text: window w reads text[offsets[w] .. offsets[w] + length]
// and scores its predictions at positions first_scored[w] .. length - 1
// (position t predicts text[offsets[w] + t + 1] from the t + 1 bytes
// text[offsets[w] .. offsets[w] + t]).
struct TinyLmWindows {
  std::int64_t length = 0;
  std::vector<std::int64_t> offsets;
  std::vector<std::int64_t> first_scored;
};

struct TinyLmEvalResult {
  std::int64_t length = 0;
  std::int64_t windows = 0;           // evaluated (at most the number asked for)
  double loss = 0.0;                  // mean nats per byte over the scored predictions
  std::vector<double> position_loss;  // [length]: position t's mean over every window, scored or not
  // Each scored prediction's loss, window by window (for sliding windows,
  // the text's order), and the position it was made at (context: position
  // + 1 bytes).
  std::vector<double> scored_loss;
  std::vector<std::int64_t> scored_position;
  double seconds = 0.0;
  double tokens_per_s = 0.0;  // positions run (windows * length), scored or not, a second

  double BitsPerByte() const { return loss / std::numbers::ln2; }
  double Perplexity() const { return std::exp(loss); }
};

// The start of each window: count = min(windows, text_bytes / (length + 1))
// windows, window w at w * floor(text_bytes / count). Throws posenc::Error
// for length < 1, windows < 1, and a text shorter than one window.
std::vector<std::int64_t> TinyLmEvalOffsets(std::int64_t text_bytes, std::int64_t length, std::int64_t windows);

// Sliding windows that score text[1..predicted_bytes], each byte once, in
// the text's order: window 0 at offset 0 scores all its positions (byte i
// <= length sees the i bytes the text has before it); each next window
// starts `stride` bytes later (the last one at predicted_bytes - length,
// so that no window reads past the scored bytes) and scores only the bytes
// after the previous window's last, at positions >= length - stride. Every
// scored byte i therefore sees min(i, at least length - stride + 1) bytes
// of context, at most length, and the scored bytes depend only on
// predicted_bytes: every length scores the same bytes, whatever other
// lengths are evaluated, and the only thing that changes with the length
// is how far back the model may look (posenc zoo). The cost is about
// length / stride forward passes over each byte: stride = length / 2 runs
// each byte twice and gives every byte at least half the length.
// Throws posenc::Error unless 1 <= stride < length, length <= predicted_bytes
// and the text holds predicted_bytes + 1 bytes.
TinyLmWindows TinyLmSlidingWindows(std::int64_t text_bytes, std::int64_t length, std::int64_t stride,
                                   std::int64_t predicted_bytes);

// The loss of `params` over `windows` evenly spaced windows of `text` at
// `length`, every prediction scored (TinyLmLoss without gradients, several
// windows a call). A length past a learned
// model's table needs config.learned_past_table = kHierarchical (else the
// error names the position and the table). `progress(done, total)` (may be
// empty) counts windows.
//
// `method`: a training-free context-extension method (context_extension.h),
// planned for L_train = config.train_length and L = length; every layer's
// attention then runs through posenc::Attention under the plan (the same
// kernel and options as the real-model study). RoPE models only; "none"
// (without logn) is the model as trained and any scheme takes it. Throws
// posenc::Error naming the method for another scheme, and for a loss that
// is not finite (NaN or infinite weights or activations), naming the
// position and the windows, as EvaluatePerplexity does.
TinyLmEvalResult EvaluateTinyLm(const TinyLmConfig& config, const TinyLmParams& params,
                                std::span<const std::uint8_t> text, std::int64_t length, std::int64_t windows,
                                const std::optional<ContextExtension>& method = std::nullopt,
                                const std::function<void(std::int64_t done, std::int64_t total)>& progress = {});
// The same over `windows` (TinyLmSlidingWindows, or any): each must hold
// length + 1 bytes of the text and score a position in [0, length).
TinyLmEvalResult EvaluateTinyLmAt(const TinyLmConfig& config, const TinyLmParams& params,
                                  std::span<const std::uint8_t> text, const TinyLmWindows& windows,
                                  const std::optional<ContextExtension>& method = std::nullopt,
                                  const std::function<void(std::int64_t done, std::int64_t total)>& progress = {});

// The plan EvaluateTinyLm runs for `method` at `length` (its `resolved`
// form names every default). Throws posenc::Error naming the method unless
// the model is RoPE, and the planner's errors (context_extension.h).
ExtensionPlan PlanTinyLmExtension(const TinyLmConfig& config, const ContextExtension& method, std::int64_t length);

// The mean of `position_loss` over runs of `width` positions side by side,
// the last one shorter where width does not divide the length: run i
// covers [i width, min(length, (i + 1) width)). The per-position curves of
// posenc eval and posenc zoo. Throws posenc::Error for width < 1.
std::vector<double> BucketPositionLoss(std::span<const double> position_loss, std::int64_t width);

// How often each byte value occurs.
using ByteCounts = std::array<std::int64_t, 256>;
ByteCounts CountBytes(std::span<const std::uint8_t> text);

// The byte-unigram baseline: the mean cross-entropy (nats per byte) of
// `text` under the byte frequencies `counts` (of a training corpus), with
// add-one smoothing so that a byte the corpus never had costs
// log(total + 256), not infinity:
//   p(b) = (counts[b] + 1) / (sum counts + 256),  loss = -mean log p(text[i]).
// A model that learned nothing about context cannot beat it. Throws
// posenc::Error for an empty text or a negative count.
double ByteUnigramLoss(const ByteCounts& counts, std::span<const std::uint8_t> text);

}  // namespace posenc
