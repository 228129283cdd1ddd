// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number
// generators", OOPSLA 2014): a bijective mixer of 64-bit words. Counters
// passed through it give independent-looking words, the same on every
// machine and compiler, with no hidden state: the tiny model's init and
// batches and the passkey keys are pure functions of a seed this way.
#pragma once

#include <cstdint>

namespace posenc {

constexpr std::uint64_t SplitMix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}
// The first word of Vigna's splitmix64.c (and Java's SplittableRandom) from 0.
static_assert(SplitMix64(0) == 0xE220A8397B1DCDAFULL);

}  // namespace posenc
