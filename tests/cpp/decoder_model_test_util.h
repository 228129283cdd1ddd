// Shared by the decoder model's tests (decoder_*_test.cc): the tiny
// random-weight models (a Llama, a Gemma 3, one of each weight type), random
// tokens, the distances between two runs' logits, a prefill followed by one
// decode step a token, and a load that must fail.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <random>
#include <span>
#include <vector>

#include "posenc/decoder_model.h"
#include "posenc/gguf.h"
#include "random_llama.h"
#include "test_util.h"

namespace posenc::testing {

struct RandomModel {
  std::vector<unsigned char> bytes;
  GgufFile file;
  DecoderModel model;
  explicit RandomModel(const RandomLlamaOptions& options = {}, WeightStorage storage = WeightStorage::kAsStored,
                       DotActivations activations = DotActivations::kFloat32)
      : bytes(RandomLlamaGguf(options)), file(GgufFile::Parse(std::as_bytes(std::span(bytes)))),
        model(DecoderModel::FromGguf(file, storage, activations)) {}
};

inline std::vector<std::int32_t> RandomTokens(std::int64_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::int32_t> tokens(n);
  for (auto& t : tokens) t = static_cast<std::int32_t>(rng() % testing::kTinyVocab);
  return tokens;
}

// max |fast - reference| / max |reference|.
inline double RelativeError(const std::vector<float>& fast, const std::vector<double>& ref) {
  double max_diff = 0, max_ref = 0;
  for (std::size_t i = 0; i < ref.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(fast[i] - ref[i]));
    max_ref = std::max(max_ref, std::abs(ref[i]));
  }
  return max_diff / max_ref;
}

// A tiny Gemma 3: seven layers (layer 5 global, the others local with a
// window of 8 keys: local layers before and after a global one, as in the
// 270M model's 18), one KV head as the 270M model.
inline RandomLlamaOptions TinyGemma3() {
  RandomLlamaOptions options;
  options.architecture = "gemma3";
  options.blocks = 7;
  options.kv_heads = 1;
  options.sliding_window = 8;
  return options;
}

// max |a - b| / max |a| of two runs' logits.
inline double RelativeDifference(const std::vector<float>& a, const std::vector<float>& b) {
  double max_diff = 0, max_abs = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    max_diff = std::max(max_diff, static_cast<double>(std::abs(a[i] - b[i])));
    max_abs = std::max(max_abs, static_cast<double>(std::abs(a[i])));
  }
  return max_diff / max_abs;  // NaN (a row never written) fails a comparison
}

// The logits of `tokens` from a prefill of `prefill` tokens, then one decode
// step a token.
inline std::vector<float> PrefillThenDecode(const DecoderModel& model, std::span<const std::int32_t> tokens,
                                            std::int64_t prefill, const AttentionOptions& attention) {
  const std::int64_t vocab = model.hparams().vocab_size, n = static_cast<std::int64_t>(tokens.size());
  std::vector<float> decoded(n * vocab, std::nanf(""));
  const auto keep = [&](std::int64_t offset) {
    return [&, offset](std::span<const std::int64_t> rows, std::span<const float> logits) {
      for (std::size_t r = 0; r < rows.size(); ++r) {
        std::copy_n(logits.begin() + r * vocab, vocab, decoded.begin() + (offset + rows[r]) * vocab);
      }
    };
  };
  DecoderCache cache = model.NewCache();
  std::vector<std::int64_t> all(prefill);
  for (std::int64_t r = 0; r < prefill; ++r) all[r] = r;
  model.Extend(cache, tokens.first(prefill), attention, all, keep(0));
  for (std::int64_t t = prefill; t < n; ++t) {
    const std::int64_t row0 = 0;
    model.Extend(cache, tokens.subspan(t, 1), attention, std::span(&row0, 1), keep(t));
  }
  return decoded;
}

// A model of each weight type: d, heads * head_dim and ffn in whole blocks.
inline RandomLlamaOptions QuantizedLlama(GgmlType type) {
  RandomLlamaOptions options;
  options.weights = type;
  options.tied = type != GgmlType::kQ8_0;  // one type with its own output matrix
  if (TraitsOf(type).block_elements == 256) {
    options.d = 256;
    options.head_dim = 64;
    options.ffn = 256;
  } else {
    options.ffn = 64;
  }
  return options;
}

// A GGUF with one change, for the loading errors.
inline void ExpectLoadError(const std::vector<unsigned char>& bytes, std::initializer_list<const char*> fragments) {
  ExpectError([&] { DecoderModel::FromGguf(GgufFile::Parse(std::as_bytes(std::span(bytes)))); }, fragments);
}

}  // namespace posenc::testing
