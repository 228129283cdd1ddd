// GGUF writing: metadata encoded as it is added, the file assembled and
// written whole or not at all by Write (through OutputFile).
#include "posenc/gguf_writer.h"

#include <bit>
#include <cstring>
#include <type_traits>

#include "posenc/error.h"
#include "posenc/output_file.h"

namespace posenc {
namespace {

// GgufFile reads with memcpy too: both assume a little-endian machine, which
// is what the format stores.
static_assert(std::endian::native == std::endian::little, "GGUF is little-endian; posenc writes host order");

constexpr const char* kOp = "gguf write";
constexpr std::uint32_t kMagic = 0x46554747;  // "GGUF"
constexpr std::uint32_t kVersion = 3;
constexpr std::size_t kMaxDims = 4;                         // GGML_MAX_DIMS
constexpr std::size_t kMaxNameBytes = 63;                   // GGML_MAX_NAME (64) less the terminating NUL
constexpr std::size_t kMaxKeyBytes = 65535;                 // the spec's limit on keys
constexpr std::size_t kMaxStringBytes = 1 << 24;            // what GgufFile accepts (gguf_file.cc)
constexpr std::int64_t kMaxExtent = std::int64_t{1} << 40;  // likewise
constexpr std::uint32_t kMaxAlignment = 1 << 20;            // likewise
constexpr std::uint32_t kF32 = 0;                           // GgmlType::kF32

// GGUF value types (the file format's numbers; gguf_file.cc has them all).
constexpr std::uint32_t kU32 = 4;
constexpr std::uint32_t kI32 = 5;
constexpr std::uint32_t kF32Value = 6;
constexpr std::uint32_t kBool = 7;
constexpr std::uint32_t kString = 8;
constexpr std::uint32_t kArray = 9;
constexpr std::uint32_t kI64 = 11;
constexpr std::uint32_t kF64 = 12;

// Appends raw bytes (resize + memcpy: GCC 12 warns, wrongly, about
// vector::insert of a few bytes into a vector it can see is empty).
void PutBytes(std::vector<std::byte>& out, const void* data, std::size_t size) {
  const std::size_t at = out.size();
  out.resize(at + size);
  if (size > 0) std::memcpy(out.data() + at, data, size);
}

template <class T>
void Put(std::vector<std::byte>& out, const T& value) {
  static_assert(std::is_trivially_copyable_v<T>);
  PutBytes(out, &value, sizeof(T));
}

// A string as GGUF stores it: uint64 length, then the bytes (no NUL).
void PutString(std::vector<std::byte>& out, std::string_view text) {
  Put(out, static_cast<std::uint64_t>(text.size()));
  PutBytes(out, text.data(), text.size());
}

template <class T>
void PutArray(std::vector<std::byte>& out, std::uint32_t item_type, std::span<const T> values) {
  Put(out, item_type);
  Put(out, static_cast<std::uint64_t>(values.size()));
  PutBytes(out, values.data(), values.size_bytes());
}

std::uint64_t PadTo(std::uint64_t size, std::uint64_t alignment) {
  return (size + alignment - 1) / alignment * alignment;
}

std::string ShapeText(std::span<const std::int64_t> shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

void RequireStringFits(std::string_view text, std::string_view parameter) {
  Require(text.size() <= kMaxStringBytes, kOp, parameter, Verbatim{std::to_string(text.size()) + " bytes"},
          "must be at most 16 MiB (the longest string posenc's GGUF reader accepts)");
}

}  // namespace

GgufWriter::GgufWriter(std::uint32_t alignment) : alignment_(alignment) {
  Require(alignment >= 8 && alignment <= kMaxAlignment && std::has_single_bit(alignment), kOp, "alignment", alignment,
          "must be a power of two from 8 to 1048576");
  if (alignment != kDefaultAlignment) {
    PutString(entries_, "general.alignment");
    Put(entries_, kU32);
    Put(entries_, alignment);
    ++entry_count_;
  }
}

void GgufWriter::BeginEntry(std::string_view key, std::uint32_t type) {
  Require(!key.empty(), kOp, "key", key, "must not be empty");
  Require(key.size() <= kMaxKeyBytes, kOp, "key", Verbatim{std::to_string(key.size()) + " bytes"},
          "must be at most 65535 bytes");
  Require(key != "general.alignment", kOp, "key", key,
          "is set by GgufWriter's alignment (constructor argument), not added");
  Require(!keys_.contains(key), kOp, "key", key, "is added twice (each metadata key appears once)");
  keys_.emplace(key);
  PutString(entries_, key);
  Put(entries_, type);
  ++entry_count_;
}

GgufWriter& GgufWriter::AddString(std::string_view key, std::string_view value) {
  RequireStringFits(value, key);
  BeginEntry(key, kString);
  PutString(entries_, value);
  return *this;
}

GgufWriter& GgufWriter::AddBool(std::string_view key, bool value) {
  BeginEntry(key, kBool);
  Put(entries_, static_cast<std::uint8_t>(value ? 1 : 0));
  return *this;
}

GgufWriter& GgufWriter::AddUint32(std::string_view key, std::uint32_t value) {
  BeginEntry(key, kU32);
  Put(entries_, value);
  return *this;
}

GgufWriter& GgufWriter::AddInt32(std::string_view key, std::int32_t value) {
  BeginEntry(key, kI32);
  Put(entries_, value);
  return *this;
}

GgufWriter& GgufWriter::AddInt64(std::string_view key, std::int64_t value) {
  BeginEntry(key, kI64);
  Put(entries_, value);
  return *this;
}

GgufWriter& GgufWriter::AddFloat32(std::string_view key, float value) {
  BeginEntry(key, kF32Value);
  Put(entries_, value);
  return *this;
}

GgufWriter& GgufWriter::AddFloat64(std::string_view key, double value) {
  BeginEntry(key, kF64);
  Put(entries_, value);
  return *this;
}

GgufWriter& GgufWriter::AddStringArray(std::string_view key, std::span<const std::string> values) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    RequireStringFits(values[i], std::string(key) + "[" + std::to_string(i) + "]");
  }
  BeginEntry(key, kArray);
  Put(entries_, std::uint32_t{kString});
  Put(entries_, static_cast<std::uint64_t>(values.size()));
  for (const std::string& value : values) PutString(entries_, value);
  return *this;
}

