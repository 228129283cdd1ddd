// Learned position tables: strict .npy and safetensors readers (a corrupt
// file is an error, never an out-of-bounds read), the out-of-range
// policies, Su's hierarchical decomposition, and the fast add against the
// reference on every SIMD target.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>

#include "gguf_builder.h"
#include "posenc/dtype.h"
#include "posenc/learned_table.h"
#include "test_util.h"

namespace posenc {
namespace {

using testing::Buffer;
using testing::ExpectError;
using testing::ForEachTarget;
using Bytes = std::vector<std::uint8_t>;

void Append(Bytes& bytes, const void* data, std::size_t n) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  bytes.insert(bytes.end(), p, p + n);
}

// An .npy file as numpy writes it (version 1.0, header padded to 64 bytes).
Bytes MakeNpy(const std::string& dict, const void* data, std::size_t data_bytes, int major = 1) {
  Bytes bytes = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<std::uint8_t>(major), 0};
  const std::size_t preamble = major == 1 ? 10 : 12;
  std::string header = dict;
  while ((preamble + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  const auto length = static_cast<std::uint32_t>(header.size());
  Append(bytes, &length, major == 1 ? 2 : 4);
  Append(bytes, header.data(), header.size());
  Append(bytes, data, data_bytes);
  return bytes;
}

std::vector<float> Ramp(std::int64_t n, float scale = 0.01f) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(i) - 1.0f;
  return v;
}

TEST(Npy, ReadsFloat32Float16Float64) {
  const auto values = Ramp(12);
  const auto t =
      LearnedTable::FromNpy(MakeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (4, 3), }", values.data(), 48));
  EXPECT_EQ(t.rows(), 4);
  EXPECT_EQ(t.dim(), 3);
  EXPECT_EQ(t.source_dtype(), "<f4");
  EXPECT_EQ(std::vector<float>(t.values().begin(), t.values().end()), values);

  std::vector<std::uint16_t> halves;
  halves.reserve(values.size());
  for (float v : values) halves.push_back(F32ToF16(v));
  const auto h =
      LearnedTable::FromNpy(MakeNpy("{'descr': '<f2', 'fortran_order': False, 'shape': (4, 3)}", halves.data(), 24, 2));
  for (int i = 0; i < 12; ++i) EXPECT_EQ(h.values()[i], F16ToF32(halves[i]));

  std::vector<double> doubles(values.begin(), values.end());
  const auto d = LearnedTable::FromNpy(
      MakeNpy("{\"descr\": \"<f8\", \"shape\": (4, 3), \"fortran_order\": False}", doubles.data(), 96, 3));
  EXPECT_EQ(std::vector<float>(d.values().begin(), d.values().end()), values);
}

TEST(Npy, RejectsMalformedFiles) {
  const auto values = Ramp(16);  // room for the "trailing bytes" case
  const std::string good = "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 3), }";
  const auto npy = [&](const std::string& dict, std::size_t data_bytes = 48) {
    return LearnedTable::FromNpy(MakeNpy(dict, values.data(), data_bytes));
  };
  ExpectError([&] { npy("{'descr': '>f4', 'fortran_order': False, 'shape': (4, 3), }"); },
              {"[npy] header.descr = \">f4\"", "'<f4', '<f2' or '<f8'"});
  ExpectError([&] { npy("{'descr': '<i4', 'fortran_order': False, 'shape': (4, 3), }"); }, {"header.descr = \"<i4\""});
  ExpectError([&] { npy("{'descr': '<f4', 'fortran_order': True, 'shape': (4, 3), }"); },
              {"header.fortran_order = True", "C order"});
  ExpectError([&] { npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2, 3), }"); },
              {"header.shape.size() = 3", "must be 2"});
  ExpectError([&] { npy("{'descr': '<f4', 'fortran_order': False, 'shape': (12,), }"); }, {"header.shape.size() = 1"});
  ExpectError([&] { npy("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }", 0); }, {"header.shape[0] = 0"});
  ExpectError([&] { npy(good, 44); }, {"[npy] data size = 44", "48 bytes"});  // truncated
  ExpectError([&] { npy(good, 52); }, {"data size = 52"});                    // trailing bytes
  ExpectError([&] { npy("{'descr': '<f4', 'fortran_order': False}"); }, {"header.shape = missing"});
  ExpectError([&] { npy("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (4, 3)}"); },
              {"header.descr = repeated"});
  ExpectError([&] { npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4, 3), 'extra': 1}"); },
              {"header key = \"extra\""});
  ExpectError([&] { npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4, 3)"); }, {"[npy] header"});
  ExpectError([&] { npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999, 3)}"); },
              {"fit in 64 bits"});
  ExpectError([&] { npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4)}"); },
              {"(overflow)"});
  // Preamble damage.
  Bytes bytes = MakeNpy(good, values.data(), 48);
  Bytes bad_magic = bytes;
  bad_magic[1] = 'X';
  ExpectError([&] { LearnedTable::FromNpy(bad_magic); }, {"[npy] magic"});
  Bytes bad_version = bytes;
  bad_version[6] = 9;
  ExpectError([&] { LearnedTable::FromNpy(bad_version); }, {"version = 9.0"});
  Bytes long_header = bytes;
  long_header[8] = 0xff;
  long_header[9] = 0xff;
  ExpectError([&] { LearnedTable::FromNpy(long_header); }, {"header length = 65535", "must fit in the file"});
  ExpectError([&] { LearnedTable::FromNpy(Bytes(bytes.begin(), bytes.begin() + 7)); }, {"file size = 7"});
  // Every truncation of a good file is an error, none a crash.
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_THROW(LearnedTable::FromNpy(Bytes(bytes.begin(), bytes.begin() + n)), Error) << n;
  }
}

