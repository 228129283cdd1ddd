// Strict readers for learned position tables: NumPy .npy and safetensors.
//
// Every length, count and offset read from a file is checked against the
// bytes actually present before it is used, with overflow-safe arithmetic,
// so a corrupt or truncated file is a posenc::Error naming what is wrong.
#include <bit>
#include <cctype>
#include <cstring>
#include <limits>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "posenc/dtype.h"
#include "posenc/error.h"
#include "posenc/input_file.h"
#include "posenc/learned_table.h"

namespace posenc {
namespace {

static_assert(std::endian::native == std::endian::little, "the table readers copy little-endian file data as is");

std::uint64_t ReadLittle(const std::uint8_t* p, int bytes) {
  std::uint64_t value = 0;
  for (int i = bytes - 1; i >= 0; --i) value = (value << 8) | p[i];
  return value;
}

// Converts `count` little-endian elements of a file dtype to float32.
std::vector<float> ToFloat32(const std::uint8_t* data, std::int64_t count, std::string_view kind) {
  std::vector<float> values(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) {
    if (kind == "f4") {
      std::memcpy(&values[i], data + 4 * i, 4);
    } else if (kind == "f8") {
      double d;
      std::memcpy(&d, data + 8 * i, 8);
      values[i] = static_cast<float>(d);
    } else {
      std::uint16_t h;
      std::memcpy(&h, data + 2 * i, 2);
      values[i] = kind == "f2" ? F16ToF32(h) : BF16ToF32(h);
    }
  }
  return values;
}

// ---------------------------------------------------------------- .npy
//
// Layout: "\x93NUMPY", major, minor, header length (u16 for 1.0, u32 for 2.0
// and 3.0), an ASCII Python dict literal ending in '\n', then the data.
class NpyHeaderParser {
 public:
  explicit NpyHeaderParser(std::string_view text) : text_(text) {}

  struct Header {
    std::string descr;
    bool fortran_order = false;
    std::vector<std::int64_t> shape;
  };

  Header Parse() {
    Header header;
    bool have_descr = false, have_order = false, have_shape = false;
    SkipSpace();
    Expect('{', "the header must be a dict literal starting with '{'");
    while (true) {
      SkipSpace();
      if (Peek() == '}') {
        ++pos_;
        break;
      }
      const std::string key = ParseString("header key");
      SkipSpace();
      Expect(':', "expected ':' after key '" + key + "'");
      SkipSpace();
      if (key == "descr") {
        Require(!have_descr, "npy", "header.descr", Verbatim{"repeated"}, "must appear once");
        header.descr = ParseString("header.descr");
        have_descr = true;
      } else if (key == "fortran_order") {
        Require(!have_order, "npy", "header.fortran_order", Verbatim{"repeated"}, "must appear once");
        header.fortran_order = ParseBool();
        have_order = true;
      } else if (key == "shape") {
        Require(!have_shape, "npy", "header.shape", Verbatim{"repeated"}, "must appear once");
        header.shape = ParseShape();
        have_shape = true;
      } else {
        ThrowError("npy", "header key", FormatValue(key), "must be 'descr', 'fortran_order' or 'shape'");
      }
      SkipSpace();
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      SkipSpace();
      Expect('}', "expected ',' or '}' in the header dict");
      break;
    }
    // Only padding (spaces) and the final newline may follow.
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n')) ++pos_;
    Require(pos_ == text_.size(), "npy", "header", Verbatim{"trailing characters"},
            "only spaces and a newline may follow the dict");
    Require(have_descr, "npy", "header.descr", Verbatim{"missing"}, "the header must give the dtype");
    Require(have_order, "npy", "header.fortran_order", Verbatim{"missing"}, "the header must give the order");
    Require(have_shape, "npy", "header.shape", Verbatim{"missing"}, "the header must give the shape");
    return header;
  }

