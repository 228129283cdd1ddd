#include "commands/bench_floors.h"

#include <cstdio>

namespace posenc::cli {

void PrintFloorVerdict(const std::vector<BenchFloor>& floors) {
  std::string met, missed;
  std::size_t met_count = 0;
  for (const BenchFloor& floor : floors) {
    std::string& list = floor.met ? met : missed;
    list += (list.empty() ? "" : "; ") + floor.name;
    met_count += floor.met ? 1 : 0;
  }
  if (missed.empty()) {
    std::printf("verdict: all %zu floors met (%s)\n", floors.size(), met.c_str());
  } else {
    std::printf("verdict: FLOOR MISSED: %s (%zu of %zu met)\n", missed.c_str(), met_count, floors.size());
  }
}

}  // namespace posenc::cli
