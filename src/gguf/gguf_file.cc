// GGUF parsing: a bounds-checked cursor over the mapped bytes.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>

#include "posenc/error.h"
#include "posenc/input_file.h"
#include "posenc/gguf.h"

namespace posenc {
namespace {

constexpr const char* kOp = "gguf";
constexpr std::uint64_t kMaxDims = 4;  // GGML_MAX_DIMS
constexpr std::uint64_t kMaxStringBytes = 1 << 24;

enum class ValueType : std::uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};

// Reads little-endian values; every read checks the bytes are there.
class Cursor {
 public:
  explicit Cursor(std::span<const std::byte> bytes) : bytes_(bytes) {}

  std::size_t position() const { return position_; }
  std::size_t remaining() const { return bytes_.size() - position_; }

  template <class T>
  T Read(const char* what) {
    Need(sizeof(T), what);
    T value;
    std::memcpy(&value, bytes_.data() + position_, sizeof(T));
    position_ += sizeof(T);
    return value;
  }

  std::string ReadString(const char* what) {
    const auto length = Read<std::uint64_t>(what);
    Require(length <= kMaxStringBytes, kOp, what, length, "string length is implausible (corrupt file)");
    Need(length, what);
    std::string s(reinterpret_cast<const char*>(bytes_.data() + position_), length);
    position_ += length;
    return s;
  }

 private:
  void Need(std::uint64_t count, const char* what) const {
    if (count > remaining()) {
      ThrowError(kOp, what, "at byte " + std::to_string(position_),
                 "file ends early (needs " + std::to_string(count) + " bytes, " + std::to_string(remaining()) +
                     " left): truncated or corrupt");
    }
  }

  std::span<const std::byte> bytes_;
  std::size_t position_ = 0;
};

std::int64_t Unsigned64ToSigned(std::uint64_t value, const std::string& key) {
  Require(value <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()), kOp, key, value,
          "does not fit a signed 64-bit integer");
  return static_cast<std::int64_t>(value);
}

// A scalar of type `type` as int64 (integers, bools) or double (floats).
template <class Sink>
void ReadScalar(Cursor& in, ValueType type, const std::string& key, Sink&& sink) {
  switch (type) {
    case ValueType::kU8: return sink(std::int64_t{in.Read<std::uint8_t>(key.c_str())});
    case ValueType::kI8: return sink(std::int64_t{in.Read<std::int8_t>(key.c_str())});
    case ValueType::kU16: return sink(std::int64_t{in.Read<std::uint16_t>(key.c_str())});
    case ValueType::kI16: return sink(std::int64_t{in.Read<std::int16_t>(key.c_str())});
    case ValueType::kU32: return sink(std::int64_t{in.Read<std::uint32_t>(key.c_str())});
    case ValueType::kI32: return sink(std::int64_t{in.Read<std::int32_t>(key.c_str())});
    case ValueType::kU64: return sink(Unsigned64ToSigned(in.Read<std::uint64_t>(key.c_str()), key));
    case ValueType::kI64: return sink(in.Read<std::int64_t>(key.c_str()));
    case ValueType::kF32: return sink(double{in.Read<float>(key.c_str())});
    case ValueType::kF64: return sink(in.Read<double>(key.c_str()));
    case ValueType::kBool: {
      const auto b = in.Read<std::uint8_t>(key.c_str());
      Require(b <= 1, kOp, key, int{b}, "a bool must be 0 or 1");
      return sink(b == 1);
    }
    default: ThrowError(kOp, key, "type " + std::to_string(static_cast<std::uint32_t>(type)), "not a scalar type");
  }
}

bool IsScalarType(std::uint32_t type) {
  return type <= 12 && type != static_cast<std::uint32_t>(ValueType::kString) &&
         type != static_cast<std::uint32_t>(ValueType::kArray);
}