// ------------------------------------------------------------ safetensors

Bytes MakeSafetensors(const std::string& header_json, const Bytes& data) {
  Bytes bytes;
  const std::uint64_t length = header_json.size();
  Append(bytes, &length, 8);
  Append(bytes, header_json.data(), header_json.size());
  bytes.insert(bytes.end(), data.begin(), data.end());
  return bytes;
}

Bytes AsBytes(const std::vector<float>& v) {
  Bytes b(v.size() * 4);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

TEST(Safetensors, ReadsNamedAndOnlyTensors) {
  const auto table = Ramp(6);
  const auto other = Ramp(4, 0.5f);
  Bytes data = AsBytes(table);
  const Bytes more = AsBytes(other);
  data.insert(data.end(), more.begin(), more.end());
  const std::string header =
      R"({"__metadata__": {"format": "pt"},
          "wpe.weight": {"dtype": "F32", "shape": [3, 2], "data_offsets": [0, 24]},
          "other": {"dtype": "F32", "shape": [2, 2], "data_offsets": [24, 40]}})";
  const auto file = MakeSafetensors(header, data);
  const auto t = LearnedTable::FromSafetensors(file, "wpe.weight");
  EXPECT_EQ(t.rows(), 3);
  EXPECT_EQ(t.dim(), 2);
  EXPECT_EQ(std::vector<float>(t.values().begin(), t.values().end()), table);
  EXPECT_EQ(LearnedTable::FromSafetensors(file, "other").values()[3], other[3]);
  ExpectError([&] { LearnedTable::FromSafetensors(file); }, {"[safetensors] tensor = unnamed", "wpe.weight", "other"});
  ExpectError([&] { LearnedTable::FromSafetensors(file, "wte.weight"); },
              {"tensor = \"wte.weight\"", "not in the file"});

  // bf16, a single tensor picked without a name.
  Bytes halves;
  for (float v : table) {
    const std::uint16_t h = F32ToBF16(v);
    Append(halves, &h, 2);
  }
  const auto b = LearnedTable::FromSafetensors(
      MakeSafetensors(R"({"pos": {"dtype": "BF16", "shape": [3, 2], "data_offsets": [0, 12]}})", halves));
  EXPECT_EQ(b.source_dtype(), "BF16");
  EXPECT_EQ(b.values()[5], BF16ToF32(F32ToBF16(table[5])));
}

