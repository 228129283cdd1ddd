// The rules of posenc passkey's values, checked where its flags are parsed
// and where a passkey grid's file is read (passkey_grid.cc): one rule, one
// place. Each throws posenc::Error "[passkey] --flag = value: rule".
#pragma once

#include <cstdint>

namespace posenc::cli {

void CheckPasskeyLength(std::int64_t length);                // --lengths, each
void CheckPasskeyDepth(double depth);                        // --depths, each
void CheckPasskeySeed(std::int64_t seed);                    // --seed
void CheckPasskeyTrials(std::int64_t trials);                // --trials
void CheckPasskeyTrial(std::int64_t trial);                  // a trial's index: [0, the most --trials allows)
void CheckPasskeyMaxNewTokens(std::int64_t max_new_tokens);  // --max-new-tokens

}  // namespace posenc::cli