GgufWriter& GgufWriter::AddInt32Array(std::string_view key, std::span<const std::int32_t> values) {
  BeginEntry(key, kArray);
  PutArray(entries_, kI32, values);
  return *this;
}

GgufWriter& GgufWriter::AddInt64Array(std::string_view key, std::span<const std::int64_t> values) {
  BeginEntry(key, kArray);
  PutArray(entries_, kI64, values);
  return *this;
}

GgufWriter& GgufWriter::AddFloat32Array(std::string_view key, std::span<const float> values) {
  BeginEntry(key, kArray);
  PutArray(entries_, kF32Value, values);
  return *this;
}

GgufWriter& GgufWriter::AddTensor(std::string_view name, std::span<const std::int64_t> shape,
                                  std::span<const float> data) {
  Require(!name.empty(), kOp, "tensor name", name, "must not be empty");
  Require(name.size() <= kMaxNameBytes, kOp, "tensor name", name,
          "must be at most 63 bytes (llama.cpp's GGML_MAX_NAME - 1)");
  Require(!tensor_names_.contains(name), kOp, "tensor name", name, "is added twice (each tensor name appears once)");
  const std::string parameter = std::string(name) + ".shape";
  Require(!shape.empty() && shape.size() <= kMaxDims, kOp, parameter, Verbatim{ShapeText(shape)},
          "must have 1 to 4 dims (ggml order)");
  // The product, stopped once past data.size(): it cannot overflow.
  std::uint64_t elements = 1;
  for (const std::int64_t extent : shape) {
    Require(extent >= 1 && extent <= kMaxExtent, kOp, parameter, Verbatim{ShapeText(shape)},
            "every dim must be from 1 to 2^40");
    if (elements <= data.size()) elements *= static_cast<std::uint64_t>(extent);
  }
  Require(elements == data.size(), kOp, parameter, Verbatim{ShapeText(shape)},
          "its product must be the number of values given (" + std::to_string(data.size()) + ")");
  tensor_names_.emplace(name);
  tensors_.push_back({std::string(name), std::vector<std::int64_t>(shape.begin(), shape.end()),
                      std::vector<float>(data.begin(), data.end())});
  return *this;
}

void GgufWriter::Write(const std::string& path) const {
  // Header, metadata and tensor infos, padded to the data section.
  std::vector<std::byte> head;
  Put(head, kMagic);
  Put(head, kVersion);
  Put(head, static_cast<std::uint64_t>(tensors_.size()));
  Put(head, entry_count_);
  PutBytes(head, entries_.data(), entries_.size());
  std::uint64_t offset = 0;  // from the start of the data section
  for (const Tensor& t : tensors_) {
    PutString(head, t.name);
    Put(head, static_cast<std::uint32_t>(t.shape.size()));
    for (const std::int64_t extent : t.shape) Put(head, static_cast<std::uint64_t>(extent));
    Put(head, kF32);
    Put(head, offset);
    offset += PadTo(t.data.size() * sizeof(float), alignment_);
  }
  head.resize(PadTo(head.size(), alignment_));

  OutputFile file(kOp, "path", path);
  file.Write(head.data(), head.size());
  const std::vector<std::byte> zeros(alignment_);
  for (const Tensor& t : tensors_) {
    const std::size_t bytes = t.data.size() * sizeof(float);
    file.Write(t.data.data(), bytes);
    file.Write(zeros.data(), PadTo(bytes, alignment_) - bytes);
  }
  file.Commit();
}

}  // namespace posenc