TEST(Safetensors, RejectsCorruptFiles) {
  const Bytes data = AsBytes(Ramp(6));
  const auto st = [&](const std::string& header, const Bytes& d) {
    return LearnedTable::FromSafetensors(MakeSafetensors(header, d), "t");
  };
  ExpectError([&] { st(R"({"t": {"dtype": "F32", "shape": [3, 2], "data_offsets": [0, 28]}})", data); },
              {"header[\"t\"].data_offsets = [0,28]", "end <= data size 24"});
  ExpectError([&] { st(R"({"t": {"dtype": "F32", "shape": [3, 2], "data_offsets": [4, 24]}})", data); },
              {"must span", "24 bytes"});
  ExpectError([&] { st(R"({"t": {"dtype": "F32", "shape": [3, 2], "data_offsets": [20, 8]}})", data); },
              {"begin <= end"});
  ExpectError([&] { st(R"({"t": {"dtype": "F32", "shape": [6], "data_offsets": [0, 24]}})", data); },
              {"shape = [6]", "2-D"});
  ExpectError([&] { st(R"({"t": {"dtype": "I32", "shape": [3, 2], "data_offsets": [0, 24]}})", data); },
              {"dtype = \"I32\"", "F32, F16, BF16 or F64"});
  ExpectError([&] { st(R"({"t": {"dtype": "Q4", "shape": [3, 2], "data_offsets": [0, 24]}})", data); },
              {"dtype = \"Q4\"", "not a safetensors dtype"});
  ExpectError([&] { st(R"({"t": {"dtype": "F32", "shape": [3, -2], "data_offsets": [0, 24]}})", data); },
              {"non-negative integers"});
  ExpectError(
      [&] { st(R"({"t": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 24]}})", data); },
      {"overflows"});
  ExpectError([&] { st(R"({"t": {"dtype": "F32", "shape": [3, 2]}})", data); }, {"data_offsets = missing"});
  ExpectError([&] { st(R"({"t": [1, 2]})", data); }, {"header[\"t\"] = array"});
  ExpectError([&] { st(R"({"t": {"dtype": "F32", "shape": [3, 2], "data_offsets": [0, 24]})", data); },
              {"header = invalid JSON"});
  ExpectError([&] { st(R"([1, 2, 3])", data); }, {"header = array", "JSON object"});
  // Another entry's bad offsets make the file corrupt even if ours is fine.
  ExpectError(
      [&] {
        st(R"({"t": {"dtype": "F32", "shape": [3, 2], "data_offsets": [0, 24]},
           "u": {"dtype": "F32", "shape": [1, 1], "data_offsets": [24, 28]}})",
           data);
      },
      {"header[\"u\"].data_offsets"});
  // Header length past the end, and every truncation.
  Bytes file = MakeSafetensors(R"({"t": {"dtype": "F32", "shape": [3, 2], "data_offsets": [0, 24]}})", data);
  Bytes huge = file;
  huge[7] = 0x7f;
  ExpectError([&] { LearnedTable::FromSafetensors(huge); }, {"[safetensors] header length", "must fit in the file"});
  for (std::size_t n = 0; n < file.size(); ++n) {
    EXPECT_THROW(LearnedTable::FromSafetensors(Bytes(file.begin(), file.begin() + n)), Error) << n;
  }
}

