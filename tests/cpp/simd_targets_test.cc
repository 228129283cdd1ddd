// The SIMD targets that testing::ForEachTarget runs the kernel tests on, here:
// printed, so that a log shows what was covered (scripts/test-arm64 runs this
// under qemu with SVE vector lengths of 128, 256 and 512 bits), and checked
// against POSENC_EXPECT_SIMD_TARGETS (names separated by spaces) when set.
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "test_util.h"

namespace posenc {
namespace {

TEST(SimdTargets, PrintsTheTargetsTheKernelTestsRunOn) {
  std::vector<std::string> names;
  for (const std::int64_t target : hwy::SupportedAndGeneratedTargets()) names.emplace_back(hwy::TargetName(target));
  std::string joined;
  for (const std::string& name : names) joined += (joined.empty() ? "" : " ") + name;
  std::cout << "SIMD targets compiled and supported here: " << joined << "\n";
  ::testing::Test::RecordProperty("simd_targets", joined);
  ASSERT_FALSE(names.empty());
  EXPECT_THAT(names, ::testing::Contains(std::string(hwy::TargetName(HWY_STATIC_TARGET))));

  if (const char* expected = std::getenv("POSENC_EXPECT_SIMD_TARGETS")) {
    std::istringstream words(expected);
    for (std::string name; words >> name;) EXPECT_THAT(names, ::testing::Contains(name)) << "expected " << expected;
  }
}

}  // namespace
}  // namespace posenc