GgufValue ReadValue(Cursor& in, std::uint32_t raw_type, const std::string& key) {
  const auto type = static_cast<ValueType>(raw_type);
  if (type == ValueType::kString) return in.ReadString(key.c_str());
  if (type == ValueType::kArray) {
    const auto item_type = in.Read<std::uint32_t>(key.c_str());
    const auto count = in.Read<std::uint64_t>(key.c_str());
    // Every item takes at least one byte: a count beyond the file is corrupt.
    Require(count <= in.remaining(), kOp, key + ".count", count, "more items than bytes left (corrupt file)");
    if (item_type == static_cast<std::uint32_t>(ValueType::kString)) {
      std::vector<std::string> items;
      items.reserve(count);
      for (std::uint64_t i = 0; i < count; ++i) items.push_back(in.ReadString(key.c_str()));
      return items;
    }
    Require(IsScalarType(item_type), kOp, key + ".item_type", item_type,
            "must be a scalar or string type (nested arrays are not supported)");
    const auto item = static_cast<ValueType>(item_type);
    if (item == ValueType::kF32 || item == ValueType::kF64) {
      std::vector<double> items;
      items.reserve(count);
      for (std::uint64_t i = 0; i < count; ++i) {
        ReadScalar(in, item, key, [&](auto v) { items.push_back(static_cast<double>(v)); });
      }
      return items;
    }
    std::vector<std::int64_t> items;
    items.reserve(count);
    for (std::uint64_t i = 0; i < count; ++i) {
      ReadScalar(in, item, key, [&](auto v) { items.push_back(static_cast<std::int64_t>(v)); });
    }
    return items;
  }
  Require(IsScalarType(raw_type), kOp, key + ".type", raw_type, "is not a GGUF value type (0..12)");
  GgufValue value;
  ReadScalar(in, type, key, [&](auto v) { value = v; });
  return value;
}

std::uint64_t CheckedMultiply(std::uint64_t a, std::uint64_t b, const std::string& what) {
  Require(b == 0 || a <= std::numeric_limits<std::uint64_t>::max() / b, kOp, what, a, "size overflows (corrupt file)");
  return a * b;
}

}  // namespace

std::int64_t GgufTensorInfo::Elements() const {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

GgufFile GgufFile::Parse(std::span<const std::byte> bytes) {
  Cursor in(bytes);
  GgufFile file;
  const auto magic = in.Read<std::uint32_t>("magic");
  Require(magic == 0x46554747u, kOp, "magic", magic, "must be \"GGUF\" (0x46554747): not a GGUF file");
  file.version_ = in.Read<std::uint32_t>("version");
  Require(file.version_ == 2 || file.version_ == 3, kOp, "version", file.version_,
          "must be 2 or 3 (version 1 files are not supported)");
  const auto tensor_count = in.Read<std::uint64_t>("tensor_count");
  const auto kv_count = in.Read<std::uint64_t>("kv_count");
  Require(kv_count <= in.remaining(), kOp, "kv_count", kv_count, "more entries than bytes (corrupt file)");
  Require(tensor_count <= in.remaining(), kOp, "tensor_count", tensor_count, "more tensors than bytes (corrupt file)");

  for (std::uint64_t i = 0; i < kv_count; ++i) {
    std::string key = in.ReadString("metadata key");
    const auto type = in.Read<std::uint32_t>(key.c_str());
    GgufValue value = ReadValue(in, type, key);
    Require(!file.metadata_.contains(key), kOp, key, Verbatim{"repeated"}, "each metadata key must appear once");
    file.metadata_.emplace(std::move(key), std::move(value));
  }
  if (const auto it = file.metadata_.find("general.alignment"); it != file.metadata_.end()) {
    const auto* alignment = std::get_if<std::int64_t>(&it->second);
    Require(alignment && *alignment > 0 && (*alignment & (*alignment - 1)) == 0 && *alignment <= 1 << 20, kOp,
            "general.alignment", alignment ? *alignment : -1, "must be a power of two");
    file.alignment_ = static_cast<std::size_t>(*alignment);
  }

  std::set<std::string, std::less<>> names;
  std::vector<std::uint64_t> sizes;  // bytes per tensor, placed once the data section is known
  for (std::uint64_t i = 0; i < tensor_count; ++i) {
    GgufTensorInfo t;
    t.name = in.ReadString("tensor name");
    Require(names.insert(t.name).second, kOp, t.name, Verbatim{"repeated"}, "each tensor name must appear once");
    const auto dims = in.Read<std::uint32_t>(t.name.c_str());
    Require(dims >= 1 && dims <= kMaxDims, kOp, t.name + ".n_dims", dims, "must be 1..4");
    std::uint64_t elements = 1;
    for (std::uint32_t d = 0; d < dims; ++d) {
      const auto extent = in.Read<std::uint64_t>(t.name.c_str());
      Require(extent >= 1 && extent <= (std::uint64_t{1} << 40), kOp, t.name + ".shape", extent, "implausible extent");
      elements = CheckedMultiply(elements, extent, t.name + ".shape");
      t.shape.push_back(static_cast<std::int64_t>(extent));
    }
    const auto type = in.Read<std::uint32_t>(t.name.c_str());
    t.type = static_cast<GgmlType>(type);
    const GgmlTypeTraits& traits = TraitsOf(t.type);
    Require(t.shape[0] % traits.block_elements == 0, kOp, t.name + ".shape[0]", t.shape[0],
            "must be a multiple of the " + std::string(traits.name) + " block size " +
                std::to_string(traits.block_elements));
    t.offset = in.Read<std::uint64_t>(t.name.c_str());
    Require(t.offset % file.alignment_ == 0, kOp, t.name + ".offset", t.offset,
            "must be a multiple of general.alignment = " + std::to_string(file.alignment_));
    sizes.push_back(CheckedMultiply(elements / traits.block_elements, traits.block_bytes, t.name));
    file.tensors_.push_back(std::move(t));
  }

  const std::size_t data_start = (in.position() + file.alignment_ - 1) / file.alignment_ * file.alignment_;
  const std::uint64_t data_bytes = data_start <= bytes.size() ? bytes.size() - data_start : 0;
  // The layout every GGUF writer produces (llama.cpp's gguf.cpp refuses any
  // other): in order of offset, each tensor starts where the one before it
  // ends, padded to the alignment, the first at 0. So no two tensors
  // overlap, no bytes lie between them, and a type or shape that does not
  // match the data (F32 read as F16, Q4_K as F32) or an offset moved is
  // caught here, not read across the neighbouring tensors.
  std::vector<std::size_t> order(file.tensors_.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return file.tensors_[a].offset < file.tensors_[b].offset; });
  std::uint64_t expected = 0;  // where the next tensor starts
  // "NAME (TYPE, N bytes)" of tensor i, for the errors.
  const auto described = [&](std::size_t i) {
    const GgufTensorInfo& t = file.tensors_[i];
    return EscapeControlBytes(t.name) + " (" + std::string(TraitsOf(t.type).name) + ", " + std::to_string(sizes[i]) +
           " bytes)";
  };
  for (std::size_t k = 0; k < order.size(); ++k) {
    GgufTensorInfo& t = file.tensors_[order[k]];
    const std::uint64_t size = sizes[order[k]];
    Require(t.offset == expected, kOp, t.name + ".offset", t.offset,
            "must be " + std::to_string(expected) +
                (k == 0 ? std::string(", the start of the data section (the tensor at the lowest offset)")
                        : ", where " + described(order[k - 1]) +
                              " ends, padded to general.alignment = " + std::to_string(file.alignment_)) +
                ": tensors lie one after another, so a type, shape or offset that does not match the data is "
                "corrupt");
    Require(size <= data_bytes && t.offset <= data_bytes - size, kOp, t.name + ".offset", t.offset,
            "tensor data (" + std::to_string(size) + " bytes) extends past the end of the file (truncated)");
    t.data = bytes.subspan(data_start + t.offset, size);
    expected =
        (t.offset + size + file.alignment_ - 1) / file.alignment_ * file.alignment_;  // <= data_bytes + alignment
  }
  // The data section ends with the last tensor and its padding (writers pad
  // it): more bytes mean a tensor is smaller than the data says.
  if (!order.empty()) {
    const GgufTensorInfo& last = file.tensors_[order.back()];
    Require(data_bytes <= expected, kOp, last.name + ".type", Verbatim{std::string(TraitsOf(last.type).name)},
            "the last tensor, " + described(order.back()) + ", ends the data section at byte " +
                std::to_string(expected) + " (padded), yet the file holds " + std::to_string(data_bytes) +
                ": a type or shape that does not match the data is corrupt");
  }
  return file;
}