// Random byte flips never crash the readers: each parse returns a table
// or throws posenc::Error.
TEST(TableReaders, SurviveRandomCorruption) {
  const auto values = Ramp(12);
  const Bytes npy = MakeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (4, 3), }", values.data(), 48);
  const Bytes st =
      MakeSafetensors(R"({"t": {"dtype": "F32", "shape": [4, 3], "data_offsets": [0, 48]}})", AsBytes(values));
  std::mt19937 rng(7);
  for (int trial = 0; trial < 3000; ++trial) {
    for (const Bytes* base : {&npy, &st}) {
      Bytes b = *base;
      const int flips = 1 + static_cast<int>(rng() % 3);
      for (int f = 0; f < flips; ++f) b[rng() % b.size()] = static_cast<std::uint8_t>(rng());
      try {
        const auto t = base == &npy ? LearnedTable::FromNpy(b) : LearnedTable::FromSafetensors(b);
        EXPECT_EQ(static_cast<std::int64_t>(t.values().size()), t.rows() * t.dim());
      } catch (const Error&) {
      }
    }
  }
}

// GPT-2 style: position_embd.weight, ggml shape {dim, rows}, stored as F16.
TEST(Gguf, ReadsPositionTableFromGgufTensor) {
  const std::int64_t rows = 5, dim = 3;
  std::vector<unsigned char> data;
  for (std::int64_t i = 0; i < rows * dim; ++i) {
    const std::uint16_t h = F32ToF16(0.25f * static_cast<float>(i) - 1.0f);
    data.push_back(static_cast<unsigned char>(h & 0xFF));
    data.push_back(static_cast<unsigned char>(h >> 8));
  }
  const auto bytes = testing::GgufBuilder()
                         .Text("general.architecture", "gpt2")
                         .Tensor("position_embd.weight", {dim, rows}, 1, data)
                         .Tensor("token_embd.weight", {dim}, 0, std::vector<unsigned char>(dim * 4))
                         .Bytes();
  const auto file = GgufFile::Parse(std::as_bytes(std::span(bytes)));
  const LearnedTable table = LearnedTable::FromGguf(file);
  EXPECT_EQ(table.rows(), rows);
  EXPECT_EQ(table.dim(), dim);
  EXPECT_EQ(table.source_dtype(), "F16");
  EXPECT_EQ(table.Lookup({}, 4)[2], 0.25f * 14 - 1.0f);
  testing::ExpectError([&] { LearnedTable::FromGguf(file, "token_embd.weight"); },
                       {"token_embd.weight.shape.size() = 1", "2-D"});
  testing::ExpectError([&] { LearnedTable::FromGguf(file, "missing"); }, {"tensor = \"missing\""});
}

TEST(TableFiles, LoadByExtensionAndNameThePathInErrors) {
  const auto values = Ramp(12);
  const std::string dir = ::testing::TempDir();
  const std::string npy_path = dir + "/posenc_table_test.npy";
  const Bytes npy = MakeNpy("{'descr': '<f4', 'fortran_order': False, 'shape': (4, 3), }", values.data(), 48);
  std::ofstream(npy_path, std::ios::binary).write(reinterpret_cast<const char*>(npy.data()), npy.size());
  EXPECT_EQ(LearnedTable::Load(npy_path).rows(), 4);
  const std::string bad_path = dir + "/posenc_table_bad.npy";
  std::ofstream(bad_path, std::ios::binary).write(reinterpret_cast<const char*>(npy.data()), 40);
  ExpectError([&] { LearnedTable::Load(bad_path); }, {"[npy]", bad_path.c_str()});
  ExpectError([&] { LearnedTable::Load(dir + "/missing.npy"); }, {"cannot be opened"});
  ExpectError([&] { LearnedTable::Load(dir + "/table.bin"); }, {"path", ".npy, .safetensors or .gguf"});
  std::remove(npy_path.c_str());
  std::remove(bad_path.c_str());
}

// ------------------------------------------------------------- lookups

LearnedTable RandomTable(std::int64_t rows, std::int64_t dim, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(static_cast<std::size_t>(rows * dim));
  for (float& x : v) x = dist(rng);
  return LearnedTable(rows, dim, v);
}

