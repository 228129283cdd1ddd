// Shared by the tiny model's training, evaluation and checkpoint tests
// (tiny_lm_train_test.cc, tiny_lm_eval_test.cc, tiny_lm_checkpoint_test.cc):
// a small config, texts (given, and every byte value in a fixed order) and a
// bitwise comparison of two models' parameters.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/tiny_lm.h"
#include "posenc/tiny_lm_checkpoint.h"
#include "tiny_lm_test_util.h"

namespace posenc::testing {

// d 16, 2 heads (head_dim 8), 2 layers, ffn 24, L 16; the scheme at test
// sizes (testing::TestSized: Shaw clip 3, T5 with 4 buckets up to distance
// 6, reached within 16).
inline TinyLmConfig SmallConfig(const PositionScheme& scheme) {
  TinyLmConfig config;
  config.d_model = 16;
  config.heads = 2;
  config.layers = 2;
  config.ffn_hidden = 24;
  config.train_length = 16;
  config.scheme = testing::TestSized(scheme);
  return config;
}

inline std::vector<std::uint8_t> Bytes(std::string_view text) { return {text.begin(), text.end()}; }

// Every byte value in a fixed pseudo-random order.
inline std::vector<std::uint8_t> Noise(std::size_t bytes, std::uint32_t seed) {
  std::vector<std::uint8_t> text(bytes);
  std::uint32_t x = seed;
  for (std::uint8_t& b : text) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<std::uint8_t>(x >> 24);
  }
  return text;
}

inline bool SameBits(const TinyLmConfig& config, const TinyLmParams& a, const TinyLmParams& b,
                     std::string* first_difference) {
  const auto ta = TinyLmTensorList(config, a), tb = TinyLmTensorList(config, b);
  for (std::size_t t = 0; t < ta.size(); ++t) {
    if (ta[t]->values.size() != tb[t]->values.size() ||
        std::memcmp(ta[t]->values.data(), tb[t]->values.data(), ta[t]->values.size() * sizeof(float)) != 0) {
      *first_difference = ta[t]->name;
      return false;
    }
  }
  return true;
}

}  // namespace posenc::testing
