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
  // "plain", "linear", "ntk", "yarn", "llama3", "longrope", or the spec's
  // scaling name (RopeScalingName) for the configured table.
  std::string method;
  double factor = 1.0;
  std::vector<RopeDim> dims;  // [Pairs()]
};

struct RopeDims {
  std::int64_t original_length = 0;
  RopeDimsMethod configured;                // the spec as given
  std::vector<RopeDimsMethod> comparisons;  // empty when comparison_factor == 0
};

// Per pair of `spec` (frequencies at sequence length original_length, so a
// LongRoPE spec shows its short factors and dynamic NTK its plain table):
// inv_freq, wavelength and rotations within original_length.
//
// With a comparison_factor >= 1 also the same table for plain RoPE and for
// linear, NTK (alpha = factor), YaRN and Llama-3 scaling of the plain spec
// (same theta and rotary_dim) with that factor and original_length, and for
// LongRoPE beyond original_length when per-pair factors are known:
// `longrope_factors` if given (rotary_dim / 2 positive values), else
// the spec's own long factors when it is a LongRoPE spec. LongRoPE's factors
// come from a per-model search, so there is no LongRoPE table to compare
// without them.
RopeDims ComputeRopeDims(const RopeSpec& spec, std::int64_t original_length, double comparison_factor = 0.0,
                         const std::vector<double>& longrope_factors = {});

// ---- Long-range decay (RoFormer, section 3.4.3) ---------------------------

struct RopeDecayOptions {
  std::int64_t max_distance = 256;  // Delta = 0, step, ..., <= max_distance
  std::int64_t step = 1;
  // When not empty, these distances (each in [0, 2^24]) instead of the grid
  // above, e.g. LogSpacedDistances for a log-scale axis.
  std::vector<std::int64_t> distances;
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

// About `count` distances from 1 to max_distance, evenly spaced on a log
// scale, rounded to whole tokens, increasing and without repeats (so fewer
// than `count` when the low end has fewer integers); max_distance included.
std::vector<std::int64_t> LogSpacedDistances(std::int64_t max_distance, std::int64_t count);

// ---- Linear maps ----------------------------------------------------------

// T(Delta), [dim, dim] row-major: p_{k+Delta} = T(Delta) p_k for every k.
// Block-diagonal: one 2x2 rotation by Delta * w_j on pair j's (sin, cos)
// entries; the zero pad of an odd dim maps to 0.
std::vector<double> SinusoidalShiftMatrix(const SinusoidalSpec& spec, double delta);

// T(Delta) solved from the encodings alone: for each pair, the 2x2 block
// that best maps (least squares, by QR) the rows p_k to p_{k+Delta} for
// k = first .. first+count-1. Off-diagonal blocks are zero by construction
// (the pairs do not mix); count >= 2.
std::vector<double> SolveSinusoidalShiftMatrix(const SinusoidalSpec& spec, double delta, std::int64_t first,
                                               std::int64_t count);

struct SinusoidalLinearMap {
  std::int64_t positions = 0;  // k = 0 .. positions-1
  std::int64_t max_shift = 0;  // Delta = -max_shift .. max_shift
  // Per Delta (index Delta + max_shift): max over k and entries of
  // |T(Delta) p_k - p_{k+Delta}|.
  std::vector<double> error_by_shift;
  double max_error = 0.0;
  // Per Delta: max entry of |T_A(Delta) - T(Delta)| and |T_B(Delta) - T(Delta)|
  // with T_A, T_B solved from the first and the second half of the
  // positions: the map found in the data is the constructed one, the same
  // wherever k lies (T depends on Delta only).
  std::vector<double> solved_deviation_by_shift;
  double max_solved_deviation = 0.0;
};

// positions >= 4 (each half needs two positions to solve a 2x2 block).
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

RopeInvariance ComputeRopeInvariance(const RopeSpec& spec, std::int64_t max_position, std::int64_t step,
                                     std::uint64_t seed = 0);

// ---- The binary-counter view (kexue.fm/archives/8231) ---------------------

// Bit b of each position k < positions, [positions, bits] row-major, bit 0
// (the least significant, which flips every token) first: the integer
// counter that the sinusoidal frequencies are a smooth version of. Bit b has
// period 2^(b+1) tokens; sinusoidal pair k has wavelength 2 pi / w_k.
std::vector<double> BinaryDigits(std::int64_t positions, std::int64_t bits);

// ---- Score matrices -------------------------------------------------------

// <p_m, p_n> for m, n < positions: [positions, positions] row-major.
std::vector<double> SinusoidalDotMatrix(const SinusoidalSpec& spec, std::int64_t positions);

// <R_m q, R_n k> for m, n < positions, [positions, positions] row-major (rows
// are query positions m); q and k have head_dim entries.
std::vector<double> RopeScoreMatrix(const RopeSpec& spec, const std::vector<double>& q, const std::vector<double>& k,
                                    std::int64_t positions);

}  // namespace posenc