TEST(LearnedTableLookup, PoliciesAndRowOffset) {
  const auto table = RandomTable(10, 4, 1);
  const LearnedTableSpec error{};
  EXPECT_EQ(table.Capacity(error), 10);
  EXPECT_EQ(table.Lookup(error, 9)[2], table.RowData(9)[2]);
  ExpectError([&] { table.Lookup(error, 10); },
              {"[learned_table] position = 10", "must be < 10", "out_of_range = error"});
  ExpectError([&] { table.Lookup(error, -1); }, {"position = -1", "negative"});
  // OPT/BART: position p reads row p + 2.
  const LearnedTableSpec opt{.row_offset = 2};
  EXPECT_EQ(table.Capacity(opt), 8);
  EXPECT_EQ(table.Lookup(opt, 0)[1], table.RowData(2)[1]);
  ExpectError([&] { table.Lookup(opt, 8); }, {"position = 8", "must be < 8", "row_offset 2"});
  const LearnedTableSpec clamp{.out_of_range = OutOfRangePolicy::kClamp};
  EXPECT_EQ(table.Lookup(clamp, 1000)[3], table.RowData(9)[3]);
  ExpectError([] { LearnedTableSpec{.row_offset = -1}.Validate(); }, {"row_offset = -1"});
  ExpectError([] { LearnedTableSpec{.out_of_range = OutOfRangePolicy::kHierarchical, .alpha = 1.0}.Validate(); },
              {"alpha = 1", "[0, 1)"});
  ExpectError([] { LearnedTable(2, 3, std::vector<float>(5)); }, {"values.size() = 5", "rows * dim"});
  ExpectError([] { LearnedTable(1, 2, std::vector<float>{0.0f, NAN}); }, {"values[1] = nan", "finite"});
  EXPECT_EQ(ParseOutOfRangePolicy("hierarchical"), OutOfRangePolicy::kHierarchical);
  ExpectError([] { ParseOutOfRangePolicy("wrap"); }, {"out_of_range = \"wrap\""});
}

// Su's decomposition reproduces positions 0..n-1 exactly and extends to n^2.
TEST(LearnedTableLookup, HierarchicalDecomposition) {
  const std::int64_t n = 12, dim = 5;
  const auto table = RandomTable(n + 2, dim, 3);
  const LearnedTableSpec spec{.row_offset = 2, .out_of_range = OutOfRangePolicy::kHierarchical, .alpha = 0.4};
  EXPECT_EQ(table.Capacity(spec), n * n);
  for (std::int64_t p = 0; p < n; ++p) {
    const auto row = table.Lookup(spec, p);
    for (std::int64_t d = 0; d < dim; ++d) ASSERT_EQ(row[d], table.RowData(2 + p)[d]) << p;
  }
  // The formula itself gives p_j for i = 0 (to rounding), and beyond:
  const auto p = [&](std::int64_t r, std::int64_t d) { return static_cast<double>(table.RowData(2 + r)[d]); };
  const double alpha = 0.4;
  double worst_identity = 0;
  for (std::int64_t m = 0; m < n * n; ++m) {
    const std::int64_t i = m / n, j = m % n;
    const auto row = table.RowF64(spec, m);
    for (std::int64_t d = 0; d < dim; ++d) {
      const double ui = (p(i, d) - alpha * p(0, d)) / (1 - alpha);
      const double uj = (p(j, d) - alpha * p(0, d)) / (1 - alpha);
      const double expect = alpha * ui + (1 - alpha) * uj;
      ASSERT_NEAR(row[d], expect, 1e-15) << m;
      if (i == 0) worst_identity = std::max(worst_identity, std::abs(expect - p(j, d)));
    }
  }
  EXPECT_LT(worst_identity, 1e-15);
  ExpectError([&] { table.Lookup(spec, n * n); }, {"position = 144", "must be < 144", "hierarchical"});
}

