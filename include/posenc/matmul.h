// Matrix products of a model's linear layers: y = x W^T, in float32.
//
//   x [m, k]   activations, one token a row (row-major, contiguous)
//   W [n, k]   weights as GGUF and PyTorch store them: n outputs of k inputs
//   y [m, n]
//
// The weights are kept in one of two forms (PackedWeights):
//   float32 panels   repacked once into the panel order the SIMD kernel
//                    streams (Pack; a GGUF's F32 tensors; every tensor with
//                    WeightStorage::kFloat32, the reference form);
//   stored rows      the GGUF's own rows of blocks (Q4_0 ... Q8_0, the
//                    K-quants, F16, BF16), a quarter to an eighth of the
//                    float32 bytes. A product of few rows (decode, m <= 4)
//                    reads them directly: each row is dequantized in
//                    registers and dotted with x; a product of many rows
//                    (prefill) dequantizes 64 rows at a time into float32
//                    panels in the cache and runs the float32 kernel, so its
//                    result is bitwise the float32 path's on the dequantized
//                    weights.
// Dequantization is exact (each weight the same float as GgufFile's), so the
// two forms differ only in the float32 rounding of the sums. The
// activations are used as they are (DotActivations::kFloat32), or, for a
// product with quantized stored rows, rounded to int8 in blocks of 32
// (kInt8, as llama.cpp does): integer dot products, several times fewer
// operations a weight, for a rounding of x of at most 1/254 of its block's
// largest value (decode: x86 AVX2 and later; prefill: AVX2, and AVX-512
// with VNNI's vpdpbusd; other targets run the float32 kernels over the
// rounded x). Work is split into blocks of rows and
// columns whose size does not depend on the thread count, and every y[i, j]
// is summed over k in one fixed order, so results are bitwise identical for
// any thread count.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "posenc/gguf.h"

namespace posenc {

// How a model keeps its weights in memory.
enum class WeightStorage {
  kAsStored,  // in the GGUF's type (F32 tensors as float32 panels)
  kFloat32,   // dequantized to float32 panels: the reference, 4 bytes a weight
};

// Consecutive rows of a weight matrix as a GGUF file stores them: `rows`
// rows of k values of ggml type `type`, each row whole blocks of the type.
struct WeightRows {
  GgmlType type = GgmlType::kF32;
  std::int64_t rows = 0;
  std::span<const std::byte> data;  // rows * (k / block_elements) * block_bytes
  std::string_view name;            // the tensor's, for errors ("" : "parts[i]")
};

// The activations of a product with quantized stored rows (Q4_0 ... Q8_0,
// the K-quants), decode and prefill.
enum class DotActivations {
  kFloat32,  // x as it is: the float32 model's result to the rounding of the sums
  kInt8,     // x in blocks of 32 as d q, q = x (1 / d) rounded, d = max|x| / 127 (F32, F16, BF16 rows read x)
};

class PackedWeights {
 public:
  // w: n rows of k floats. Throws posenc::Error naming the parameter for
  // n < 1, k < 1 or w.size() != n * k.
  static PackedWeights Pack(std::span<const float> w, std::int64_t n, std::int64_t k);
  // The rows of `parts` stacked (e.g. Q, K and V, each of its own type) as
  // one [sum of rows, k] matrix, kept as `storage` says; the bytes are
  // copied. Throws posenc::Error naming the part for k < 1, no rows, a k
  // that is not whole blocks of the part's type, a data size that does not
  // match, a block scale that is not finite, or a type without a kernel.
  // `decode`: the activations the decode products will mostly use; with
  // kInt8, Q4_0, Q4_1, Q5_0, Q8_0, Q4_K, Q5_K and Q6_K parts of whole groups of
  // 8 rows are kept 8 rows interleaved for the integer kernel (the same
  // bytes in another order; the other products and Row read them too, a row
  // at a time).
  static PackedWeights FromRows(std::span<const WeightRows> parts, std::int64_t k, WeightStorage storage,
                                DotActivations decode = DotActivations::kFloat32);
  // Whether FromRows keeps `type` as stored (it has a SIMD kernel).
  static bool HasKernel(GgmlType type);

  PackedWeights(PackedWeights&&) noexcept;
  PackedWeights& operator=(PackedWeights&&) noexcept;
  ~PackedWeights();

  std::int64_t rows() const;  // n: outputs
  std::int64_t cols() const;  // k: inputs
  // Bytes held: 4 a weight as float32 panels, the stored bytes otherwise.
  double Bytes() const;
  // Row j (< rows()) as k float32 values: an embedding lookup.
  void Row(std::int64_t j, std::span<float> out) const;

  struct Layout;  // the kernel's panel layout (src/kernels/matmul_kernel.h)
  const Layout& layout() const { return *layout_; }

 private:
  explicit PackedWeights(std::unique_ptr<Layout> layout);
  std::unique_ptr<Layout> layout_;
};

// The kernel a product of few rows (m <= 4) with stored rows takes.
enum class FewRows {
  kDot,     // the decode kernel: W dequantized in registers, x as DotActivations says
  kPanels,  // the kernel of many rows: each y row bitwise what it is in a product of
            // more rows (a prefill's chosen logits equal the same rows of all of them)
};

// y[i, j] = sum_k x[i, k] * W[j, k] for i < m, j < n. x holds m * k values,
// y m * n (overwritten). Throws posenc::Error naming the parameter for m < 0
// or mismatched sizes. Multithreaded (posenc::NumThreads()).
void MatMul(std::span<const float> x, std::int64_t m, const PackedWeights& w, std::span<float> y,
            DotActivations activations = DotActivations::kFloat32, FewRows few = FewRows::kDot);

// MatMul's y a chunk of columns at a time, for a caller that reduces each
// chunk (a perplexity pass's log-softmax over Gemma 3's 262,144 logits a row)
// so that y [m, n] never exists whole: consume(first, width, chunk) for
// first = 0, chunk_columns, 2 chunk_columns, ... < n, width = min(chunk_columns,
// n - first), chunk [m, width] row-major (valid during the call). Every value
// is bitwise MatMul's with FewRows::kPanels (the kernel of many rows). x is
// quantized once (DotActivations::kInt8) for every chunk. Throws
// posenc::Error naming the parameter for m < 0, a mismatched x, or
// chunk_columns not a positive multiple of kColumnChunkAlignment.
inline constexpr std::int64_t kColumnChunkAlignment = 64;  // the kernel's blocks of 4 panels of 16 columns
using ColumnChunkSink = std::function<void(std::int64_t first, std::int64_t width, std::span<const float> chunk)>;
void MatMulColumnChunks(std::span<const float> x, std::int64_t m, const PackedWeights& w, std::int64_t chunk_columns,
                        DotActivations activations, const ColumnChunkSink& consume);

namespace reference {
// The formula as written, summed in double: w is n rows of k floats.
void MatMul(std::span<const float> x, std::int64_t m, std::span<const float> w, std::int64_t n, std::int64_t k,
            std::span<float> y);
// x rounded as DotActivations::kInt8 rounds it (k a multiple of 32): each
// block of 32 as d q, d = max|x| / 127, q = x (1 / d) rounded to nearest,
// ties to even.
std::vector<float> Int8Activations(std::span<const float> x);
}  // namespace reference

}  // namespace posenc
