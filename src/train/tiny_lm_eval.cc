// Evaluation of the tiny model over windows of a text, and the byte-unigram
// baseline (include/posenc/tiny_lm_eval.h).
#include "posenc/tiny_lm_eval.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "posenc/error.h"
#include "train/tiny_lm_internal.h"

namespace posenc {
namespace {

constexpr const char* kOp = "eval";

// Predictions per TinyLmLoss call: enough rows to keep every thread busy,
// few enough that the logits (256 floats a byte) stay small (8 MiB).
constexpr std::int64_t kBatchTokens = 8192;

}  // namespace

std::vector<std::int64_t> TinyLmEvalOffsets(std::int64_t text_bytes, std::int64_t length, std::int64_t windows) {
  Require(length >= 1, kOp, "length", length, "must be >= 1");
  Require(windows >= 1, kOp, "windows", windows, "must be >= 1");
  Require(text_bytes > length, kOp, "text", Verbatim{std::to_string(text_bytes) + " bytes"},
          "must hold at least one window of length + 1 = " + std::to_string(length + 1) +
              " bytes (inputs and the next byte as target)");
  const std::int64_t count = std::min(windows, text_bytes / (length + 1));
  const std::int64_t stride = text_bytes / count;  // >= length + 1: windows never overlap
  std::vector<std::int64_t> offsets(static_cast<std::size_t>(count));
  for (std::int64_t w = 0; w < count; ++w) offsets[w] = w * stride;
  return offsets;
}

TinyLmWindows TinyLmSlidingWindows(std::int64_t text_bytes, std::int64_t length, std::int64_t stride,
                                   std::int64_t predicted_bytes) {
  Require(length >= 2, kOp, "length", length,
          "must be >= 2 (sliding windows overlap by length - stride >= 1 bytes of context)");
  Require(stride >= 1 && stride < length, kOp, "stride", stride,
          "must be in [1, length - 1 = " + std::to_string(length - 1) +
              "] (windows that overlap: a stride of the length would leave the first bytes of each window without "
              "context)");
  Require(predicted_bytes >= length, kOp, "predicted_bytes", predicted_bytes,
          "must be >= length = " + std::to_string(length) + " (the first window predicts bytes 1..length)");
  Require(text_bytes > predicted_bytes, kOp, "text", Verbatim{std::to_string(text_bytes) + " bytes"},
          "must hold predicted_bytes + 1 = " + std::to_string(static_cast<std::uint64_t>(predicted_bytes) + 1) +
              " bytes (byte 0 is context only)");
  TinyLmWindows windows{.length = length, .offsets = {0}, .first_scored = {0}};
  // The last byte scored so far; window w at offset o predicts bytes o + 1 .. o + length.
  std::int64_t scored_to = length;
  while (scored_to < predicted_bytes) {
    const std::int64_t offset = std::min(windows.offsets.back() + stride, predicted_bytes - length);
    windows.offsets.push_back(offset);
    windows.first_scored.push_back(scored_to - offset);
    scored_to = offset + length;
  }
  return windows;
}

ExtensionPlan PlanTinyLmExtension(const TinyLmConfig& config, const ContextExtension& method, std::int64_t length) {
  Require(PositionSchemeCapabilities(config.scheme).context_extension, kOp, "method", FormatContextExtension(method),
          "applies to RoPE models only; this model's scheme is " + std::string(PositionSchemeName(config.scheme)) +
              " (evaluate it as trained: no method, or none)");
  return PlanContextExtension(method, TinyLmRopeSpec(config), config.train_length, length);
}

TinyLmEvalResult EvaluateTinyLm(const TinyLmConfig& config, const TinyLmParams& params,
                                std::span<const std::uint8_t> text, std::int64_t length, std::int64_t windows,
                                const std::optional<ContextExtension>& method,
                                const std::function<void(std::int64_t done, std::int64_t total)>& progress) {
  ValidateTinyLmParams(config, params);
  if (method && !IsModelAsTrained(*method)) PlanTinyLmExtension(config, *method, length);  // its errors first
  TinyLmWindows every{.length = length,
                      .offsets = TinyLmEvalOffsets(static_cast<std::int64_t>(text.size()), length, windows)};
  every.first_scored.assign(every.offsets.size(), 0);
  return EvaluateTinyLmAt(config, params, text, every, method, progress);
}

TinyLmEvalResult EvaluateTinyLmAt(const TinyLmConfig& config, const TinyLmParams& params,
                                  std::span<const std::uint8_t> text, const TinyLmWindows& windows,
                                  const std::optional<ContextExtension>& method,
                                  const std::function<void(std::int64_t done, std::int64_t total)>& progress) {
  ValidateTinyLmParams(config, params);
  const std::int64_t length = windows.length;
  // The plan, before any work: its errors name the method's parameters.
  std::optional<ExtensionPlan> plan;
  if (method && !IsModelAsTrained(*method)) plan = PlanTinyLmExtension(config, *method, length);
  Require(length >= 1, kOp, "length", length, "must be >= 1");
  Require(!windows.offsets.empty(), kOp, "offsets", Verbatim{"[]"}, "must name at least one window");
  Require(windows.first_scored.size() == windows.offsets.size(), kOp, "first_scored",
          Verbatim{std::to_string(windows.first_scored.size()) + " entries"},
          "must have one entry a window (" + std::to_string(windows.offsets.size()) + ")");
  for (std::size_t w = 0; w < windows.offsets.size(); ++w) {
    Require(windows.offsets[w] >= 0 && windows.offsets[w] < static_cast<std::int64_t>(text.size()) - length, kOp,
            "offsets[" + std::to_string(w) + "]", windows.offsets[w],
            "must leave a window of length + 1 = " + std::to_string(static_cast<std::uint64_t>(length) + 1) +
                " bytes in the text of " + std::to_string(text.size()) + " bytes");
    Require(windows.first_scored[w] >= 0 && windows.first_scored[w] < length, kOp,
            "first_scored[" + std::to_string(w) + "]", windows.first_scored[w],
            "must be a position in [0, length - 1 = " + std::to_string(length - 1) + "]");
  }
  const auto start = std::chrono::steady_clock::now();
  const auto count = static_cast<std::int64_t>(windows.offsets.size());
  const std::int64_t per_call = std::clamp<std::int64_t>(kBatchTokens / length, 1, count);

  TinyLmEvalResult result;
  result.length = length;
  result.windows = count;
  result.position_loss.assign(static_cast<std::size_t>(length), 0.0);
  tiny_lm::KernelAttention kernel;  // every layer under the method's options, or the model's own attention
  if (plan) kernel = [&](std::int64_t /*layer*/) { return plan->attention; };
  std::vector<std::uint8_t> rows;
  for (std::int64_t first = 0; first < count; first += per_call) {
    const std::int64_t batch = std::min(per_call, count - first);
    rows.clear();
    for (std::int64_t w = first; w < first + batch; ++w) {
      const auto begin = text.begin() + windows.offsets[w];
      rows.insert(rows.end(), begin, begin + length + 1);
    }
    TinyLmLossResult loss;
    try {
      loss = tiny_lm::Loss(config, params, rows, batch, length, nullptr, kernel, {},
                           tiny_lm::EvaluationPositions(config, length, first));
    } catch (const Error& e) {
      throw Error(std::string(e.what()) + " (windows " + std::to_string(first) + ".." +
                  std::to_string(first + batch - 1) + ")");
    }
    // Loss refuses NaN and logits past what a log-softmax resolves (the
    // engine's rule, logit_range.h): every loss here is finite.
    for (std::int64_t t = 0; t < length; ++t) {
      result.position_loss[t] += loss.position_loss[t] * static_cast<double>(batch);
    }
    for (std::int64_t b = 0; b < batch; ++b) {
      for (std::int64_t t = windows.first_scored[first + b]; t < length; ++t) {
        result.scored_loss.push_back(loss.token_loss[b * length + t]);
        result.scored_position.push_back(t);
      }
    }
    if (progress) progress(first + batch, count);
  }
  for (double& loss : result.position_loss) loss /= static_cast<double>(count);
  for (const double loss : result.scored_loss) result.loss += loss;
  result.loss /= static_cast<double>(result.scored_loss.size());
  // The engine's rule (perplexity.cc): "ppl inf" would read as a measurement.
  Require(std::isfinite(result.Perplexity()), kOp, "ppl", result.Perplexity(),
          "must be finite: the mean loss, " + FormatValue(result.loss) +
              " nats a byte, is past what a perplexity can express (exp overflows past 709 nats; chance is ln 256): "
              "a corrupt or diverged model");
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.tokens_per_s = result.seconds > 0 ? static_cast<double>(count * length) / result.seconds : 0.0;
  return result;
}

std::vector<double> BucketPositionLoss(std::span<const double> position_loss, std::int64_t width) {
  Require(width >= 1, kOp, "width", width, "must be >= 1 (positions a bucket)");
  const auto length = static_cast<std::int64_t>(position_loss.size());
  std::vector<double> buckets;
  for (std::int64_t start = 0; start < length; start += width) {
    const std::int64_t end = std::min(length, start + width);
    double sum = 0.0;
    for (std::int64_t t = start; t < end; ++t) sum += position_loss[t];
    buckets.push_back(sum / static_cast<double>(end - start));
  }
  return buckets;
}

ByteCounts CountBytes(std::span<const std::uint8_t> text) {
  ByteCounts counts{};
  for (const std::uint8_t b : text) ++counts[b];
  return counts;
}

double ByteUnigramLoss(const ByteCounts& counts, std::span<const std::uint8_t> text) {
  Require(!text.empty(), kOp, "text", Verbatim{"0 bytes"}, "must not be empty");
  double total = 256.0;  // add-one smoothing
  for (std::size_t b = 0; b < counts.size(); ++b) {
    Require(counts[b] >= 0, kOp, "counts[" + std::to_string(b) + "]", counts[b], "must be >= 0");
    total += static_cast<double>(counts[b]);
  }
  // Sum over byte values (256 logs), not over the text.
  const ByteCounts in_text = CountBytes(text);
  double nll = 0.0;
  for (std::size_t b = 0; b < counts.size(); ++b) {
    if (in_text[b] == 0) continue;
    nll -= static_cast<double>(in_text[b]) * std::log((static_cast<double>(counts[b]) + 1.0) / total);
  }
  return nll / static_cast<double>(text.size());
}

}  // namespace posenc