// ----------------------------------------------------------------- add

TEST(LearnedTableAdd, FastMatchesReferenceOnEveryTarget) {
  for (const std::int64_t dim : {1, 3, 8, 17, 33, 64, 100}) {
    const auto table = RandomTable(20, dim, static_cast<std::uint32_t>(dim));
    for (const auto policy : {OutOfRangePolicy::kError, OutOfRangePolicy::kClamp, OutOfRangePolicy::kHierarchical}) {
      const LearnedTableSpec spec{.row_offset = 2, .out_of_range = policy};
      for (const DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
        SCOPED_TRACE("dim=" + std::to_string(dim) + " policy=" + std::string(OutOfRangePolicyName(policy)) +
                     " dtype=" + std::string(DTypeName(dtype)));
        const std::int64_t batch = 2, seq = 7;
        const std::array<std::int64_t, 4> shape{batch, seq, 1, dim};
        Buffer x(dtype, batch * seq * dim);
        x.FillUniform(11);
        // Left padding for row 0; row 1 runs past the table unless erroring.
        const std::vector<std::uint8_t> mask = {0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
        std::vector<std::int64_t> ids = PositionIdsFromMask(mask, batch, seq, 1);
        if (policy != OutOfRangePolicy::kError) {
          for (std::int64_t s = 0; s < seq; ++s) ids[seq + s] = 15 + 3 * s;
        }
        const EmbeddingAddCall base{{}, {}, TokenPositions::Ids(ids), 2.0};
        Buffer ref = x;
        EmbeddingAddCall rcall = base;
        rcall.in = ref.View(shape);
        rcall.out = ref.View(shape);
        reference::AddLearnedTable(table, spec, rcall);
        ForEachTarget([&] {
          Buffer out = x;
          EmbeddingAddCall call = base;
          call.in = out.View(shape);
          call.out = out.View(shape);
          AddLearnedTable(table, spec, call);
          for (std::int64_t i = 0; i < out.size(); ++i) {
            const double tol = dtype == DType::kF32 ? 1e-6 : testing::UnitInLastPlace(dtype, ref.Get(i)) * 1.01 + 1e-7;
            ASSERT_NEAR(out.Get(i), ref.Get(i), tol) << i;
          }
        });
      }
    }
  }
}

TEST(LearnedTableAdd, ErrorPolicyNamesTheToken) {
  const auto table = RandomTable(6, 4, 2);
  Buffer x(DType::kF32, 2 * 4 * 4);
  ExpectError(
      [&] {
        AddLearnedTable(table, {}, EmbeddingAddCall::InPlace(x.View({2, 4, 1, 4}), TokenPositions::Offsets({0, 3})));
      },
      {"[learned_table] position[1, 3] = 6", "must be < 6"});
  ExpectError(
      [&] {
        AddLearnedTable(table, {.row_offset = 6}, EmbeddingAddCall::InPlace(x.View({2, 4, 1, 4})));
      },
      {"row_offset = 6", "no usable row"});
}

TEST(PositionIds, FromMaskAsHuggingFace) {
  const std::vector<std::uint8_t> mask = {0, 0, 1, 1, 1, 1, 1, 0};
  EXPECT_EQ(PositionIdsFromMask(mask, 2, 4), (std::vector<std::int64_t>{0, 0, 0, 1, 0, 1, 2, 0}));
  EXPECT_EQ(PositionIdsFromMask(mask, 2, 4, 1), (std::vector<std::int64_t>{1, 1, 0, 1, 0, 1, 2, 1}));
  ExpectError([&] { PositionIdsFromMask(mask, 3, 4); }, {"mask.size() = 8"});
  const std::vector<std::uint8_t> bad = {0, 2};
  ExpectError([&] { PositionIdsFromMask(bad, 1, 2); }, {"mask[1] = 2"});
}

}  // namespace
}  // namespace posenc