 private:
  char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
  }
  void Expect(char c, const std::string& rule) {
    Require(Peek() == c, "npy", "header", Verbatim{"offset " + std::to_string(pos_)}, rule);
    ++pos_;
  }
  std::string ParseString(const std::string& what) {
    const char quote = Peek();
    Require(quote == '\'' || quote == '"', "npy", what, Verbatim{"offset " + std::to_string(pos_)},
            "expected a quoted string");
    const std::size_t end = text_.find(quote, pos_ + 1);
    Require(end != std::string_view::npos, "npy", what, Verbatim{"unterminated"}, "expected a closing quote");
    std::string value(text_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return value;
  }
  bool ParseBool() {
    if (text_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (text_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    ThrowError("npy", "header.fortran_order", "offset " + std::to_string(pos_), "must be True or False");
  }
  std::vector<std::int64_t> ParseShape() {
    Expect('(', "header.shape must be a tuple");
    std::vector<std::int64_t> shape;
    while (true) {
      SkipSpace();
      if (Peek() == ')') {
        ++pos_;
        return shape;
      }
      Require(std::isdigit(static_cast<unsigned char>(Peek())) != 0, "npy", "header.shape",
              Verbatim{"offset " + std::to_string(pos_)}, "must hold non-negative integers");
      std::int64_t value = 0;
      while (std::isdigit(static_cast<unsigned char>(Peek())) != 0) {
        Require(value <= (std::numeric_limits<std::int64_t>::max() - 9) / 10, "npy", "header.shape",
                Verbatim{"an integer too large"}, "each extent must fit in 64 bits");
        value = value * 10 + (text_[pos_++] - '0');
      }
      shape.push_back(value);
      SkipSpace();
      if (Peek() == ',') {
        ++pos_;
      } else {
        Require(Peek() == ')', "npy", "header.shape", Verbatim{"offset " + std::to_string(pos_)},
                "expected ',' or ')'");
      }
    }
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

std::string ReadFile(const std::string& path, const char* op) {
  return ReadRegularFile(op, "path", path, PhysicalMemoryBytes(), "the table is read into memory whole");
}

std::span<const std::uint8_t> Bytes(const std::string& contents) {
  return {reinterpret_cast<const std::uint8_t*>(contents.data()), contents.size()};
}

// Rethrows a parse error with the file named at the end.
template <class F>
LearnedTable WithPath(const std::string& path, F&& parse) {
  try {
    return parse();
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + " (in " + path + ")");
  }
}

std::string_view SafetensorsKind(const std::string& dtype) {
  if (dtype == "F32") return "f4";
  if (dtype == "F16") return "f2";
  if (dtype == "BF16") return "bf2";
  if (dtype == "F64") return "f8";
  return {};
}

// Element sizes of every dtype the safetensors format defines; 0 if unknown.
std::int64_t SafetensorsElementSize(const std::string& dtype) {
  static const std::map<std::string, std::int64_t> sizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1}, {"I16", 2}, {"U16", 2}, {"F16", 2},
      {"BF16", 2}, {"I32", 4}, {"U32", 4}, {"F32", 4},     {"I64", 8},     {"U64", 8}, {"F64", 8}};
  const auto it = sizes.find(dtype);
  return it == sizes.end() ? 0 : it->second;
}

}  // namespace

LearnedTable LearnedTable::FromNpy(std::span<const std::uint8_t> bytes) {
  static constexpr std::uint8_t kMagic[] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  Require(bytes.size() >= 10, "npy", "file size", bytes.size(), "must be at least 10 bytes (magic, version, length)");
  Require(std::memcmp(bytes.data(), kMagic, 6) == 0, "npy", "magic", Verbatim{"not \\x93NUMPY"},
          "the file must start with \\x93NUMPY");
  const int major = bytes[6], minor = bytes[7];
  Require(major >= 1 && major <= 3 && minor == 0, "npy", "version",
          Verbatim{std::to_string(major) + "." + std::to_string(minor)}, "must be 1.0, 2.0 or 3.0");
  const std::size_t length_bytes = major == 1 ? 2 : 4;
  Require(bytes.size() >= 8 + length_bytes, "npy", "file size", bytes.size(), "truncated before the header length");
  const std::uint64_t header_length = ReadLittle(bytes.data() + 8, static_cast<int>(length_bytes));
  const std::size_t header_start = 8 + length_bytes;
  Require(header_length <= bytes.size() - header_start, "npy", "header length", header_length,
          "must fit in the file (" + std::to_string(bytes.size() - header_start) + " bytes after it)");
  const std::size_t data_start = header_start + static_cast<std::size_t>(header_length);
  const std::string_view header_text(reinterpret_cast<const char*>(bytes.data() + header_start),
                                     static_cast<std::size_t>(header_length));
  Require(!header_text.empty() && header_text.back() == '\n', "npy", "header", Verbatim{"no final newline"},
          "must end with '\\n'");
  const auto header = NpyHeaderParser(header_text).Parse();

  Require(header.descr == "<f4" || header.descr == "<f2" || header.descr == "<f8", "npy", "header.descr", header.descr,
          "must be '<f4', '<f2' or '<f8' (little-endian float32/16/64)");
  Require(!header.fortran_order, "npy", "header.fortran_order", Verbatim{"True"},
          "must be False (C order: one position per row)");
  Require(header.shape.size() == 2, "npy", "header.shape.size()", header.shape.size(),
          "must be 2 (a [positions, dim] table)");
  const std::int64_t rows = header.shape[0], dim = header.shape[1];
  Require(rows > 0, "npy", "header.shape[0]", rows, "must be > 0 (positions)");
  Require(dim > 0, "npy", "header.shape[1]", dim, "must be > 0 (dim)");
  const std::string kind = header.descr.substr(1);
  const std::int64_t item = kind == "f4" ? 4 : kind == "f2" ? 2 : 8;
  const std::int64_t data_bytes = CheckedProduct({rows, dim, item});
  const auto present = static_cast<std::int64_t>(bytes.size() - data_start);
  Require(data_bytes >= 0 && data_bytes == present, "npy", "data size", present,
          "must equal shape[0] * shape[1] * " + std::to_string(item) + " = " +
              (data_bytes < 0 ? std::string("(overflow)") : std::to_string(data_bytes)) + " bytes");
  return LearnedTable(rows, dim, ToFloat32(bytes.data() + data_start, rows * dim, kind), header.descr);
}

LearnedTable LearnedTable::FromSafetensors(std::span<const std::uint8_t> bytes, std::string_view tensor) {
  Require(bytes.size() >= 8, "safetensors", "file size", bytes.size(), "must be at least 8 bytes (header length)");
  const std::uint64_t header_length = ReadLittle(bytes.data(), 8);
  Require(header_length <= bytes.size() - 8, "safetensors", "header length", header_length,
          "must fit in the file (" + std::to_string(bytes.size() - 8) + " bytes after it)");
  Require(header_length <= 100'000'000, "safetensors", "header length", header_length,
          "must be at most 100000000 bytes");
  const std::string_view header_text(reinterpret_cast<const char*>(bytes.data() + 8),
                                     static_cast<std::size_t>(header_length));
  const nlohmann::json header = nlohmann::json::parse(header_text, nullptr, /*allow_exceptions=*/false);
  Require(!header.is_discarded(), "safetensors", "header", Verbatim{"invalid JSON"}, "must be a JSON object");
  Require(header.is_object(), "safetensors", "header", Verbatim{header.type_name()}, "must be a JSON object");
  const std::uint8_t* data = bytes.data() + 8 + header_length;
  const auto data_size = static_cast<std::int64_t>(bytes.size() - 8 - header_length);

  // Check every entry's structure and bounds, not just the one we read.
  std::vector<std::string> names;
  for (const auto& [name, entry] : header.items()) {
    const std::string where = "header[\"" + name + "\"]";
    if (name == "__metadata__") {
      Require(entry.is_object(), "safetensors", where, Verbatim{entry.type_name()}, "must be an object");
      continue;
    }
    names.push_back(name);
    Require(entry.is_object(), "safetensors", where, Verbatim{entry.type_name()}, "must be an object");
    Require(entry.contains("dtype") && entry["dtype"].is_string(), "safetensors", where + ".dtype", Verbatim{"missing"},
            "must be a string");
    Require(entry.contains("shape") && entry["shape"].is_array(), "safetensors", where + ".shape", Verbatim{"missing"},
            "must be an array");
    Require(entry.contains("data_offsets") && entry["data_offsets"].is_array() && entry["data_offsets"].size() == 2,
            "safetensors", where + ".data_offsets", Verbatim{"missing"}, "must be [begin, end]");
    const std::string dtype = entry["dtype"];
    const std::int64_t element = SafetensorsElementSize(dtype);
    Require(element > 0, "safetensors", where + ".dtype", dtype, "is not a safetensors dtype");
    std::int64_t count = 1;
    for (const auto& extent : entry["shape"]) {
      Require(extent.is_number_unsigned(), "safetensors", where + ".shape", Verbatim{extent.dump()},
              "must hold non-negative integers");
      const std::uint64_t e = extent;
      Require(e <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()), "safetensors",
              where + ".shape", e, "extent too large");
      count = CheckedProduct({count, static_cast<std::int64_t>(e)});
      Require(count >= 0, "safetensors", where + ".shape", Verbatim{entry["shape"].dump()}, "element count overflows");
    }
    const auto& offsets = entry["data_offsets"];
    Require(offsets[0].is_number_unsigned() && offsets[1].is_number_unsigned(), "safetensors", where + ".data_offsets",
            Verbatim{offsets.dump()}, "must be non-negative integers");
    const std::uint64_t begin = offsets[0], end = offsets[1];
    Require(begin <= end && end <= static_cast<std::uint64_t>(data_size), "safetensors", where + ".data_offsets",
            Verbatim{offsets.dump()}, "must satisfy begin <= end <= data size " + std::to_string(data_size));
    const std::int64_t expected = CheckedProduct({count, element});
    Require(expected >= 0 && static_cast<std::uint64_t>(expected) == end - begin, "safetensors",
            where + ".data_offsets", Verbatim{offsets.dump()},
            "must span shape product * " + std::to_string(element) + " = " + std::to_string(expected) + " bytes");
  }

