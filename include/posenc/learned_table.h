// Learned absolute position tables (BERT, GPT-2, OPT, BART): one trained row
// per position, added to the token embeddings.
//
// A table has `rows` rows of `dim` values, held as float32 (f16/bf16/f64
// files are converted once at load). Position p reads row p + row_offset:
// OPT and BART keep two extra rows in front (row_offset = 2,
// transformers#21080). Positions come per token (TokenPositions), so left
// padding and KV-cache offsets are the caller's ids, not a guess here
// (PositionIdsFromMask builds Hugging Face's ids from an attention mask).
//
// Past the end (n = rows - row_offset usable rows) the policy decides:
//   kError         position >= n is an error naming the position and n
//   kClamp         position >= n reads the last row
//   kHierarchical  Su's hierarchical decomposition (kexue.fm 7947) extends a
//                  table of n rows to n^2 positions: with u_i = (p_i - alpha p_0)
//                  / (1 - alpha), position m = i n + j gets
//                  q_m = alpha u_i + (1 - alpha) u_j.
//                  For m < n this is p_m exactly (returned as the row itself);
//                  beyond, computed in double and rounded once.
//
// Files: NumPy .npy (2-D, C order, '<f4' '<f2' '<f8') and safetensors
// (F32 F16 BF16 F64, 2-D). Both parsers check every size and offset against
// the bytes they have, so a corrupt or truncated file is a posenc::Error,
// never an out-of-bounds read. (GGUF tensors are read by the GGUF reader.)
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/embedding_add.h"
#include "posenc/gguf.h"

namespace posenc {

enum class OutOfRangePolicy { kError, kClamp, kHierarchical };

std::string_view OutOfRangePolicyName(OutOfRangePolicy policy);  // "error" / "clamp" / "hierarchical"
OutOfRangePolicy ParseOutOfRangePolicy(std::string_view name);

struct LearnedTableSpec {
  std::int64_t row_offset = 0;  // OPT/BART: 2
  OutOfRangePolicy out_of_range = OutOfRangePolicy::kError;
  double alpha = 0.4;  // kHierarchical only; Su's choice. In [0, 1).

  // Throws posenc::Error naming the first field that breaks a rule.
  void Validate() const;
};

class LearnedTable {
 public:
  LearnedTable() = default;
  // values: row-major [rows, dim]. Throws unless rows, dim > 0, the size
  // matches and every value is finite.
  LearnedTable(std::int64_t rows, std::int64_t dim, std::vector<float> values, std::string source_dtype = "float32");

  // Parsers over bytes already in memory, and file loaders. `tensor` names
  // the safetensors entry; empty picks the only tensor in the file.
  static LearnedTable FromNpy(std::span<const std::uint8_t> bytes);
  static LearnedTable FromSafetensors(std::span<const std::uint8_t> bytes, std::string_view tensor = {});
  static LearnedTable LoadNpy(const std::string& path);
  static LearnedTable LoadSafetensors(const std::string& path, std::string_view tensor = {});
  // A 2-D tensor of a GGUF file (any type posenc dequantizes); ggml shape
  // {dim, rows}. `tensor` empty means GPT-2's "position_embd.weight".
  static LearnedTable FromGguf(const GgufFile& file, std::string_view tensor = {});
  static LearnedTable LoadGguf(const std::string& path, std::string_view tensor = {});
  // By extension: .npy, .safetensors or .gguf.
  static LearnedTable Load(const std::string& path, std::string_view tensor = {});

  std::int64_t rows() const { return rows_; }
  std::int64_t dim() const { return dim_; }
  // The file's element type ("<f4", "F16", ...) or "float32" when built in memory.
  const std::string& source_dtype() const { return source_dtype_; }
  std::span<const float> values() const { return values_; }
  const float* RowData(std::int64_t row) const { return values_.data() + row * dim_; }

  // How many positions (0, 1, ...) the spec serves: rows - row_offset under
  // kError, (rows - row_offset)^2 under kHierarchical, unbounded (INT64_MAX)
  // under kClamp.
  std::int64_t Capacity(const LearnedTableSpec& spec) const;
  // The encoding of one position (throws past Capacity or for p < 0).
  std::vector<float> Lookup(const LearnedTableSpec& spec, std::int64_t position) const;
  std::vector<double> RowF64(const LearnedTableSpec& spec, std::int64_t position) const;
  // Encodings of many positions, row-major [positions.size(), dim].
  std::vector<float> Gather(const LearnedTableSpec& spec, std::span<const std::int64_t> positions) const;

 private:
  std::int64_t rows_ = 0;
  std::int64_t dim_ = 0;
  std::vector<float> values_;
  std::string source_dtype_;
};

// Throws posenc::Error unless the spec, the table, the call's shapes and
// every position (within Capacity) fit.
void ValidateLearnedTableCall(const LearnedTable& table, const LearnedTableSpec& spec, const EmbeddingAddCall& call);

// The fast path: the same SIMD kernel as AddSinusoidal, rows from the table.
void AddLearnedTable(const LearnedTable& table, const LearnedTableSpec& spec, const EmbeddingAddCall& call);

namespace reference {
// Element by element in double precision, rounded once.
void AddLearnedTable(const LearnedTable& table, const LearnedTableSpec& spec, const EmbeddingAddCall& call);
}  // namespace reference

}  // namespace posenc
