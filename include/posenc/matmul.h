// Matrix products of a model's linear layers: y = x W^T, in float32.
//
//   x [m, k]   activations, one token a row (row-major, contiguous)
//   W [n, k]   weights as GGUF and PyTorch store them: n outputs of k inputs
//   y [m, n]
//
// The weights are repacked once (PackedWeights) into the panel order the
// SIMD kernel streams; the activations are used as they are. Work is split
// into blocks of rows and columns whose size does not depend on the thread
// count, and every y[i, j] is summed over k in one fixed order, so results
// are bitwise identical for any thread count.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

namespace posenc {

class PackedWeights {
 public:
  // w: n rows of k floats. Throws posenc::Error naming the parameter for
  // n < 1, k < 1 or w.size() != n * k.
  static PackedWeights Pack(std::span<const float> w, std::int64_t n, std::int64_t k);

  PackedWeights(PackedWeights&&) noexcept;
  PackedWeights& operator=(PackedWeights&&) noexcept;
  ~PackedWeights();

  std::int64_t rows() const;  // n: outputs
  std::int64_t cols() const;  // k: inputs

  struct Layout;  // the kernel's panel layout (src/matmul)
  const Layout& layout() const { return *layout_; }

 private:
  explicit PackedWeights(std::unique_ptr<Layout> layout);
  std::unique_ptr<Layout> layout_;
};

// y[i, j] = sum_k x[i, k] * W[j, k] for i < m, j < n. x holds m * k values,
// y m * n (overwritten). Throws posenc::Error naming the parameter for m < 0
// or mismatched sizes. Multithreaded (posenc::NumThreads()).
void MatMul(std::span<const float> x, std::int64_t m, const PackedWeights& w, std::span<float> y);

namespace reference {
// The formula as written, summed in double: w is n rows of k floats.
void MatMul(std::span<const float> x, std::int64_t m, std::span<const float> w, std::int64_t n, std::int64_t k,
            std::span<float> y);
}  // namespace reference

}  // namespace posenc
