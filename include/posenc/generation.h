// Greedy decoding with a Llama model and its key/value cache (decoder_model.h):
// the prompt is prefilled in one batched pass, then each new token is the
// argmax of the previous logits (the lowest id among equal ones) and is run
// through the model alone, attending to the cache.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "posenc/attention.h"
#include "posenc/decoder_model.h"

namespace posenc {

struct GenerateOptions {
  std::int64_t max_tokens = 0;            // tokens to generate, >= 1
  std::vector<std::int32_t> stop_tokens;  // stop after emitting one (e.g. EOS)
};

struct GenerateResult {
  std::vector<std::int32_t> tokens;  // generated, a stop token included
  std::int64_t prompt_tokens = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;       // the single-token passes
  std::int64_t decode_passes = 0;  // tokens run one at a time (tokens.size() - 1)
  double PrefillTokensPerSecond() const;
  double DecodeTokensPerSecond() const;  // 0 without a single-token pass
};

// Called with each generated token as soon as it is chosen.
using TokenCallback = std::function<void(std::int32_t token)>;

// The index of the largest logit (the lowest index among equal ones; NaN
// is never chosen over a number). Throws posenc::Error for an empty span.
std::int32_t Argmax(std::span<const float> logits);

// Appends `prompt` to `cache` in one pass and returns the logits [vocab] of
// its last token: what predicts the first new token.
std::vector<float> Prefill(const DecoderModel& model, DecoderCache& cache, std::span<const std::int32_t> prompt,
                           const AttentionOptions& attention, const LayerProgress& progress = {});

// Greedy continuation of the cache's tokens, `next_logits` being the logits
// after its last one (from Prefill or a previous step). Every generated
// token but the last is appended to the cache. Times only the decode
// passes (prompt_tokens and prefill_seconds stay 0). Throws posenc::Error,
// before any work, when the cache would outgrow this machine's memory by
// max_tokens, and when next_logits hold a NaN, an infinity or a value of
// magnitude 2^16 or more (DecoderModel::Forward's rule for the logits of every
// step: an all-NaN row once decoded token 0 forever).
GenerateResult DecodeGreedy(const DecoderModel& model, DecoderCache& cache, std::span<const float> next_logits,
                            const AttentionOptions& attention, const GenerateOptions& options,
                            const TokenCallback& on_token = {});

// Prefill then DecodeGreedy on a new cache, both timed (the memory check
// comes before the prefill).
GenerateResult Generate(const DecoderModel& model, std::span<const std::int32_t> prompt,
                        const AttentionOptions& attention, const GenerateOptions& options,
                        const TokenCallback& on_token = {}, const LayerProgress& progress = {});

}  // namespace posenc
