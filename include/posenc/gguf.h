// Reading GGUF model files (versions 2 and 3): metadata of every value type,
// tensor descriptions, and exact dequantization to float32.
//
// The file is memory-mapped and never trusted: every length, count, offset
// and size is checked against the bytes that are really there, so a
// truncated or corrupt file is a posenc::Error naming what is wrong, never a
// crash or an out-of-bounds read (tests/fuzz/gguf_fuzz.cc fuzzes this).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/gguf_metadata.h"

namespace posenc {

// ggml tensor element types (their numbers are the file format's).
enum class GgmlType : std::uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kBF16 = 30,
};

struct GgmlTypeTraits {
  std::string_view name;  // "Q4_K"
  std::int64_t block_elements;
  std::int64_t block_bytes;
  bool dequantizable;  // posenc can convert it to float32
};

// Throws posenc::Error for a type number posenc does not know.
const GgmlTypeTraits& TraitsOf(GgmlType type);

// Dequantizes `elements` values (a multiple of the block size) from `blocks`
// of the tensor named `tensor` (for errors). Throws posenc::Error, before
// writing anything, if a block's scale is inf or NaN.
void DequantizeRow(GgmlType type, const std::byte* blocks, float* out, std::int64_t elements, std::string_view tensor);
// The check DequantizeRow makes, for code that reads the blocks as stored
// (matmul.h's kernels check once, at load).
void RequireFiniteScales(GgmlType type, const std::byte* blocks, std::int64_t elements, std::string_view tensor);

struct GgufTensorInfo {
  std::string name;
  // ggml order: shape[0] is the contiguous (fastest) dimension; a matrix
  // with `rows` rows of `cols` values has shape {cols, rows}.
  std::vector<std::int64_t> shape;
  GgmlType type;
  std::uint64_t offset = 0;  // from the start of the data section
  std::span<const std::byte> data;

  std::int64_t Elements() const;
  std::int64_t Rows() const { return shape.empty() ? 1 : Elements() / shape[0]; }
};

class GgufFile {
 public:
  // Memory-maps and parses the file; throws posenc::Error naming the path
  // and the problem.
  static GgufFile Open(const std::string& path);
  // Parses bytes the caller keeps alive for the lifetime of the result.
  static GgufFile Parse(std::span<const std::byte> bytes);

  std::uint32_t version() const { return version_; }
  const GgufMetadata& metadata() const { return metadata_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  std::size_t alignment() const { return alignment_; }

  // Throws posenc::Error if there is no tensor with that name.
  const GgufTensorInfo& Tensor(std::string_view name) const;
  const GgufTensorInfo* FindTensor(std::string_view name) const;
  // All values of a tensor as float32, in ggml order.
  std::vector<float> Dequantize(const GgufTensorInfo& tensor) const;

 private:
  std::shared_ptr<const void> mapping_;  // keeps the mmap alive
  std::uint32_t version_ = 0;
  std::size_t alignment_ = 32;
  GgufMetadata metadata_;
  std::vector<GgufTensorInfo> tensors_;
};

}  // namespace posenc
