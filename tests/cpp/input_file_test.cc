// Input files: directories, FIFOs and devices are refused before they are
// read (a FIFO blocked on open, /dev/zero read 13 GB), files over the limit
// before they are read whole; buffers larger than memory before allocation.
#include "posenc/input_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "test_util.h"

namespace posenc {
namespace {

using testing::ExpectError;

std::string TempDir() {
  char pattern[] = "/tmp/posenc-input-XXXXXX";
  const char* dir = ::mkdtemp(pattern);
  EXPECT_NE(dir, nullptr);
  return dir;
}

TEST(ReadRegularFile, ReadsAFileWhole) {
  const std::string dir = TempDir();
  std::ofstream(dir + "/a.txt") << std::string("ab\0c", 4);
  EXPECT_EQ(ReadRegularFile("t", "--text", dir + "/a.txt", 4, "test"), std::string("ab\0c", 4));
  std::remove((dir + "/a.txt").c_str());
  ::rmdir(dir.c_str());
}

TEST(ReadRegularFile, RefusesWhatIsNotARegularFileWithoutBlocking) {
  const std::string dir = TempDir();
  const std::string quoted_dir = "[t] --text = \"" + dir + "\"";
  ExpectError([&] { ReadRegularFile("t", "--text", dir, 100, "test"); }, {quoted_dir.c_str(), "is a directory"});
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ExpectError([&] { ReadRegularFile("t", "--text", fifo, 100, "test"); }, {"fifo\"", "not a regular file"});
  ExpectError([&] { ReadRegularFile("t", "--hf-config", "/dev/zero", 100, "test"); },
              {"--hf-config = \"/dev/zero\"", "not a regular file"});
  ExpectError([&] { ReadRegularFile("t", "--text", dir + "/missing", 100, "test"); }, {"cannot be opened"});
  std::remove(fifo.c_str());
  ::rmdir(dir.c_str());
}

TEST(ReadRegularFile, RefusesFilesOverTheLimit) {
  const std::string dir = TempDir();
  std::ofstream(dir + "/big.json") << std::string(101, 'x');
  ExpectError([&] { ReadRegularFile("rope freqs", "--hf-config", dir + "/big.json", 100, "a config is small"); },
              {"is 101 bytes, more than the 100 this input may have (a config is small)"});
  std::remove((dir + "/big.json").c_str());
  ::rmdir(dir.c_str());
}

TEST(RequireFitsInMemory, NamesTheSizeAndTheMachine) {
  EXPECT_NO_THROW(RequireFitsInMemory("t", "n", 10, "ten floats", 10, 4));
  ExpectError([] { RequireFitsInMemory("sinusoidal", "dim", 1 << 30, "the table", 1e18, 8); },
              {"[sinusoidal] dim = 1073741824: the table needs", "GiB", "more than this machine's"});
}

TEST(CheckedProduct, IsMinusOneWhereTheProductWouldWrap) {
  EXPECT_EQ(CheckedProduct({}), 1);
  EXPECT_EQ(CheckedProduct({3, 0, std::int64_t{1} << 62}), 0);
  EXPECT_EQ(CheckedProduct({std::int64_t{1} << 31, std::int64_t{1} << 31}), std::int64_t{1} << 62);
  EXPECT_EQ(CheckedProduct({std::int64_t{1} << 32, std::int64_t{1} << 32}), -1);  // wraps to 0 unchecked
  EXPECT_EQ(CheckedProduct({32, std::int64_t{1} << 59}), -1);
}

TEST(BufferElements, IsTheProductOrAnError) {
  EXPECT_EQ(BufferElements("t", "n", 3, "a buffer", {2, 3, 4}, 8), 24u);
  EXPECT_EQ(BufferElements("t", "n", 0, "a buffer", {0, std::int64_t{1} << 62}, 8), 0u);
  const std::int64_t big = std::int64_t{1} << 32;
  ExpectError(
      [&] {
        BufferElements("alibi", "q_len", big, "the bias", {1, big, big}, 8);
      },
      {"[alibi] q_len = 4294967296: the bias needs 137438953472.0 GiB (18446744073709551616 values of 8 "
       "bytes)"});
}

}  // namespace
}  // namespace posenc
