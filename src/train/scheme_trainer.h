// What a positional scheme (position_scheme.h) is to the tiny model's
// trainer: its tensors, its forward terms, their backward, and its lowering
// to the attention kernel. One SchemeTrainer subclass per scheme, in
// src/train/schemes/<name>.cc; the trainer, the float64 reference, the
// parameter lists, the checkpoints and the evaluation ask only this
// interface, never which scheme it is.
//
// A scheme acts on a pass at three places, each optional:
//   input      x = token_embd[token] * EmbeddingScale() + InputPositions()[p_t],
//              or the scheme's own InputEmbedding (token_embd is then the
//              output projection only)
//   layer in   per layer, added to the attention input (FLOATER)
//   q and k    rotated by Rotation() (RoPE) at positions p_t
//   attention  per layer, LayerTerms: the scale, a bias of (h, p_i - p_j), a
//              bias of (h, p_i, p_i - p_j), relative tables read by q, by k
//              and added to v through the distance, a key bias
// where token t of a pass sits at position p_t: t, or an ordered random
// subset of [0, position_range) (randomized positions). A scheme computes
// its terms for the positions 0..E-1 of a pass (E = p_{T-1} + 1, the
// `length` its functions take); the trainer reads them at the tokens'
// positions, so no scheme needs to know which positions a pass has.
// and has the gradient of each (InputPositionsBackward, LayerBackward) in
// terms of its own tensors. The factories below are one overload per
// alternative of PositionScheme, called through std::visit: a scheme
// without its factory does not compile.
//
// Shapes: T tokens of a sequence, E positions the terms cover (T unless
// randomized), d d_model, H heads, hd = d / H. Where a function below says
// `length` it is E.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "posenc/attention.h"
#include "posenc/rope_spec.h"
#include "posenc/tiny_lm.h"

namespace posenc::tiny_lm {

// Tensors(kModelWide) are the scheme's model-wide tensors.
inline constexpr std::int64_t kModelWide = -1;

struct SchemeTensor {
  std::string name;  // as in checkpoints: "attn_rel_b.weight", "blk.3.attn_rel_k.weight"
  std::vector<std::int64_t> shape;
  bool decays = false;  // AdamW's weight decay (positional tables: no)
  // Fills the tensor (name, shape and size already set) from the seed;
  // element e a pure function of (seed, name, e) (tensor_init.h).
  std::function<void(TinyLmTensor& tensor, std::uint64_t seed)> init;
};

// A table of vectors [hd] read through the distance of a query i and a key
// j: row row_of_distance[i - j] (of head h's rows when per_head).
struct RelativeTableTerm {
  std::vector<double> values;  // [heads, rows, hd] or [rows, hd]; empty: no such term
  bool per_head = false;
  std::int64_t rows = 0;
  std::vector<std::int64_t> row_of_distance;  // [E], each in [0, rows)

  bool empty() const { return values.empty(); }
};

// One layer's terms of a pass of length T, float64 (the fast path rounds
// them to float32; the float64 reference reads them as they are):
//   s_ij = scale (q_i.k_j + u_h.k_j + q_i.A[i - j] + k_j.B[i - j])
//          + bias_h(i - j) + pair_h(i, i - j)
//   o_i  = sum_j p_ij w_h(i - j) (v_j + C[i - j])
// A the query table, B the key table, C the value table, u the key bias, w
// the probability weight (URPE's Toeplitz matrix; 1 when absent).
struct LayerTerms {
  std::optional<double> scale;             // unset: 1 / sqrt(hd)
  std::vector<double> distance_bias;       // [H, E]: query at p, key at p - delta at h*E + delta; or empty
  std::vector<double> pair_bias;           // [H, E, E]: query at p, key at p - delta at (h*E + p)*E + delta; or empty
  RelativeTableTerm query_table;           // Shaw's a^K, XLNet's projected sinusoid, DeBERTa's c2p
  RelativeTableTerm key_table;             // DeBERTa's p2c
  RelativeTableTerm value_table;           // Shaw's a^V
  std::vector<double> key_bias;            // [H, hd]: XLNet's content bias u, or empty
  std::vector<double> probability_weight;  // [H, E]: w_h(delta) at h*E + delta, or empty
};

// d loss / d each term of LayerTerms, same shapes (empty where the term is).
struct LayerTermGrads {
  std::vector<double> distance_bias, pair_bias, query_table, key_table, value_table, key_bias, probability_weight;
};

class SchemeTrainer {
 public:
  explicit SchemeTrainer(const TinyLmConfig& config) : config_(config) {}
  virtual ~SchemeTrainer() = default;
  SchemeTrainer(const SchemeTrainer&) = delete;
  SchemeTrainer& operator=(const SchemeTrainer&) = delete;

  // The scheme's tensors of layer `layer`, or its model-wide ones
  // (kModelWide), in checkpoint order.
  virtual std::vector<SchemeTensor> Tensors(std::int64_t layer) const = 0;

  // What the token embedding is multiplied by at the input (the tied output
  // projection is never scaled).
  virtual double EmbeddingScale() const { return 1.0; }
  // [E, d] added to the input embeddings (row p: position p), or empty.
  virtual std::vector<double> InputPositions(const TinyLmParams& params, std::int64_t length) const;
  // dpositions [T, d] (summed over the batch) into the scheme's tensors of grads (+=).
  virtual void InputPositionsBackward(const TinyLmParams& params, std::span<const double> dpositions,
                                      std::int64_t length, TinyLmParams& grads) const;