GgufFile GgufFile::Open(const std::string& path) {
  const OpenedFile opened = OpenRegularFile(kOp, "path", path);
  const auto size = static_cast<std::size_t>(opened.size);
  void* address = size == 0 ? nullptr : ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, opened.fd, 0);
  ::close(opened.fd);
  if (address == MAP_FAILED)
    ThrowError(kOp, "path", FormatValue(path), std::string("cannot be mapped: ") + std::strerror(errno));
  std::shared_ptr<const void> mapping(address, [size](const void* p) {
    if (p) ::munmap(const_cast<void*>(p), size);
  });
  try {
    GgufFile file = Parse(std::span<const std::byte>(static_cast<const std::byte*>(address), size));
    file.mapping_ = std::move(mapping);
    return file;
  } catch (const Error& e) {
    throw Error(path + ": " + e.what());
  }
}

const GgufTensorInfo* GgufFile::FindTensor(std::string_view name) const {
  for (const GgufTensorInfo& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const GgufTensorInfo& GgufFile::Tensor(std::string_view name) const {
  const GgufTensorInfo* t = FindTensor(name);
  if (!t) ThrowError(kOp, "tensor", FormatValue(name), "is not in the file");
  return *t;
}

std::vector<float> GgufFile::Dequantize(const GgufTensorInfo& tensor) const {
  std::vector<float> out(static_cast<std::size_t>(tensor.Elements()));
  DequantizeRow(tensor.type, tensor.data.data(), out.data(), tensor.Elements(), tensor.name);
  return out;
}

}  // namespace posenc
