// Writing GGUF files (version 3): typed metadata and float32 tensors, for the
// checkpoints posenc saves. The layout is the one llama.cpp's gguf-py writes
// (GGUFWriter): header, key/value pairs and tensor infos in the order they
// were added, zero padding to the alignment before the data section, each
// tensor's data at an offset that is a multiple of the alignment and padded
// after it. posenc's GgufFile and gguf-py's GGUFReader read the result.
//
//   GgufWriter writer;
//   writer.AddString("general.architecture", "llama").AddUint32("llama.context_length", 2048);
//   writer.AddTensor("token_embd.weight", {dim, vocab}, embeddings);  // ggml order: {cols, rows}
//   writer.Write("checkpoint.gguf");
//
// Every Add* checks its arguments at once and throws posenc::Error
// "[gguf write] parameter = value: rule": an empty or repeated key or tensor
// name, a shape with no dims, more than 4 or one below 1, a shape whose
// product is not the number of values (a failed Add leaves the writer as it
// was). Write writes the target whole or not at all through OutputFile
// (posenc/output_file.h, which says what a path may be: a regular file is
// replaced atomically, a symlink's target is written, /dev/null is written
// through, a FIFO is refused); if anything fails, the target is as it was
// and no temporary is left behind.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace posenc {

class GgufWriter {
 public:
  static constexpr std::uint32_t kDefaultAlignment = 32;  // GGUF's default (general.alignment absent)

  // `alignment`: of the data section and of every tensor's data, a power of
  // two from 8 (the spec asks for a multiple of 8) to 1 MiB. A value other
  // than 32 is recorded as the first key, general.alignment (uint32), as
  // gguf-py's add_custom_alignment does; 32 is not recorded (the default).
  explicit GgufWriter(std::uint32_t alignment = kDefaultAlignment);

  // Metadata, in the order added. Each key (non-empty, at most 65535 bytes)
  // is added once, with one type; general.alignment is set by the
  // constructor, not here. Strings and string items are at most 16 MiB (the
  // most posenc's reader accepts). Arrays may be empty.
  GgufWriter& AddString(std::string_view key, std::string_view value);
  GgufWriter& AddBool(std::string_view key, bool value);
  GgufWriter& AddUint32(std::string_view key, std::uint32_t value);  // llama.cpp's counts and lengths
  GgufWriter& AddInt32(std::string_view key, std::int32_t value);
  GgufWriter& AddInt64(std::string_view key, std::int64_t value);
  GgufWriter& AddFloat32(std::string_view key, float value);
  GgufWriter& AddFloat64(std::string_view key, double value);
  GgufWriter& AddStringArray(std::string_view key, std::span<const std::string> values);
  GgufWriter& AddInt32Array(std::string_view key, std::span<const std::int32_t> values);
  GgufWriter& AddInt64Array(std::string_view key, std::span<const std::int64_t> values);
  GgufWriter& AddFloat32Array(std::string_view key, std::span<const float> values);

  // An F32 tensor, in the order added. `shape` is in ggml order (shape[0]
  // the contiguous dimension: a matrix of `rows` rows of `cols` values is
  // {cols, rows}), 1 to 4 dims, each >= 1, their product data.size().
  // `name` is non-empty, at most 63 bytes (llama.cpp's GGML_MAX_NAME - 1),
  // and added once. The values are copied: `data` need not outlive the call.
  GgufWriter& AddTensor(std::string_view name, std::span<const std::int64_t> shape, std::span<const float> data);
  GgufWriter& AddTensor(std::string_view name, std::initializer_list<std::int64_t> shape, std::span<const float> data) {
    return AddTensor(name, std::span<const std::int64_t>(shape.begin(), shape.size()), data);
  }

  // Writes the file (replacing `path` atomically, see above); throws
  // posenc::Error "[gguf write] path = ..." when its directory is missing or
  // not writable, when it is a directory or a FIFO, or when the disk is
  // full. The writer is unchanged: it can write the same file again
  // elsewhere.
  void Write(const std::string& path) const;

  std::uint32_t alignment() const { return alignment_; }

 private:
  struct Tensor {
    std::string name;
    std::vector<std::int64_t> shape;
    std::vector<float> data;
  };

  // Appends the key and its value type; throws for an empty or repeated key.
  void BeginEntry(std::string_view key, std::uint32_t type);

  std::uint32_t alignment_;
  std::uint64_t entry_count_ = 0;
  std::vector<std::byte> entries_;  // the encoded key/value pairs, in order
  std::set<std::string, std::less<>> keys_;
  std::vector<Tensor> tensors_;
  std::set<std::string, std::less<>> tensor_names_;
};

}  // namespace posenc