  // The input rows [B T, d] (row b T + t: token inputs[b T + t] at position
  // positions[t], positions [T]) when the scheme makes the whole input
  // embedding itself; empty when it keeps token_embd * EmbeddingScale +
  // InputPositions.
  virtual std::vector<double> InputEmbedding(const TinyLmParams& params, std::span<const std::uint8_t> inputs,
                                             std::span<const std::int64_t> positions) const;
  // dx [B T, d] into the scheme's tensors of grads (+=), for a scheme whose
  // InputEmbedding is not empty.
  virtual void InputEmbeddingBackward(const TinyLmParams& params, std::span<const std::uint8_t> inputs,
                                      std::span<const std::int64_t> positions, std::span<const double> dx,
                                      TinyLmParams& grads) const;

  // Per layer, [E, d] (row p: position p) added to the layer's attention input (after its
  // RmsNorm, before the q, k, v projection: FLOATER), all layers at once
  // (a scheme may solve something once for every layer); empty otherwise.
  virtual std::vector<std::vector<double>> LayerInputPositions(const TinyLmParams& params, std::int64_t length) const;
  // d loss / d each layer's [E, d] (summed over the batch) into the scheme's
  // tensors of grads (+=).
  virtual void LayerInputPositionsBackward(const TinyLmParams& params, std::int64_t length,
                                           const std::vector<std::vector<double>>& dpositions,
                                           TinyLmParams& grads) const;

  // The rotation of q and k, if the scheme rotates them.
  virtual std::optional<RopeSpec> Rotation() const { return std::nullopt; }

  virtual LayerTerms Layer(const TinyLmParams& params, std::int64_t layer, std::int64_t length) const;
  // The terms' gradients into the scheme's tensors of grads (+=: layers
  // sharing a tensor add up, in the order the backward visits them).
  virtual void LayerBackward(const TinyLmParams& params, std::int64_t layer, std::int64_t length,
                             const LayerTermGrads& dterms, TinyLmParams& grads) const;

  // Layer `layer`'s attention as posenc::Attention's encoding (q, k, v the
  // unrotated columns of qkv; input positions stay with the model), or
  // nullopt where the kernel has no form of this scheme.
  virtual std::optional<PositionEncoding> KernelEncoding(const TinyLmParams& params, std::int64_t layer) const = 0;

  // Throws posenc::Error unless a pass of `length` can run (gradients:
  // a training call). The common checks are the caller's.
  virtual void CheckLength(std::int64_t length, bool gradients) const;

  // Bytes of training scratch beyond the common model's, for one step of
  // `batch` sequences of train_length (float64 partials kept per (b, h)).
  virtual double ScratchBytes(std::int64_t batch) const;

 protected:
  const TinyLmConfig& config() const { return config_; }

 private:
  TinyLmConfig config_;
};

// The trainer of config.scheme. Checks the scheme's fields against the
// config (throws posenc::Error "[tiny_lm] parameter = value: rule").
std::unique_ptr<SchemeTrainer> MakeSchemeTrainer(const TinyLmConfig& config);

// One factory per scheme (src/train/schemes/<name>.cc).
std::unique_ptr<SchemeTrainer> MakeSchemeTrainer(const NopeScheme& scheme, const TinyLmConfig& config);
std::unique_ptr<SchemeTrainer> MakeSchemeTrainer(const SinusoidalScheme& scheme, const TinyLmConfig& config);
std::unique_ptr<SchemeTrainer> MakeSchemeTrainer(const LearnedScheme& scheme, const TinyLmConfig& config);
std::unique_ptr<SchemeTrainer> MakeSchemeTrainer(const ShawScheme& scheme, const TinyLmConfig& config);
std::unique_ptr<SchemeTrainer> MakeSchemeTrainer(const T5Scheme& scheme, const TinyLmConfig& config);
std::unique_ptr<SchemeTrainer> MakeSchemeTrainer(const AlibiScheme& scheme, const TinyLmConfig& config);
std::unique_ptr<SchemeTrainer> MakeSchemeTrainer(const RopeScheme& scheme, const TinyLmConfig& config);
std::unique_ptr<SchemeTrainer> MakeSchemeTrainer(const KerpleScheme& scheme, const TinyLmConfig& config);
std::unique_ptr<SchemeTrainer> MakeSchemeTrainer(const FireScheme& scheme, const TinyLmConfig& config);
std::unique_ptr<SchemeTrainer> MakeSchemeTrainer(const XlnetScheme& scheme, const TinyLmConfig& config);
std::unique_ptr<SchemeTrainer> MakeSchemeTrainer(const DebertaScheme& scheme, const TinyLmConfig& config);
std::unique_ptr<SchemeTrainer> MakeSchemeTrainer(const ComplexOrderScheme& scheme, const TinyLmConfig& config);
std::unique_ptr<SchemeTrainer> MakeSchemeTrainer(const UrpeScheme& scheme, const TinyLmConfig& config);
std::unique_ptr<SchemeTrainer> MakeSchemeTrainer(const FloaterScheme& scheme, const TinyLmConfig& config);

}  // namespace posenc::tiny_lm
