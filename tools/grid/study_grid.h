// The rules of posenc study's values, checked where its flags are parsed
// and where a study grid's file is read (study_grid.cc): one rule, one
// place. Each throws posenc::Error "[study] --flag = value: rule".
#pragma once

#include <cstdint>

namespace posenc::cli {

void CheckStudyLength(std::int64_t length);    // --lengths, each
void CheckStudyWindows(std::int64_t windows);  // --windows
void CheckStudyBucket(std::int64_t bucket);    // --bucket

}  // namespace posenc::cli
