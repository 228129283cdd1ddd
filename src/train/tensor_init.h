// Deterministic initialization of the tiny model's tensors: element e of a
// tensor depends only on (seed, tensor name, e) (SplitMix64 counters,
// Box-Muller written here), on every machine and whatever else the model
// has, so two schemes with one seed share every tensor they have in common.
#pragma once

#include <cstdint>
#include <string_view>

#include "posenc/tiny_lm.h"

namespace posenc::tiny_lm {

// Uniform and normal draws of one tensor: draw c is a pure function of (seed, name, c).
class InitStream {
 public:
  InitStream(std::uint64_t seed, std::string_view name);
  // In (0, 1): the top 53 bits, centred in their interval (never 0: log below).
  double Uniform(std::uint64_t counter) const;
  // Box-Muller (written here: std::normal_distribution's output is
  // implementation-defined). Element e uses draws 2e and 2e+1.
  double Normal(std::uint64_t e) const;

 private:
  std::uint64_t key_;
};

// Normal(0, stddev) per element. The double is rounded to float: a
// last-bit difference of two libms' log or cos changes the float only in
// the rare case it straddles a rounding point.
void FillNormal(TinyLmTensor& t, std::uint64_t seed, double stddev);
// U(low, high) per element.
void FillUniform(TinyLmTensor& t, std::uint64_t seed, double low, double high);
// Every element `value`.
void FillConstant(TinyLmTensor& t, float value);

}  // namespace posenc::tiny_lm
