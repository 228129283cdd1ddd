// A fresh directory under /tmp for a test, removed with everything in it
// when the test ends.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>  // NOLINT(modernize-deprecated-headers): POSIX mkdtemp

#include <algorithm>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace posenc::testing {

class TempDir {
 public:
  // `name` goes into the directory's name ("/tmp/posenc-NAME-XXXXXX").
  explicit TempDir(const std::string& name) {
    std::string pattern = "/tmp/posenc-" + name + "-XXXXXX";
    const char* dir = ::mkdtemp(pattern.data());
    EXPECT_NE(dir, nullptr) << pattern;
    path_ = dir != nullptr ? dir : "";
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  // The names in the directory, sorted.
  std::vector<std::string> Entries() const {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(path_)) {
      names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  std::string path_;
};

}  // namespace posenc::testing
