// What an output path may be (include/posenc/output_file.h): a new name or a
// regular file is written through a temporary renamed onto it; a symlink's
// target is written and the link stays; a character device is written
// through and never renamed over; a FIFO or a directory is refused and left
// as it was; an empty name or one with a NUL byte is refused; and a writer
// killed halfway leaves a temporary that the next write of the file removes.
//
// The real /dev/null is written only after a symlink to /dev/full has shown
// that devices are written through (a build without that would replace the
// link, not the device): a regression cannot replace /dev/null.
#include "posenc/output_file.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "temp_dir.h"
#include "test_util.h"

namespace posenc {
namespace {

using testing::ExpectError;
namespace fs = std::filesystem;

class TempDir : public testing::TempDir {
 public:
  TempDir() : testing::TempDir("output-file") {}
};

std::string Contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void WriteFile(const std::string& path, std::string_view bytes) {
  OutputFile file("test", "path", path);
  file.Write(bytes);
  file.Commit();
}

std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

bool IsCharacterDevice(const std::string& path) {
  struct stat info {};
  return ::lstat(path.c_str(), &info) == 0 && S_ISCHR(info.st_mode);
}

TEST(OutputFile, ANewNameAndARegularFileAreWrittenWhole) {
  TempDir dir;
  WriteFile(dir / "a.txt", "first");
  EXPECT_EQ(Contents(dir / "a.txt"), "first");
  {
    OutputFile file("test", "path", dir / "a.txt");
    file.Write("second");
    EXPECT_EQ(Contents(dir / "a.txt"), "first");  // until Commit
    EXPECT_EQ(dir.Entries().size(), 2u);          // the temporary beside it
  }                                               // not committed: the temporary goes, the old file stays
  EXPECT_EQ(Contents(dir / "a.txt"), "first");
  EXPECT_EQ(dir.Entries(), (std::vector<std::string>{"a.txt"}));
}

TEST(OutputFile, AFifoIsRefusedAndStaysAFifo) {
  TempDir dir;
  ASSERT_EQ(::mkfifo((dir / "pipe").c_str(), 0600), 0);
  ExpectError([&] { WriteFile(dir / "pipe", "x"); },
              {"[test] path = \"", "pipe\": is a FIFO (named pipe), not a regular file"});
  ExpectError([&] { RequireWritableOutput("train", "--out", dir / "pipe"); }, {"[train] --out = \"", "is a FIFO"});
  EXPECT_TRUE(fs::is_fifo(dir / "pipe"));
  EXPECT_EQ(dir.Entries(), (std::vector<std::string>{"pipe"}));
}

TEST(OutputFile, ASymlinkWritesItsTargetAndStaysALink) {
  TempDir dir;
  fs::create_directory(dir / "real");
  std::ofstream(dir / "real/model.gguf") << "old";
  fs::create_symlink("real/model.gguf", dir / "link.gguf");          // relative, to a file
  fs::create_symlink(dir / "real/new.gguf", dir / "dangling.gguf");  // absolute, to a new name
  fs::create_symlink("link.gguf", dir / "chain.gguf");               // a link to a link
  WriteFile(dir / "link.gguf", "new");
  EXPECT_TRUE(fs::is_symlink(dir / "link.gguf"));
  EXPECT_EQ(Contents(dir / "real/model.gguf"), "new");
  WriteFile(dir / "chain.gguf", "newer");
  EXPECT_TRUE(fs::is_symlink(dir / "chain.gguf"));
  EXPECT_EQ(Contents(dir / "real/model.gguf"), "newer");
  WriteFile(dir / "dangling.gguf", "created");
  EXPECT_TRUE(fs::is_symlink(dir / "dangling.gguf"));
  EXPECT_EQ(Contents(dir / "real/new.gguf"), "created");
  // Nothing beside the links or the targets: the temporaries were renamed.
  EXPECT_EQ(dir.Entries(), (std::vector<std::string>{"chain.gguf", "dangling.gguf", "link.gguf", "real"}));
  EXPECT_EQ(Names(dir / "real"), (std::vector<std::string>{"model.gguf", "new.gguf"}));
}

TEST(OutputFile, ASymlinkLoopIsRefused) {
  TempDir dir;
  fs::create_symlink("b", dir / "a");
  fs::create_symlink("a", dir / "b");
  ExpectError([&] { WriteFile(dir / "a", "x"); }, {"a\": cannot be written: Too many levels of symbolic links"});
  EXPECT_TRUE(fs::is_symlink(dir / "a"));
}

TEST(OutputFile, ADirectoryAnEmptyNameAndANulAreRefused) {
  TempDir dir;
  fs::create_directory(dir / "d");
  ExpectError([&] { WriteFile(dir / "d", "x"); }, {"d\": is a directory, not a file that can be replaced"});
  ExpectError([&] { WriteFile("", "x"); }, {"[test] path = \"\": must name a file (it is empty)"});
  ExpectError([&] { WriteFile(dir.path() + std::string("/out\0.gguf", 10), "x"); },
              {"out\\x00.gguf\": must not contain a NUL byte"});
  ExpectError([&] { RequireWritableOutput("train", "--out", dir / "missing/x.gguf"); },
              {"[train] --out = \"", "missing/x.gguf\": cannot be written: No such file or directory"});
  EXPECT_EQ(dir.Entries(), (std::vector<std::string>{"d"}));
  EXPECT_TRUE(fs::is_empty(dir / "d"));
}

TEST(OutputFile, RequireWritableOutputLeavesNothing) {
  TempDir dir;
  RequireWritableOutput("train", "--out", dir / "x.gguf");
  EXPECT_TRUE(dir.Entries().empty());
}

TEST(OutputFile, ACharacterDeviceIsWrittenThroughNeverReplaced) {
  // First through a symlink of our own: a writer that renamed would replace
  // the link (harmless), and the test stops before touching /dev.
  TempDir dir;
  ASSERT_TRUE(IsCharacterDevice("/dev/full"));
  fs::create_symlink("/dev/full", dir / "full");
  ExpectError([&] { WriteFile(dir / "full", "bytes"); }, {"full\": cannot be written: No space left on device"});
  ASSERT_TRUE(fs::is_symlink(dir / "full"));
  ASSERT_EQ(dir.Entries(), (std::vector<std::string>{"full"}));
  // Devices are written through: /dev/full is an error naming it, /dev/null
  // takes the bytes, and both stay devices.
  ExpectError([&] { WriteFile("/dev/full", "bytes"); },
              {"[test] path = \"/dev/full\": cannot be written: No space left on device"});
  EXPECT_TRUE(IsCharacterDevice("/dev/full"));
  WriteFile("/dev/null", "bytes");
  EXPECT_TRUE(IsCharacterDevice("/dev/null"));
}

TEST(OutputFile, AKilledWritersTemporaryIsRemovedByTheNextWrite) {
  TempDir dir;
  const std::string target = dir / "model.gguf";
  // A writer that dies halfway (_exit: no destructor runs, as with kill -9).
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto* file = new OutputFile("test", "path", target);  // NOLINT(cppcoreguidelines-owning-memory): never freed
    file->Write("half");
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  const std::vector<std::string> left = dir.Entries();
  ASSERT_EQ(left.size(), 1u);
  EXPECT_TRUE(left[0].starts_with(".model.gguf.") && left[0].ends_with(".tmp") &&
              left[0].find("-" + std::to_string(child) + "-") != std::string::npos)
      << left[0];
  // A writer that is still running keeps its temporary; the dead one's goes.
  OutputFile running("test", "path", target);
  running.Write("running");
  WriteFile(target, "whole");
  EXPECT_EQ(Contents(target), "whole");
  EXPECT_EQ(dir.Entries().size(), 2u);  // model.gguf and the running writer's temporary
  EXPECT_FALSE(fs::exists(dir / left[0]));
  running.Commit();
  EXPECT_EQ(Contents(target), "running");
  EXPECT_EQ(dir.Entries(), (std::vector<std::string>{"model.gguf"}));
}

}  // namespace
}  // namespace posenc