  std::string chosen(tensor);
  if (chosen.empty()) {
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    Require(names.size() == 1, "safetensors", "tensor", Verbatim{"unnamed"},
            "must be given: the file holds " + std::to_string(names.size()) + " tensors (" + list + ")");
    chosen = names.front();
  }
  Require(header.contains(chosen) && chosen != "__metadata__", "safetensors", "tensor", chosen, "is not in the file");
  const auto& entry = header[chosen];
  const std::string dtype = entry["dtype"];
  const std::string_view kind = SafetensorsKind(dtype);
  Require(!kind.empty(), "safetensors", "header[\"" + chosen + "\"].dtype", dtype,
          "must be F32, F16, BF16 or F64 for a position table");
  Require(entry["shape"].size() == 2, "safetensors", "header[\"" + chosen + "\"].shape",
          Verbatim{entry["shape"].dump()}, "must be 2-D (a [positions, dim] table)");
  const auto rows = static_cast<std::int64_t>(entry["shape"][0].get<std::uint64_t>());
  const auto dim = static_cast<std::int64_t>(entry["shape"][1].get<std::uint64_t>());
  Require(rows > 0 && dim > 0, "safetensors", "header[\"" + chosen + "\"].shape", Verbatim{entry["shape"].dump()},
          "must have positions > 0 and dim > 0");
  const std::uint64_t begin = entry["data_offsets"][0];
  return LearnedTable(rows, dim, ToFloat32(data + begin, rows * dim, kind), dtype);
}

LearnedTable LearnedTable::LoadNpy(const std::string& path) {
  const auto bytes = ReadFile(path, "npy");
  return WithPath(path, [&] { return FromNpy(Bytes(bytes)); });
}

LearnedTable LearnedTable::LoadSafetensors(const std::string& path, std::string_view tensor) {
  const auto bytes = ReadFile(path, "safetensors");
  return WithPath(path, [&] { return FromSafetensors(Bytes(bytes), tensor); });
}

LearnedTable LearnedTable::Load(const std::string& path, std::string_view tensor) {
  const auto ends_with = [&](std::string_view suffix) {
    return path.size() >= suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends_with(".npy")) {
    Require(tensor.empty(), "learned_table", "tensor", tensor, "applies only to safetensors files");
    return LoadNpy(path);
  }
  if (ends_with(".safetensors")) return LoadSafetensors(path, tensor);
  if (ends_with(".gguf")) return LoadGguf(path, tensor);
  ThrowError("learned_table", "path", FormatValue(path), "must end in .npy, .safetensors or .gguf");
}

LearnedTable LearnedTable::FromGguf(const GgufFile& file, std::string_view tensor) {
  const GgufTensorInfo& info = file.Tensor(tensor.empty() ? std::string_view("position_embd.weight") : tensor);
  Require(info.shape.size() == 2, "learned_table", info.name + ".shape.size()", info.shape.size(),
          "a position table is 2-D (ggml shape {dim, rows})");
  return LearnedTable(info.shape[1], info.shape[0], file.Dequantize(info), std::string(TraitsOf(info.type).name));
}

LearnedTable LearnedTable::LoadGguf(const std::string& path, std::string_view tensor) {
  return FromGguf(GgufFile::Open(path), tensor);
}

}  // namespace posenc
