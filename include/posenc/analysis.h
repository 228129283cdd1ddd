// Analyses of positional encodings: the numbers behind the usual pictures
// (wavelength per RoPE pair, long-range decay, the linear shift map of
// sinusoidal encodings, relative invariance of RoPE scores, dot-product
// heat maps). Everything is computed in float64 by brute force from the
// frequency tables; the float32 check goes through posenc::ApplyRope.
//
// Scores use the rotation alone: the attention factor of YaRN/LongRoPE scales
// every score by the same a^2 and is left out so that methods compare.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "posenc/rope_spec.h"
#include "posenc/sinusoidal.h"

namespace posenc {

// ---- RoPE dimensions ------------------------------------------------------

struct RopeDim {
  std::int64_t index = 0;   // pair i
  double inv_freq = 0.0;    // theta_i, radians per token
  double wavelength = 0.0;  // 2 pi / theta_i, tokens per turn
  double rotations = 0.0;   // original_length / wavelength, turns within L
};

struct RopeDimsMethod {
  std::string method;  // "plain", "linear", "ntk", "yarn", "llama3", or the spec's name
  double factor = 1.0;
  std::vector<RopeDim> dims;  // [Pairs()]
};

struct RopeDims {
  std::int64_t original_length = 0;
  RopeDimsMethod configured;                // the spec as given
  std::vector<RopeDimsMethod> comparisons;  // empty when comparison_factor == 0
};

// Per pair of `spec` (frequencies at sequence length original_length):
// inv_freq, wavelength and rotations within original_length. With a
// comparison_factor >= 1 also the same table for plain RoPE and for linear,
// NTK (alpha = factor), YaRN and Llama-3 scaling of the plain spec (same
// theta and rotary_dim) with that factor and original_length.
RopeDims ComputeRopeDims(const RopeSpec& spec, std::int64_t original_length,
                         double comparison_factor = 0.0);

// ---- Long-range decay (RoFormer, section 3.4.3) ---------------------------

struct RopeDecayOptions {
  std::int64_t max_distance = 256;  // Delta = 0, step, ..., <= max_distance
  std::int64_t step = 1;
  std::int64_t samples = 32;  // random (q, k) pairs and query positions per Delta
  std::uint64_t seed = 0;
};

struct RopeDecayPoint {
  std::int64_t distance = 0;
  // (1/(d/2)) sum_{j=1}^{d/2} |S_j|, S_j = sum_{i<j} e^{i Delta theta_i}, d = rotary_dim.
  double bound = 0.0;
  // Mean over query positions m of |<R_{m+Delta} q, R_m k>| for all-ones q, k.
  double ones = 0.0;
  // The same mean for random q, k with N(0, 1) entries (over `samples` draws).
  double random = 0.0;
};

struct RopeDecay {
  std::int64_t rotary_dim = 0;
  std::vector<RopeDecayPoint> points;
};

RopeDecay ComputeRopeDecay(const RopeSpec& spec, const RopeDecayOptions& options = {});

// The bound alone at one distance, from a frequency table.
double RopeDecayBound(const std::vector<double>& inv_freq, double distance);

// ---- Linear maps ----------------------------------------------------------

// T(Delta), [dim, dim] row-major: p_{k+Delta} = T(Delta) p_k for every k.
// Block-diagonal: one 2x2 rotation by Delta * w_j on pair j's (sin, cos)
// entries; the zero pad of an odd dim maps to 0.
std::vector<double> SinusoidalShiftMatrix(const SinusoidalSpec& spec, double delta);

struct SinusoidalLinearMap {
  std::int64_t positions = 0;  // k = 0 .. positions-1
  std::int64_t max_shift = 0;  // Delta = -max_shift .. max_shift
  // Per Delta (index Delta + max_shift): max over k and entries of
  // |T(Delta) p_k - p_{k+Delta}|.
  std::vector<double> error_by_shift;
  double max_error = 0.0;
};

SinusoidalLinearMap ComputeSinusoidalLinearMap(const SinusoidalSpec& spec, std::int64_t positions,
                                               std::int64_t max_shift);

struct RopeInvariance {
  std::int64_t max_position = 0;
  std::int64_t step = 0;  // grid m, n in {0, step, ...} <= max_position
  // Max over the grid of |<R_m q, R_n k> - <R_{m-n} q, k>| for random q, k
  // with N(0, 1) entries: float64 brute force, and float32 through ApplyRope
  // (both sides rotated by the fast kernel, dot products in double).
  double max_error_f64 = 0.0;
  double max_error_f32 = 0.0;
  double max_abs_score = 0.0;  // the scale of the scores compared
};

RopeInvariance ComputeRopeInvariance(const RopeSpec& spec, std::int64_t max_position,
                                     std::int64_t step, std::uint64_t seed = 0);

// ---- Score matrices -------------------------------------------------------

// <p_m, p_n> for m, n < positions: [positions, positions] row-major.
std::vector<double> SinusoidalDotMatrix(const SinusoidalSpec& spec, std::int64_t positions);

// <R_m q, R_n k> for m, n < positions, [positions, positions] row-major (rows
// are query positions m); q and k have head_dim entries.
std::vector<double> RopeScoreMatrix(const RopeSpec& spec, const std::vector<double>& q,
                                    const std::vector<double>& k, std::int64_t positions);

// R_p x in float64 for one head vector x [head_dim], by the spec's layout and
// rotary_dim (the rest passes through), frequencies at sequence length 0.
std::vector<double> RotateHeadF64(const RopeSpec& spec, const std::vector<double>& inv_freq,
                                  const std::vector<double>& x, double position);

}  // namespace posenc
