// Sinusoidal absolute position encodings (Vaswani et al. 2017) and the fused
// kernel that adds them to token embeddings.
//
// For position p and pair k (k < P = dim / 2) with frequency w_k:
//   sin(p w_k) and cos(p w_k), placed by the order:
//
//   kInterleaved (the paper; HF create_sinusoidal_embeddings writes the same
//   values for even dims):   [s0 c0 s1 c1 ... s_{P-1} c_{P-1}]
//   kConcat (tensor2tensor, fairseq, XLNet's relative encoding):
//                            [s0 s1 ... s_{P-1} | c0 c1 ... c_{P-1}]
//
// and frequencies by the spacing:
//   kPaper      w_k = base^(-2k/dim)            (the paper, XLNet, HF)
//   kEndpoints  w_k = base^(-k/(P-1))           (tensor2tensor, fairseq: the
//               last pair has exactly 1/base; needs P >= 2)
//
// An odd dim keeps P = floor(dim/2) pairs and a last element that is always 0
// (fairseq's zero pad); the paper's formula for w_k still uses dim itself.
//
// Angles p * w_k are formed in double precision and reduced modulo 2*pi
// there, so positions of 10^6 and beyond stay accurate; only the final
// encoding is rounded to float32 (and the output to its dtype).
//
// Relative property: p_{k+D} = T(D) p_k with T(D) block-diagonal, one 2x2
// rotation by D * w_k per pair, depending only on D (tested).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "posenc/embedding_add.h"

namespace posenc {

enum class SinusoidalOrder { kInterleaved, kConcat };
enum class SinusoidalSpacing { kPaper, kEndpoints };

std::string_view SinusoidalOrderName(SinusoidalOrder order);  // "interleaved" / "concat"
SinusoidalOrder ParseSinusoidalOrder(std::string_view name);
std::string_view SinusoidalSpacingName(SinusoidalSpacing spacing);  // "paper" / "endpoints"
SinusoidalSpacing ParseSinusoidalSpacing(std::string_view name);

// The largest dim a SinusoidalSpec accepts: model widths are at most tens of
// thousands; a larger value is a mistake that would allocate tables that wide.
inline constexpr std::int64_t kMaxSinusoidalDim = 1 << 20;

struct SinusoidalSpec {
  std::int64_t dim = 0;
  double base = 10000.0;
  SinusoidalOrder order = SinusoidalOrder::kInterleaved;
  SinusoidalSpacing spacing = SinusoidalSpacing::kPaper;

  std::int64_t Pairs() const { return dim / 2; }
  // Where pair k's sine and cosine live in an encoding vector.
  std::int64_t SinIndex(std::int64_t k) const { return order == SinusoidalOrder::kInterleaved ? 2 * k : k; }
  std::int64_t CosIndex(std::int64_t k) const {
    return order == SinusoidalOrder::kInterleaved ? 2 * k + 1 : Pairs() + k;
  }
  // Throws posenc::Error naming the first field that breaks a rule.
  void Validate() const;
};

// w_k for k < Pairs(), in double.
std::vector<double> SinusoidalInvFreq(const SinusoidalSpec& spec);

// The encodings of `positions` (any real numbers, negative too: XLNet uses
// them), float64, row-major [positions.size(), dim].
std::vector<double> SinusoidalTable(const SinusoidalSpec& spec, std::span<const double> positions);
// Positions start, start + 1, ..., start + count - 1.
std::vector<double> SinusoidalTable(const SinusoidalSpec& spec, std::int64_t start, std::int64_t count);

// The fast kernel: SIMD (Highway, dynamic dispatch), multithreaded, in place
// or not, f32/f16/bf16 embeddings (computed in float32, rounded once).
void AddSinusoidal(const SinusoidalSpec& spec, const EmbeddingAddCall& call);

namespace reference {
// The formula one element at a time in double precision, rounded once.
void AddSinusoidal(const SinusoidalSpec& spec, const EmbeddingAddCall& call);
}  // namespace reference

}  // namespace posenc
