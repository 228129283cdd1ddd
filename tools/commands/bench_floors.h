// The floors a benchmark holds its figures to, and the one verdict line it
// ends with. A missed floor is reported, not an error: the exit status stays
// 0, because a timing on a shared or throttled machine is a measurement of
// that machine, while correctness is checked before any timing starts (a
// wrong result is an error). Scripts read the verdict line or --json.
#pragma once

#include <string>
#include <vector>

namespace posenc::cli {

struct BenchFloor {
  std::string name;  // what is held, e.g. "rope >= 50% of peak"
  bool met = false;
};

// What each benchmark's --help says about its floors and exit status.
inline constexpr const char* kFloorsHelp =
    "; ends with a verdict line, 'verdict: all floors met' or 'verdict: FLOOR MISSED: ...' (exit status 0 either way)";

// "verdict: all 6 floors met (a; b; ...)" or "verdict: FLOOR MISSED: a; b (4 of 6 met)".
void PrintFloorVerdict(const std::vector<BenchFloor>& floors);

}  // namespace posenc::cli
