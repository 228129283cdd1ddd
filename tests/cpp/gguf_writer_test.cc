// The GGUF writer: files read back by posenc's reader with every value type,
// tensors of odd shapes placed at aligned offsets with their bits intact, the
// value types as written, every argument error, and atomic writes that leave
// nothing behind when they fail. (tests/python/test_gguf_writer.py reads the
// files with llama.cpp's gguf-py.)
#include "posenc/gguf_writer.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "posenc/gguf.h"
#include "temp_dir.h"
#include "test_util.h"

namespace posenc {
namespace {

using testing::ExpectError;
namespace fs = std::filesystem;

// A fresh directory for each test.
class TempDir : public testing::TempDir {
 public:
  TempDir() : testing::TempDir("gguf-writer") {}
};

std::vector<unsigned char> FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Values whose bits a lossy path would change: signed zero, a subnormal,
// infinities, a NaN with a payload, the extremes, and a ramp.
std::vector<float> Values(std::int64_t count, float start) {
  std::vector<float> values(static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = start + 0.37f * static_cast<float>(i);
  const float specials[] = {-0.0f,
                            std::numeric_limits<float>::denorm_min(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::bit_cast<float>(0x7fc12345u),
                            std::numeric_limits<float>::max(),
                            std::numeric_limits<float>::lowest(),
                            std::numeric_limits<float>::min()};
  for (std::size_t i = 0; i < values.size() && i < std::size(specials); ++i)
    values[i * 3 % values.size()] = specials[i];
  return values;
}

std::uint32_t Bits(float value) { return std::bit_cast<std::uint32_t>(value); }

// The value type number stored right after `key` in the file.
std::uint32_t StoredType(const std::vector<unsigned char>& bytes, const std::string& key) {
  std::vector<unsigned char> needle(8);
  const std::uint64_t length = key.size();
  std::memcpy(needle.data(), &length, 8);
  needle.insert(needle.end(), key.begin(), key.end());
  const auto at = std::search(bytes.begin(), bytes.end(), needle.begin(), needle.end());
  EXPECT_NE(at, bytes.end()) << key;
  if (at == bytes.end()) return 0xffffffffu;
  std::uint32_t type = 0;
  std::memcpy(&type, &*(at + static_cast<std::ptrdiff_t>(needle.size())), 4);
  return type;
}

TEST(GgufWriter, MetadataOfEveryTypeReadsBack) {
  TempDir dir;
  const std::vector<std::string> tokens = {"<s>", "", "héllo", std::string("nul\0byte", 8), "▁the"};
  const std::vector<std::int32_t> int32s = {0, -1, std::numeric_limits<std::int32_t>::min(),
                                            std::numeric_limits<std::int32_t>::max()};
  const std::vector<std::int64_t> int64s = {std::numeric_limits<std::int64_t>::min(), 42,
                                            std::numeric_limits<std::int64_t>::max()};
  const std::vector<float> floats = Values(9, -2.0f);
  GgufWriter writer;
  writer.AddString("general.architecture", "llama")
      .AddString("general.name", "")
      .AddString("posenc.scheme", "rope:yarn")
      .AddBool("posenc.trained", true)
      .AddBool("posenc.frozen", false)
      .AddUint32("llama.context_length", 4000000000u)
      .AddInt32("posenc.step", -7)
      .AddInt64("posenc.tokens_seen", std::int64_t{-1} << 40)
      .AddFloat32("llama.rope.freq_base", 500000.0f)
      .AddFloat32("posenc.nan", std::bit_cast<float>(0x7fc12345u))
      .AddFloat64("posenc.learning_rate", 3e-4)
      .AddStringArray("tokenizer.ggml.tokens", tokens)
      .AddInt32Array("tokenizer.ggml.token_type", int32s)
      .AddInt64Array("posenc.int64s", int64s)
      .AddFloat32Array("tokenizer.ggml.scores", floats)
      .AddStringArray("posenc.no_strings", {})
      .AddFloat32Array("posenc.no_floats", {});
  writer.Write(dir / "meta.gguf");

  const GgufFile file = GgufFile::Open(dir / "meta.gguf");
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(file.alignment(), 32u);
  EXPECT_TRUE(file.tensors().empty());
  const GgufMetadata& m = file.metadata();
  EXPECT_EQ(m.size(), 17u);
  EXPECT_FALSE(m.contains("general.alignment"));  // the default is not recorded (as gguf-py)
  EXPECT_EQ(std::get<std::string>(m.at("general.architecture")), "llama");
  EXPECT_EQ(std::get<std::string>(m.at("general.name")), "");
  EXPECT_EQ(std::get<std::string>(m.at("posenc.scheme")), "rope:yarn");
  EXPECT_EQ(std::get<bool>(m.at("posenc.trained")), true);
  EXPECT_EQ(std::get<bool>(m.at("posenc.frozen")), false);
  EXPECT_EQ(std::get<std::int64_t>(m.at("llama.context_length")), 4000000000);
  EXPECT_EQ(std::get<std::int64_t>(m.at("posenc.step")), -7);
  EXPECT_EQ(std::get<std::int64_t>(m.at("posenc.tokens_seen")), std::int64_t{-1} << 40);
  EXPECT_EQ(std::get<double>(m.at("llama.rope.freq_base")), 500000.0);
  EXPECT_EQ(Bits(static_cast<float>(std::get<double>(m.at("posenc.nan")))), 0x7fc12345u);
  EXPECT_EQ(std::get<double>(m.at("posenc.learning_rate")), 3e-4);
  EXPECT_EQ(std::get<std::vector<std::string>>(m.at("tokenizer.ggml.tokens")), tokens);
  EXPECT_EQ(std::get<std::vector<std::int64_t>>(m.at("tokenizer.ggml.token_type")),
            std::vector<std::int64_t>(int32s.begin(), int32s.end()));
  EXPECT_EQ(std::get<std::vector<std::int64_t>>(m.at("posenc.int64s")), int64s);
  const auto& scores = std::get<std::vector<double>>(m.at("tokenizer.ggml.scores"));
  ASSERT_EQ(scores.size(), floats.size());
  for (std::size_t i = 0; i < floats.size(); ++i) EXPECT_EQ(Bits(static_cast<float>(scores[i])), Bits(floats[i])) << i;
  EXPECT_TRUE(std::get<std::vector<std::string>>(m.at("posenc.no_strings")).empty());
  EXPECT_TRUE(std::get<std::vector<double>>(m.at("posenc.no_floats")).empty());

  // The reader widens every integer to int64 and both floats to double: the
  // types as stored are checked in the bytes (GGUF's numbers).
  const auto bytes = FileBytes(dir / "meta.gguf");
  EXPECT_EQ(StoredType(bytes, "general.architecture"), 8u);
  EXPECT_EQ(StoredType(bytes, "posenc.trained"), 7u);
  EXPECT_EQ(StoredType(bytes, "llama.context_length"), 4u);
  EXPECT_EQ(StoredType(bytes, "posenc.step"), 5u);
  EXPECT_EQ(StoredType(bytes, "posenc.tokens_seen"), 11u);
  EXPECT_EQ(StoredType(bytes, "llama.rope.freq_base"), 6u);
  EXPECT_EQ(StoredType(bytes, "posenc.learning_rate"), 12u);
  EXPECT_EQ(StoredType(bytes, "tokenizer.ggml.tokens"), 9u);
  // Metadata only: the header and pairs, padded to the alignment.
  EXPECT_EQ(bytes.size() % 32, 0u);
}

// Shapes in ggml order, none a multiple of the alignment in bytes.
struct TensorCase {
  std::string name;
  std::vector<std::int64_t> shape;
};
const std::vector<TensorCase> kOddTensors = {
    {"token_embd.weight", {7, 13}},
    {"blk.0.attn_norm.weight", {7}},
    {"blk.0.ffn_up.weight", {7, 3, 5}},
    {"blk.0.one", {1}},
    {"blk.0.ones", {1, 1, 1, 1}},
    {"output.weight", {9, 1, 2, 3}},
    {"exactly_eight", {8}},
    {"a_name_of_sixty_three_bytes_which_is_llama_cpps_longest_name__", {3}},
};

void ExpectTensorsReadBack(std::uint32_t alignment) {
  SCOPED_TRACE("alignment " + std::to_string(alignment));
  TempDir dir;
  std::vector<std::vector<float>> data;
  GgufWriter writer(alignment);
  writer.AddString("general.architecture", "llama");
  for (std::size_t i = 0; i < kOddTensors.size(); ++i) {
    const auto& shape = kOddTensors[i].shape;
    data.push_back(Values(std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>()),
                          static_cast<float>(i)));
    writer.AddTensor(kOddTensors[i].name, shape, data.back());
  }
  writer.Write(dir / "tensors.gguf");

  const GgufFile file = GgufFile::Open(dir / "tensors.gguf");
  EXPECT_EQ(file.alignment(), alignment);
  EXPECT_EQ(file.metadata().contains("general.alignment"), alignment != 32);
  if (alignment != 32) {
    EXPECT_EQ(std::get<std::int64_t>(file.metadata().at("general.alignment")), alignment);
  }
  ASSERT_EQ(file.tensors().size(), kOddTensors.size());
  const std::vector<unsigned char> bytes = FileBytes(dir / "tensors.gguf");
  const auto* const file_start = reinterpret_cast<const std::byte*>(file.tensors()[0].data.data()) -
                                 static_cast<std::ptrdiff_t>(file.tensors()[0].offset);  // the data section
  std::uint64_t expected_offset = 0;
  for (std::size_t i = 0; i < kOddTensors.size(); ++i) {
    const GgufTensorInfo& t = file.tensors()[i];  // in the order added
    SCOPED_TRACE(t.name);
    EXPECT_EQ(t.name, kOddTensors[i].name);
    EXPECT_EQ(t.shape, kOddTensors[i].shape);
    EXPECT_EQ(t.type, GgmlType::kF32);
    EXPECT_EQ(t.offset % alignment, 0u);
    EXPECT_EQ(t.offset, expected_offset);  // packed: each padded to the alignment, no more
    expected_offset += (data[i].size() * 4 + alignment - 1) / alignment * alignment;
    ASSERT_EQ(t.data.size(), data[i].size() * 4);
    EXPECT_EQ(std::memcmp(t.data.data(), data[i].data(), t.data.size()), 0);
    const std::vector<float> dequantized = file.Dequantize(t);
    for (std::size_t j = 0; j < data[i].size(); ++j) EXPECT_EQ(Bits(dequantized[j]), Bits(data[i][j])) << j;
  }
  // The data section starts aligned in the file and ends with the last
  // tensor's padding.
  const std::uint64_t data_start = bytes.size() - expected_offset;
  EXPECT_EQ(data_start % alignment, 0u);
  EXPECT_EQ(std::memcmp(bytes.data() + data_start, file_start, 4), 0);
}

TEST(GgufWriter, TensorsOfOddShapesReadBackBitExactAtAlignedOffsets) {
  ExpectTensorsReadBack(32);
  ExpectTensorsReadBack(8);
  ExpectTensorsReadBack(64);
  ExpectTensorsReadBack(4096);
}

TEST(GgufWriter, AnEmptyWriterWritesAValidFile) {
  TempDir dir;
  GgufWriter().Write(dir / "empty.gguf");
  const GgufFile file = GgufFile::Open(dir / "empty.gguf");
  EXPECT_TRUE(file.metadata().empty());
  EXPECT_TRUE(file.tensors().empty());
  EXPECT_EQ(FileBytes(dir / "empty.gguf").size(), 32u);  // a 24-byte header padded to 32
}

TEST(GgufWriter, WritesTheSameBytesAgainAndReplacesAFile) {
  TempDir dir;
  const std::vector<float> data = Values(6, 1.0f);
  GgufWriter writer;
  writer.AddString("general.architecture", "llama").AddTensor("w", {3, 2}, data);
  std::ofstream(dir / "model.gguf") << "an older checkpoint";
  writer.Write(dir / "model.gguf");
  writer.Write(dir / "again.gguf");
  EXPECT_EQ(FileBytes(dir / "model.gguf"), FileBytes(dir / "again.gguf"));
  EXPECT_EQ(GgufFile::Open(dir / "model.gguf").Tensor("w").shape, (std::vector<std::int64_t>{3, 2}));
  EXPECT_EQ(dir.Entries(), (std::vector<std::string>{"again.gguf", "model.gguf"}));  // no temporaries
  // The permissions a plain open gives (0666 less the umask), not mkstemp's 0600.
  const mode_t umask_bits = ::umask(0);
  ::umask(umask_bits);
  struct stat info {};
  ASSERT_EQ(::stat((dir / "again.gguf").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0666 & ~umask_bits);
}

TEST(GgufWriter, ARelativePathIsWrittenInTheCurrentDirectory) {
  TempDir dir;
  const fs::path previous = fs::current_path();
  fs::current_path(dir.path());
  GgufWriter().AddBool("b", true).Write("relative.gguf");
  fs::current_path(previous);
  EXPECT_EQ(dir.Entries(), (std::vector<std::string>{"relative.gguf"}));
  EXPECT_EQ(std::get<bool>(GgufFile::Open(dir / "relative.gguf").metadata().at("b")), true);
}

TEST(GgufWriter, RefusesARepeatedOrEmptyKey) {
  GgufWriter writer;
  writer.AddString("general.name", "tiny");
  ExpectError([&] { writer.AddString("general.name", "again"); },
              {"[gguf write] key = \"general.name\": is added twice (each metadata key appears once)"});
  ExpectError([&] { writer.AddUint32("general.name", 1); }, {"key = \"general.name\": is added twice"});
  ExpectError([&] { writer.AddFloat32Array("general.name", {}); }, {"key = \"general.name\": is added twice"});
  ExpectError([&] { writer.AddBool("", true); }, {"[gguf write] key = \"\": must not be empty"});
  ExpectError([&] { writer.AddInt64(std::string(65536, 'k'), 1); }, {"key = 65536 bytes: must be at most 65535 bytes"});
  ExpectError([&] { writer.AddUint32("general.alignment", 64); },
              {"key = \"general.alignment\": is set by GgufWriter's alignment (constructor argument)"});
  ExpectError([&] { GgufWriter(64).AddUint32("general.alignment", 64); }, {"key = \"general.alignment\""});
}

TEST(GgufWriter, RefusesStringsPosencCouldNotReadBack) {
  const std::string too_long((std::size_t{1} << 24) + 1, 'x');
  ExpectError([&] { GgufWriter().AddString("general.license", too_long); },
              {"[gguf write] general.license = 16777217 bytes: must be at most 16 MiB"});
  const std::vector<std::string> items = {"ok", too_long};
  ExpectError([&] { GgufWriter().AddStringArray("tokenizer.ggml.tokens", items); },
              {"tokenizer.ggml.tokens[1] = 16777217 bytes: must be at most 16 MiB"});
}

TEST(GgufWriter, AFailedAddLeavesTheWriterAsItWas) {
  TempDir dir;
  GgufWriter writer;
  writer.AddString("a", "x");
  EXPECT_THROW(writer.AddString("a", "y"), Error);
  EXPECT_THROW(writer.AddTensor("t", {2}, std::vector<float>(3)), Error);
  writer.AddTensor("t", {3}, std::vector<float>(3));  // the name was not taken by the failed add
  writer.Write(dir / "f.gguf");
  const GgufFile file = GgufFile::Open(dir / "f.gguf");
  EXPECT_EQ(file.metadata().size(), 1u);
  EXPECT_EQ(std::get<std::string>(file.metadata().at("a")), "x");
  EXPECT_EQ(file.tensors().size(), 1u);
}

TEST(GgufWriter, RefusesBadTensorNames) {
  const std::vector<float> data(4);
  GgufWriter writer;
  writer.AddTensor("w", {4}, data);
  ExpectError(
      [&] {
        writer.AddTensor("w", {2, 2}, data);
      },
      {"[gguf write] tensor name = \"w\": is added twice (each tensor name appears once)"});
  ExpectError([&] { writer.AddTensor("", {4}, data); }, {"[gguf write] tensor name = \"\": must not be empty"});
  ExpectError([&] { writer.AddTensor(std::string(64, 'n'), {4}, data); },
              {"must be at most 63 bytes (llama.cpp's GGML_MAX_NAME - 1)"});
  // A tensor and a key may share a name: they are different namespaces.
  EXPECT_NO_THROW(writer.AddBool("w", true));
}

TEST(GgufWriter, RefusesShapesThatDoNotFitTheData) {
  const std::vector<float> six(6);
  GgufWriter writer;
  ExpectError(
      [&] {
        writer.AddTensor("w", {4, 2}, six);
      },
      {"[gguf write] w.shape = [4, 2]: its product must be the number of values given (6)"});
  ExpectError([&] { writer.AddTensor("w", {7}, six); }, {"w.shape = [7]: its product must be"});
  ExpectError(
      [&] {
        writer.AddTensor("w", {3, 0}, six);
      },
      {"[gguf write] w.shape = [3, 0]: every dim must be from 1 to 2^40"});
  ExpectError([&] { writer.AddTensor("w", {-3, -2}, six); }, {"w.shape = [-3, -2]: every dim must be from 1"});
  ExpectError([&] { writer.AddTensor("w", {6, std::int64_t{1} << 41}, six); }, {"every dim must be from 1 to 2^40"});
  // Products that overflow 64 bits are not the data size either.
  ExpectError(
      [&] {
        writer.AddTensor("w", {6, std::int64_t{1} << 40, std::int64_t{1} << 40}, six);
      },
      {"its product must be the number of values given (6)"});
  ExpectError([&] { writer.AddTensor("w", std::span<const std::int64_t>(), six); },
              {"[gguf write] w.shape = []: must have 1 to 4 dims (ggml order)"});
  ExpectError([&] { writer.AddTensor("w", {1, 1, 1, 1, 6}, six); }, {"w.shape = [1, 1, 1, 1, 6]: must have 1 to 4"});
  ExpectError([&] { writer.AddTensor("w", {1}, std::span<const float>()); }, {"given (0)"});
}

TEST(GgufWriter, RefusesAnAlignmentThatIsNotAPowerOfTwoFrom8) {
  ExpectError([] { GgufWriter writer(48); }, {"[gguf write] alignment = 48: must be a power of two from 8 to 1048576"});
  ExpectError([] { GgufWriter writer(4); }, {"alignment = 4:"});
  ExpectError([] { GgufWriter writer(0); }, {"alignment = 0:"});
  ExpectError([] { GgufWriter writer(1u << 21); }, {"alignment = 2097152:"});
}

TEST(GgufWriter, ATargetInAMissingDirectoryLeavesNothing) {
  TempDir dir;
  GgufWriter writer;
  writer.AddTensor("w", {2}, std::vector<float>{1, 2});
  const std::string target = dir / "missing/model.gguf";
  ExpectError([&] { writer.Write(target); },
              {("[gguf write] path = \"" + target + "\": cannot be written: No such file or directory").c_str()});
  EXPECT_TRUE(dir.Entries().empty());
}

TEST(GgufWriter, ATargetThatIsADirectoryLeavesNothing) {
  TempDir dir;
  fs::create_directory(dir / "model.gguf");
  GgufWriter writer;
  writer.AddTensor("w", {2}, std::vector<float>{1, 2});
  ExpectError([&] { writer.Write(dir / "model.gguf"); },
              {"path = \"", "model.gguf\": is a directory, not a file that can be replaced"});
  ExpectError([&] { writer.Write(dir.path() + "/model.gguf/"); }, {"is a directory"});
  EXPECT_EQ(dir.Entries(), (std::vector<std::string>{"model.gguf"}));  // no temporary beside it
  EXPECT_TRUE(fs::is_empty(dir / "model.gguf"));                       // nor inside it
}

TEST(GgufWriter, AWriteThatFailsHalfwayKeepsThePreviousFileAndLeavesNoTemporary) {
  TempDir dir;
  GgufWriter().AddBool("old", true).Write(dir / "model.gguf");
  const auto before = FileBytes(dir / "model.gguf");
  GgufWriter writer;
  writer.AddBool("new", true).AddTensor("w", {1000}, std::vector<float>(1000, 1.0f));
  // A file size limit makes write(2) fail with EFBIG after the first 1000
  // bytes, as a full disk would (ENOSPC), and works for root too.
  rlimit previous{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &previous), 0);
  const auto previous_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit limit = previous;
  limit.rlim_cur = 1000;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
  ExpectError([&] { writer.Write(dir / "model.gguf"); }, {"model.gguf\": cannot be written: File too large"});
  ::setrlimit(RLIMIT_FSIZE, &previous);
  std::signal(SIGXFSZ, previous_handler);
  EXPECT_EQ(FileBytes(dir / "model.gguf"), before);
  EXPECT_EQ(dir.Entries(), (std::vector<std::string>{"model.gguf"}));
}

// The rules of posenc/output_file.h (tests/cpp/output_file_test.cc has them
// all): a FIFO is refused and stays a FIFO, a symlink's target is written and
// the link stays, /dev/full is an error naming it.
TEST(GgufWriter, WritesOnlyWhatAnOutputMayBe) {
  TempDir dir;
  GgufWriter writer;
  writer.AddTensor("w", {2}, std::vector<float>{1, 2});
  ASSERT_EQ(::mkfifo((dir / "pipe.gguf").c_str(), 0600), 0);
  ExpectError([&] { writer.Write(dir / "pipe.gguf"); },
              {"[gguf write] path = \"", "pipe.gguf\": is a FIFO (named pipe), not a regular file"});
  EXPECT_TRUE(fs::is_fifo(dir / "pipe.gguf"));
  GgufWriter().AddBool("old", true).Write(dir / "model.gguf");
  fs::create_symlink("model.gguf", dir / "link.gguf");
  writer.Write(dir / "link.gguf");
  EXPECT_TRUE(fs::is_symlink(dir / "link.gguf"));
  EXPECT_EQ(GgufFile::Open(dir / "model.gguf").tensors().size(), 1u);
  EXPECT_EQ(dir.Entries(), (std::vector<std::string>{"link.gguf", "model.gguf", "pipe.gguf"}));
  fs::create_symlink("/dev/full", dir / "full.gguf");
  ExpectError([&] { writer.Write(dir / "full.gguf"); }, {"full.gguf\": cannot be written: No space left on device"});
  EXPECT_TRUE(fs::is_symlink(dir / "full.gguf"));
}

}  // namespace
}  // namespace posenc
