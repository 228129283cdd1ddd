// The rules of posenc passkey's values, checked where its flags are parsed
// and where a passkey grid's file is read (passkey_grid.cc): one rule, one
// place. Each throws posenc::Error "[passkey] --flag = value: rule".
#pragma once

#include <cstdint>
#include <string>

namespace posenc::cli {

// The design of a grid of independent trials (settings.design and every
// cell's params.design): each trial its own filler, key and depth, drawn
// from (--seed, trial) by DrawPasskeyTrial, the same trials for every
// method. A grid without the field has the fixed-depth design of the first
// grids (every --depths value x --trials keys in the one published filler;
// its trials are not independent), and its cells keep their keys.
inline constexpr const char* kPasskeyIndependent = "independent";

void CheckPasskeyLength(std::int64_t length);                // --lengths, each
void CheckPasskeyDepth(double depth);                        // --depths, each
void CheckPasskeySeed(std::int64_t seed);                    // --seed
void CheckPasskeyTrials(std::int64_t trials);                // --trials
void CheckPasskeyTrial(std::int64_t trial);                  // a trial's index: [0, the most --trials allows)
void CheckPasskeyMaxNewTokens(std::int64_t max_new_tokens);  // --max-new-tokens
void CheckPasskeyDesign(const std::string& design);          // a grid file's design: kPasskeyIndependent
// An independent trial's depth in a grid file: the one drawn for it.
void CheckPasskeyDrawnDepth(std::int64_t seed, std::int64_t trial, double depth);

}  // namespace posenc::cli
