// Shared by the tiny model's tests: a grid of small odd shapes, random
// parameters and tokens, and the gradient comparison.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/tiny_lm.h"

namespace posenc::testing {

// Odd sizes everywhere: d_model 12 or 24, 2-3 heads (head_dim 6, 4, 8: even
// for rope), 1-2 layers, ffn_hidden prime, length 5-9, batch 1-3.
struct TinyShape {
  std::int64_t d_model, heads, layers, ffn_hidden, length, batch;
  std::int64_t position_range = 0;  // > 0: the config's, and a pass at ShapePositions
};
inline constexpr TinyShape kTinyGrid[] = {
    {12, 2, 1, 19, 5, 1},
    {12, 3, 2, 13, 7, 2},
    {24, 3, 2, 37, 9, 3},
};
// kTinyGrid and a shape at randomized positions: 6 tokens at an ordered
// subset of [0, 14), distances past Shaw's clip and T5's last bucket.
inline constexpr TinyShape kTinyGridWithPositions[] = {
    kTinyGrid[0],
    kTinyGrid[1],
    kTinyGrid[2],
    {12, 2, 2, 11, 6, 2, 14},
};

// The positions of a pass at `shape`: empty (0..T-1), or a fixed ordered
// random subset of [0, position_range).
inline std::vector<std::int64_t> ShapePositions(const TinyShape& shape) {
  if (shape.position_range == 0) return {};
  return RandomizedPositions(shape.position_range, shape.length, 17);
}

// The scheme at test sizes: Shaw clips at 3 and T5 has 4 buckets with
// max_distance 6, so that lengths 5-9 reach the clipped distances and every
// T5 bucket (2 exact, 2 logarithmic); FIRE's MLP is 8 wide; DeBERTa has 4
// buckets (distances 0-2 exact, 3-5 logarithmic, the last one from 6); URPE
// T5's buckets; FLOATER a dynamics 5 wide, 2 RK4 steps a position.
// Other fields as given.
inline PositionScheme TestSized(PositionScheme scheme) {
  if (auto* shaw = std::get_if<ShawScheme>(&scheme)) shaw->clip = 3;
  if (auto* t5 = std::get_if<T5Scheme>(&scheme)) *t5 = {.buckets = 4, .max_distance = 6};
  if (auto* fire = std::get_if<FireScheme>(&scheme)) fire->mlp_width = 8;
  if (auto* deberta = std::get_if<DebertaScheme>(&scheme)) *deberta = {.buckets = 4, .max_relative_positions = 6};
  if (auto* urpe = std::get_if<UrpeScheme>(&scheme)) *urpe = {.buckets = 4, .max_distance = 6};
  if (auto* floater = std::get_if<FloaterScheme>(&scheme)) *floater = {.hidden = 5, .substeps = 2, .dt = 0.3};
  return scheme;
}

// train_length = the shape's length, the scheme TestSized.
inline TinyLmConfig TinyConfig(const PositionScheme& scheme, const TinyShape& s) {
  TinyLmConfig config;
  config.d_model = s.d_model;
  config.heads = s.heads;
  config.layers = s.layers;
  config.ffn_hidden = s.ffn_hidden;
  config.train_length = s.length;
  config.position_range = s.position_range;
  config.scheme = TestSized(scheme);
  return config;
}

// gtest's name of a scheme parameter (letters, digits and '_' only).
inline std::string SchemeTestName(const ::testing::TestParamInfo<PositionScheme>& info) {
  std::string name(PositionSchemeName(info.param));
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return name;
}

// InitTinyLm plus U(-0.3, 0.3) on every value: norm gains away from 1,
// biases and tables away from their small init, gradients of order 0.01-1.
// FIRE's hidden units then get their kinks inside u's range [0, 1]
// (|weight| in [0.5, 1.5], bias = -weight * U(0.1, 0.9)): a unit active or
// dead over the whole range adds a constant or nothing to a softmax row,
// and its bias has no gradient to check; and a finite-difference step
// moves a kink by at most 2 steps in u, not across the u of a neighbour
// distance (a weight near 0 would move it by step / |weight|). c is drawn
// from [0.5, 1.5] (far from 0, where u hardly depends on it) and the
// threshold from [0.5, 0.9] L, so that queries below and past it are both
// checked.
inline TinyLmParams RandomTinyParams(const TinyLmConfig& config, std::uint32_t seed) {
  TinyLmParams params = InitTinyLm(config, seed);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> noise(-0.3f, 0.3f), kink(0.1f, 0.9f), slope(0.5f, 1.5f);
  for (TinyLmTensor* t : TinyLmTensorList(config, params)) {
    for (float& v : t->values) v += noise(rng);
  }
  if (std::holds_alternative<FireScheme>(config.scheme)) {
    for (TinyLmBlock& block : params.blocks) {
      std::vector<float>& weight = block.scheme[0].values;  // attn_fire_up.weight
      std::vector<float>& bias = block.scheme[1].values;    // attn_fire_up.bias
      for (std::size_t w = 0; w < bias.size(); ++w) {
        weight[w] = std::copysign(slope(rng), weight[w]);
        bias[w] = -weight[w] * kink(rng);
      }
      block.scheme[3].values = {slope(rng)};                // attn_fire_c
      block.scheme[4].values = {kink(rng) * 0.5f + 0.45f};  // attn_fire_threshold
    }
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
