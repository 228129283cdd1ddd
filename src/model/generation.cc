// Greedy decoding over the Llama model's cache (include/posenc/generation.h).
#include "posenc/generation.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

#include "kernels/logit_range.h"
#include "posenc/error.h"
#include "posenc/input_file.h"

namespace posenc {
namespace {

constexpr const char* kOp = "generate";

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The cache a run to max_tokens grows to (every generated token but the last
// is appended after `held` tokens) must fit this machine, checked before any
// work: --max-tokens 10^12 was accepted and ran until memory ran out.
void RequireCacheFits(const DecoderModel& model, std::int64_t held, std::int64_t max_tokens) {
  const double tokens = static_cast<double>(held) + static_cast<double>(max_tokens) - 1;  // no int64 overflow
  char count[32];
  std::snprintf(count, sizeof count, "%.0f", tokens);
  // CacheBytes is linear in the tokens.
  RequireFitsInMemory(kOp, "max_tokens", max_tokens, std::string("the key/value cache of ") + count + " tokens",
                      tokens * model.CacheBytes(1) / sizeof(float), sizeof(float));
}

}  // namespace

double GenerateResult::PrefillTokensPerSecond() const {
  return prefill_seconds > 0 ? static_cast<double>(prompt_tokens) / prefill_seconds : 0;
}

double GenerateResult::DecodeTokensPerSecond() const {
  return decode_seconds > 0 ? static_cast<double>(decode_passes) / decode_seconds : 0;
}

std::int32_t Argmax(std::span<const float> logits) {
  Require(!logits.empty(), kOp, "logits.size()", 0, "must be >= 1");
  // Two passes that the compiler turns into vector code: the largest number
  // in kLanes independent lanes (a NaN compares false, so it never wins),
  // then the first index holding it. A decode step picks its token from
  // 49,152 logits; the one branchy pass over them was 3% of a step.
  constexpr std::size_t kLanes = 16;
  constexpr float kLowest = -std::numeric_limits<float>::infinity();
  const std::size_t n = logits.size();
  std::array<float, kLanes> lanes;
  lanes.fill(kLowest);
  std::size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (std::size_t l = 0; l < kLanes; ++l) lanes[l] = logits[i + l] > lanes[l] ? logits[i + l] : lanes[l];
  }
  float top = kLowest;
  for (const float lane : lanes) top = lane > top ? lane : top;
  for (; i < n; ++i) top = logits[i] > top ? logits[i] : top;
  // -0 and +0 are equal here, so the first of them is found whichever won.
  const auto at = std::find(logits.begin(), logits.end(), top);
  return at == logits.end() ? 0 : static_cast<std::int32_t>(at - logits.begin());  // the end: every logit NaN
}

std::vector<float> Prefill(const DecoderModel& model, DecoderCache& cache, std::span<const std::int32_t> prompt,
                           const AttentionOptions& attention, const LayerProgress& progress) {
  Require(!prompt.empty(), kOp, "prompt.size()", 0, "must be >= 1 token");
  std::vector<float> last;
  const std::int64_t row = static_cast<std::int64_t>(prompt.size()) - 1;
  model.Extend(
      cache, prompt, attention, std::span(&row, 1),
      [&](std::span<const std::int64_t>, std::span<const float> logits) { last.assign(logits.begin(), logits.end()); },
      progress);
  return last;
}

GenerateResult DecodeGreedy(const DecoderModel& model, DecoderCache& cache, std::span<const float> next_logits,
                            const AttentionOptions& attention, const GenerateOptions& options,
                            const TokenCallback& on_token) {
  Require(options.max_tokens >= 1, kOp, "max_tokens", options.max_tokens, "must be >= 1");
  Require(static_cast<std::int64_t>(next_logits.size()) == model.hparams().vocab_size, kOp, "next_logits.size()",
          next_logits.size(), "must equal vocab_size = " + std::to_string(model.hparams().vocab_size));
  // The model checks the logits of every step it runs (DecoderModel::Forward);
  // these come from the caller. A NaN one is never chosen by Argmax, so all
  // NaN would decode token 0 forever.
  const auto vocab = static_cast<std::int64_t>(next_logits.size());
  if (const std::int64_t j = detail::FirstOutOfRange(next_logits.data(), vocab, detail::kLogitLimit); j < vocab) {
    ThrowError(kOp, "next_logits[" + std::to_string(j) + "]", FormatValue(next_logits[j]), detail::LogitRangeRule());
  }
  RequireCacheFits(model, cache.tokens(), options.max_tokens);
  GenerateResult result;
  std::vector<float> logits(next_logits.begin(), next_logits.end());
  const std::int64_t row = 0;
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    const std::int32_t token = Argmax(logits);
    result.tokens.push_back(token);
    if (on_token) on_token(token);
    const bool stop =
        std::find(options.stop_tokens.begin(), options.stop_tokens.end(), token) != options.stop_tokens.end();
    if (stop || static_cast<std::int64_t>(result.tokens.size()) == options.max_tokens) break;
    model.Extend(cache, std::span(&token, 1), attention, std::span(&row, 1),
                 [&](std::span<const std::int64_t>, std::span<const float> step) {
                   std::copy(step.begin(), step.end(), logits.begin());
                 });
    ++result.decode_passes;
  }
  result.decode_seconds = SecondsSince(start);
  return result;
}

GenerateResult Generate(const DecoderModel& model, std::span<const std::int32_t> prompt,
                        const AttentionOptions& attention, const GenerateOptions& options,
                        const TokenCallback& on_token, const LayerProgress& progress) {
  Require(options.max_tokens >= 1, kOp, "max_tokens", options.max_tokens, "must be >= 1");
  RequireCacheFits(model, static_cast<std::int64_t>(prompt.size()), options.max_tokens);  // before the prefill's work
  DecoderCache cache = model.NewCache();
  const auto start = std::chrono::steady_clock::now();
  const std::vector<float> logits = Prefill(model, cache, prompt, attention, progress);
  const double prefill_seconds = SecondsSince(start);
  GenerateResult result = DecodeGreedy(model, cache, logits, attention, options, on_token);
  result.prompt_tokens = static_cast<std::int64_t>(prompt.size());
  result.prefill_seconds = prefill_seconds;
  return result;
}

}  // namespace posenc
