// The GGUF reader: metadata of every type, tensor placement, dequantization
// of hand-built blocks, and corrupt files rejected with clear errors.
#include "posenc/gguf.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <span>

#include "gguf_builder.h"
#include "posenc/dtype.h"
#include "test_util.h"

namespace posenc {
namespace {

using testing::ExpectError;
using testing::GgufBuilder;

GgufFile ParseBytes(const std::vector<unsigned char>& bytes) {
  return GgufFile::Parse(std::as_bytes(std::span(bytes)));
}

std::vector<unsigned char> Half(float value) {
  const std::uint16_t bits = F32ToF16(value);
  return {static_cast<unsigned char>(bits & 0xFF), static_cast<unsigned char>(bits >> 8)};
}

TEST(Gguf, MetadataOfEveryValueType) {
  const auto bytes = GgufBuilder()
                         .Text("general.architecture", "llama")
                         .Scalar("u8", 0, std::uint8_t{200})
                         .Scalar("i8", 1, std::int8_t{-5})
                         .Scalar("u16", 2, std::uint16_t{60000})
                         .Scalar("i16", 3, std::int16_t{-300})
                         .Scalar("u32", 4, std::uint32_t{4000000000u})
                         .Scalar("i32", 5, std::int32_t{-7})
                         .Scalar("f32", 6, 0.5f)
                         .Scalar("bool", 7, std::uint8_t{1})
                         .Scalar("u64", 10, std::uint64_t{1} << 40)
                         .Scalar("i64", 11, std::int64_t{-1} << 40)
                         .Scalar("f64", 12, 0.1)
                         .Array("ints", 5, std::vector<std::int32_t>{1, -2, 3})
                         .Array("floats", 6, std::vector<float>{0.25f, -1.5f})
                         .Bytes();
  const GgufFile file = ParseBytes(bytes);
  const auto& m = file.metadata();
  EXPECT_EQ(file.version(), 3u);
  EXPECT_EQ(std::get<std::string>(m.at("general.architecture")), "llama");
  EXPECT_EQ(std::get<std::int64_t>(m.at("u8")), 200);
  EXPECT_EQ(std::get<std::int64_t>(m.at("i8")), -5);
  EXPECT_EQ(std::get<std::int64_t>(m.at("u16")), 60000);
  EXPECT_EQ(std::get<std::int64_t>(m.at("i16")), -300);
  EXPECT_EQ(std::get<std::int64_t>(m.at("u32")), 4000000000);
  EXPECT_EQ(std::get<std::int64_t>(m.at("i32")), -7);
  EXPECT_EQ(std::get<double>(m.at("f32")), 0.5);
  EXPECT_EQ(std::get<bool>(m.at("bool")), true);
  EXPECT_EQ(std::get<std::int64_t>(m.at("u64")), std::int64_t{1} << 40);
  EXPECT_EQ(std::get<std::int64_t>(m.at("i64")), -(std::int64_t{1} << 40));
  EXPECT_EQ(std::get<double>(m.at("f64")), 0.1);
  EXPECT_EQ(std::get<std::vector<std::int64_t>>(m.at("ints")), (std::vector<std::int64_t>{1, -2, 3}));
  EXPECT_EQ(std::get<std::vector<double>>(m.at("floats")), (std::vector<double>{0.25, -1.5}));
}

TEST(Gguf, TensorsAreAlignedAndDequantized) {
  // Q4_0 block: d = 0.5, nibble j (low) = j % 16, high = 15 - j % 16.
  std::vector<unsigned char> q4 = Half(0.5f);
  for (int j = 0; j < 16; ++j) q4.push_back(static_cast<unsigned char>(j | ((15 - j) << 4)));
  // Q8_0 block: d = 0.25, values -16..15.
  std::vector<unsigned char> q8 = Half(0.25f);
  for (int j = 0; j < 32; ++j) q8.push_back(static_cast<unsigned char>(static_cast<std::int8_t>(j - 16)));
  std::vector<unsigned char> f32(8);
  const float values[2] = {1.5f, -2.0f};
  std::memcpy(f32.data(), values, 8);
  const auto bytes = GgufBuilder(2, 64)
                         .Scalar("general.alignment", 4, std::uint32_t{64})
                         .Tensor("a.weight", {32}, 2, q4)
                         .Tensor("b.weight", {32, 1}, 8, q8)
                         .Tensor("c.bias", {2}, 0, f32)
                         .Bytes();
  const GgufFile file = ParseBytes(bytes);
  EXPECT_EQ(file.alignment(), 64u);
  ASSERT_EQ(file.tensors().size(), 3u);
  const auto a = file.Dequantize(file.Tensor("a.weight"));
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(a[j], (j - 8) * 0.5f);
    EXPECT_EQ(a[j + 16], (15 - j - 8) * 0.5f);
  }
  const auto b = file.Dequantize(file.Tensor("b.weight"));
  for (int j = 0; j < 32; ++j) EXPECT_EQ(b[j], (j - 16) * 0.25f);
  EXPECT_EQ(file.Dequantize(file.Tensor("c.bias")), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(file.Tensor("b.weight").Rows(), 1);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(file.Tensor("b.weight").data.data()) -
                reinterpret_cast<std::uintptr_t>(bytes.data()),
            192u + 64u);  // a 183-byte header padded to 192, then a.weight's 18 bytes padded to 64
  ExpectError([&] { file.Tensor("missing"); }, {"[gguf] tensor = \"missing\"", "not in the file"});
}

TEST(Gguf, EveryTruncationIsAnErrorNeverACrash) {
  std::vector<unsigned char> q8 = Half(1.0f);
  q8.resize(34, 7);
  const auto bytes = GgufBuilder()
                         .Text("general.architecture", "llama")
                         .Array("tokenizer.ggml.scores", 6, std::vector<float>{0.5f, 1.5f})
                         .Tensor("t", {32}, 8, q8)
                         .Bytes();
  ASSERT_NO_THROW(ParseBytes(bytes));
  for (std::size_t size = 0; size + 1 < bytes.size() - 30; ++size) {
    const std::vector<unsigned char> prefix(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(size));
    EXPECT_THROW(ParseBytes(prefix), Error) << "prefix of " << size << " bytes";
  }
}

TEST(Gguf, CorruptFieldsAreNamed) {
  auto bytes = GgufBuilder().Text("k", "v").Bytes();
  auto bad_magic = bytes;
  bad_magic[0] = 'X';
  ExpectError([&] { ParseBytes(bad_magic); }, {"[gguf] magic", "not a GGUF file"});
  ExpectError([&] { ParseBytes(GgufBuilder(1).Bytes()); }, {"version = 1", "must be 2 or 3"});
  auto huge_count = bytes;
  huge_count[16] = 0xFF;  // kv_count low byte
  huge_count[23] = 0x7F;
  ExpectError([&] { ParseBytes(huge_count); }, {"kv_count", "corrupt"});
  ExpectError([&] { ParseBytes(GgufBuilder().Scalar("x", 99, std::uint8_t{0}).Bytes()); },
              {"x.type = 99", "not a GGUF value type"});
  ExpectError([&] { ParseBytes(GgufBuilder().Scalar("b", 7, std::uint8_t{2}).Bytes()); }, {"b = 2", "0 or 1"});
  ExpectError([&] { ParseBytes(GgufBuilder().Text("k", "a").Text("k", "b").Bytes()); }, {"k = repeated"});
  ExpectError([&] { ParseBytes(GgufBuilder().Tensor("t", {32}, 77, std::vector<unsigned char>(34)).Bytes()); },
              {"tensor type = 77", "unsupported ggml type"});
  ExpectError([&] { ParseBytes(GgufBuilder().Tensor("t", {30}, 8, std::vector<unsigned char>(34)).Bytes()); },
              {"t.shape[0] = 30", "block size 32"});
  ExpectError([&] { ParseBytes(GgufBuilder().Tensor("t", {1, 2, 3, 4, 5}, 0, {}).Bytes()); }, {"t.n_dims = 5"});
  ExpectError(
      [&] {
        ParseBytes(GgufBuilder().Tensor("t", {std::uint64_t{1} << 40, std::uint64_t{1} << 40}, 0, {}).Bytes());
      },
      {"overflows"});
  ExpectError([&] { ParseBytes(GgufBuilder().Tensor("t", {64}, 0, std::vector<unsigned char>(16)).Bytes()); },
              {"extends past the end of the file"});
  ExpectError([&] { ParseBytes(GgufBuilder().Scalar("general.alignment", 4, std::uint32_t{3}).Bytes()); },
              {"general.alignment = 3", "power of two"});
}

// Where tensor `name`'s type (u32) and offset (u64) are in GgufBuilder bytes:
// after its name, n_dims and the extents.
std::size_t TypeFieldOf(const std::vector<unsigned char>& bytes, const std::string& name, std::size_t dims) {
  std::vector<unsigned char> key(8, 0);  // the name as GGUF writes it: its length (u64), then its bytes
  key[0] = static_cast<unsigned char>(name.size());
  key.insert(key.end(), name.begin(), name.end());
  const auto at = std::search(bytes.begin(), bytes.end(), key.begin(), key.end());
  return static_cast<std::size_t>(at - bytes.begin()) + key.size() + 4 + 8 * dims;
}

// The tensors' layout must be the one the header describes, as llama.cpp's
// reader requires: in order of offset, each where the previous one ends
// (padded), and the data section no longer than the last one. A type id or
// an offset edited in place used to load (an F32 read as F16, a Q8_0 read as
// F32 across its neighbour, an offset moved by 32 bytes).
TEST(Gguf, TensorLayoutMustMatchTheHeader) {
  std::vector<unsigned char> q8 = Half(0.25f);
  q8.resize(34, 3);
  const auto bytes = GgufBuilder()
                         .Tensor("a", {64}, 0, std::vector<unsigned char>(256, 0))
                         .Tensor("b", {32}, 8, q8)
                         .Tensor("c", {64}, 0, std::vector<unsigned char>(256, 0))
                         .Bytes();
  ASSERT_NO_THROW(ParseBytes(bytes));
  const auto with = [&](const std::string& name, std::size_t skip, auto value) {
    auto edited = bytes;
    std::memcpy(&edited[TypeFieldOf(bytes, name, 1) + skip], &value, sizeof value);
    return edited;
  };
  // a: F32 -> F16 (128 bytes, not 256): b no longer starts where a ends.
  ExpectError([&] { ParseBytes(with("a", 0, std::uint32_t{1})); },
              {"[gguf] b.offset = 256: must be 128, where a (F16, 128 bytes) ends, padded to general.alignment = 32",
               "corrupt"});
  // b: Q8_0 -> F32 (128 bytes) would read across c.
  ExpectError([&] { ParseBytes(with("b", 0, std::uint32_t{0})); },
              {"[gguf] c.offset = 320: must be 384, where b (F32, 128 bytes) ends"});
  // The last tensor: F32 -> F16 leaves 128 bytes no tensor holds.
  ExpectError([&] { ParseBytes(with("c", 0, std::uint32_t{1})); },
              {"[gguf] c.type = F16: the last tensor, c (F16, 128 bytes), ends the data section at byte 448",
               "the file holds 576"});
  // An offset moved by 32 (still aligned, still inside the file).
  ExpectError([&] { ParseBytes(with("b", 4, std::uint64_t{256 + 32})); }, {"[gguf] b.offset = 288: must be 256"});
  // Two tensors at one offset overlap.
  ExpectError([&] { ParseBytes(with("c", 4, std::uint64_t{0})); },
              {"[gguf] c.offset = 0: must be 256, where a (F32, 256 bytes) ends"});
  ExpectError([&] { ParseBytes(with("a", 4, std::uint64_t{32})); },
              {"[gguf] a.offset = 32: must be 0, the start of the data section"});
}

// Names from the file reach messages escaped: a NUL does not cut the message
// short, and no control byte reaches the terminal raw.
TEST(Gguf, NamesInMessagesAreEscaped) {
  const std::string key("a\0b\x1b[31m", 8);
  try {
    ParseBytes(GgufBuilder().Scalar(key, 7, std::uint8_t{2}).Bytes());
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_THAT(what, ::testing::HasSubstr("a\\x00b\\x1b[31m = 2: a bool must be 0 or 1"));
    EXPECT_EQ(what.find('\x1b'), std::string::npos);
  }
}

// The typed reads every metadata reader shares.
TEST(GgufMetadata, TypedReadsNameTheKeyAndTheRule) {
  const GgufMetadata meta{
      {"n", std::int64_t{8}}, {"half", 2.5}, {"name", std::string("x")}, {"list", std::vector<std::string>{"a"}}};
  EXPECT_EQ(GgufCount(meta, "n", "t"), 8);
  EXPECT_EQ(GgufCount(meta, "absent", "t"), std::nullopt);
  EXPECT_EQ(GgufNumber(meta, "half", "t"), 2.5);
  EXPECT_EQ(GgufString(meta, "name", "t"), "x");
  EXPECT_EQ(GgufFind<std::vector<std::string>>(meta, "list", "t")->size(), 1u);
  ExpectError([&] { GgufCount(meta, "half", "t"); }, {"[t] half = 2.5: must be a whole number >= 1"});
  ExpectError([&] { GgufNumber(meta, "name", "t"); }, {"[t] name = non-numeric: must be a number"});
  ExpectError([&] { GgufString(meta, "n", "t"); }, {"[t] n = a value of another type: must be a string"});
  ExpectError([&] { RequireGgufCount(meta, "absent", "llama", "a llama GGUF must have it"); },
              {"[llama] absent = missing: a llama GGUF must have it"});
  // Integers are read exactly, the int64 edges too (through a double,
  // 2^63 - 1 was 9223372036854775808 and refused).
  const std::int64_t max = std::numeric_limits<std::int64_t>::max(), min = std::numeric_limits<std::int64_t>::min();
  const GgufMetadata edges{{"max", max}, {"min", min}, {"big_float", 1e300}};
  EXPECT_EQ(GgufWholeNumber(edges, "max", "t", 0), max);
  ExpectError([&] { GgufWholeNumber(edges, "min", "t", 0); },
              {"[t] min = -9223372036854775808: must be a whole number >= 0"});
  ExpectError([&] { GgufCount(edges, "big_float", "t"); }, {"[t] big_float = 1e+300: must be a whole number >= 1"});
}

TEST(Gguf, OpenNamesThePath) {
  ExpectError([] { GgufFile::Open("/nonexistent/model.gguf"); }, {"/nonexistent/model.gguf", "cannot be opened"});
}

TEST(Gguf, UnsupportedTypesAreNamedWhenDequantized) {
  const auto bytes = GgufBuilder().Tensor("t", {256}, 15, std::vector<unsigned char>(292)).Bytes();
  const GgufFile file = ParseBytes(bytes);
  ExpectError([&] { file.Dequantize(file.Tensor("t")); },
              {"[gguf] t.type = \"Q8_K\": cannot be dequantized by posenc yet"});
}

// A block scale that is inf or NaN is an error naming the tensor, the type,
// the block and the field, for the K-quants and the 32-value types alike.
TEST(Gguf, NonFiniteBlockScalesAreErrors) {
  // Two Q4_K blocks (d, dmin at bytes 0 and 2): the second one's dmin is inf.
  std::vector<unsigned char> q4k(2 * 144, 0x11);
  for (const std::size_t at : {0, 2, 144}) std::memcpy(&q4k[at], Half(0.5f).data(), 2);
  std::memcpy(&q4k[146], Half(INFINITY).data(), 2);
  // Q2_K keeps d and dmin at its end (bytes 80 and 82): d is NaN.
  std::vector<unsigned char> q2k(84, 0x11);
  std::memcpy(&q2k[80], Half(NAN).data(), 2);
  std::memcpy(&q2k[82], Half(0.5f).data(), 2);
  // Q4_1 (d, m at bytes 0 and 2): m is -inf.
  std::vector<unsigned char> q4_1(20, 0x11);
  std::memcpy(&q4_1[0], Half(0.5f).data(), 2);
  std::memcpy(&q4_1[2], Half(-INFINITY).data(), 2);
  const auto bytes = GgufBuilder()
                         .Tensor("blk.0.ffn_up.weight", {512}, 12, q4k)
                         .Tensor("q2k", {256}, 10, q2k)
                         .Tensor("q4_1", {32}, 3, q4_1)
                         .Bytes();
  const GgufFile file = ParseBytes(bytes);
  ExpectError([&] { file.Dequantize(file.Tensor("blk.0.ffn_up.weight")); },
              {"[gguf] blk.0.ffn_up.weight (Q4_K) block 1 dmin = inf: a K-quant super-block scale must be finite"});
  ExpectError([&] { file.Dequantize(file.Tensor("q2k")); },
              {"[gguf] q2k (Q2_K) block 0 d = nan: a K-quant super-block scale must be finite"});
  ExpectError([&] { file.Dequantize(file.Tensor("q4_1")); },
              {"[gguf] q4_1 (Q4_1) block 0 m = -inf: a block's scale and min must be finite"});
  // Nothing is written before the check: the caller's buffer stays as it was.
  const GgufTensorInfo& t = file.Tensor("blk.0.ffn_up.weight");
  std::vector<float> out(512, 7.0f);
  EXPECT_THROW(DequantizeRow(t.type, t.data.data(), out.data(), t.Elements(), t.name), Error);
  EXPECT_EQ(out, std::vector<float>(512, 7.0f));
}

}  // namespace
}  // namespace posenc
