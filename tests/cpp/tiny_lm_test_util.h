// Shared by the tiny model's tests: a grid of small odd shapes, random
// parameters and tokens, and the gradient comparison.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "posenc/tiny_lm.h"

namespace posenc::testing {

// Odd sizes everywhere: d_model 12 or 24, 2-3 heads (head_dim 6, 4, 8: even
// for rope), 1-2 layers, ffn_hidden prime, length 5-9, batch 1-3.
struct TinyShape {
  std::int64_t d_model, heads, layers, ffn_hidden, length, batch;
};
inline constexpr TinyShape kTinyGrid[] = {
    {12, 2, 1, 19, 5, 1},
    {12, 3, 2, 13, 7, 2},
    {24, 3, 2, 37, 9, 3},
};

// train_length = the shape's length; Shaw clips at 3 and T5 has 4 buckets
// with max_distance 6, so that lengths 5-9 reach the clipped distances and
// every T5 bucket (2 exact, 2 logarithmic).
inline TinyLmConfig TinyConfig(PositionScheme scheme, const TinyShape& s) {
  TinyLmConfig config;
  config.d_model = s.d_model;
  config.heads = s.heads;
  config.layers = s.layers;
  config.ffn_hidden = s.ffn_hidden;
  config.train_length = s.length;
  config.scheme = scheme;
  config.shaw_clip = 3;
  config.t5_buckets = 4;
  config.t5_max_distance = 6;
  return config;
}

// InitTinyLm plus U(-0.3, 0.3) on every value: norm gains away from 1,
// biases and tables away from their small init, gradients of order 0.01-1.
inline TinyLmParams RandomTinyParams(const TinyLmConfig& config, std::uint32_t seed) {
  TinyLmParams params = InitTinyLm(config, seed);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> noise(-0.3f, 0.3f);
  for (TinyLmTensor* t : TinyLmTensorList(config, params)) {
    for (float& v : t->values) v += noise(rng);
  }
  return params;
}

inline std::vector<std::uint8_t> RandomBytes(std::int64_t batch, std::int64_t length, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint8_t> tokens(static_cast<std::size_t>(batch * (length + 1)));
  for (std::uint8_t& t : tokens) t = static_cast<std::uint8_t>(rng() & 0xFF);
  return tokens;
}

// A float32 gradient against a float64 finite difference: within 1e-3 of it
// relatively, or 2e-5 absolutely for entries near 0.
inline constexpr double kGradRelTol = 1e-3;
inline constexpr double kGradAbsTol = 2e-5;
inline bool GradientClose(double analytic, double numeric) {
  return std::abs(analytic - numeric) <= kGradRelTol * std::abs(numeric) + kGradAbsTol;
}

}  // namespace posenc::testing
