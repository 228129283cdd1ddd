// DeBERTa's disentangled attention (He et al., ICLR 2021), trained in the
// causal decoder:
//   s_ij = (q_i.k_j + q_i.K_r[c(i - j)] + k_j.Q_r[c(i - j)]) / sqrt(3 hd)
//   c(delta) = clamp(LogBucket(delta) + S, 0, 2S - 1), S = buckets
// (DebertaLogBucket: distances up to S / 2 exact, then logarithmic to
// max_relative_positions, the last bucket beyond: any length runs). K_r and
// Q_r are the model's relative embeddings E [2S, d] projected per layer by
// trained matrices (DeBERTa v1's pos_proj and pos_q_proj; v2/v3 reuse the
// layer's key and query projections and normalize E with a LayerNorm,
// neither done here). c2p is the trainer's per-head query table, p2c its key
// table (LogBucket is odd, so -LogBucket(j - i) = LogBucket(i - j): one row
// map for both).
//
// Tensors (Normal(0, 0.02), DeBERTa's initializer_range; none decays):
// rel_embd.weight [2S, d], blk.N.attn_deberta_k.weight [d, d],
// blk.N.attn_deberta_q.weight [d, d]. The kernel has no DeBERTa form.
#include <algorithm>
#include <string>

#include "posenc/deberta_relative.h"
#include "posenc/error.h"
#include "train/scheme_trainer.h"
#include "train/schemes/projected_table.h"
#include "train/tensor_init.h"
#include "train/tiny_lm_internal.h"

namespace posenc::tiny_lm {
namespace {

enum DebertaTensor : std::size_t { kKeyProjection, kQueryProjection };

class DebertaTrainer final : public SchemeTrainer {
 public:
  DebertaTrainer(const DebertaScheme& scheme, const TinyLmConfig& config)
      : SchemeTrainer(config), spec_{.position_buckets = scheme.buckets,
                                     .max_relative_positions = scheme.max_relative_positions} {
    RequireInRange(scheme.buckets, 4, kMaxWidth, "deberta_buckets", " (the exact distances are buckets / 2)");
    Require(scheme.buckets % 2 == 0, kOp, "deberta_buckets", scheme.buckets, "must be even (a side each)");
    Require(scheme.max_relative_positions > scheme.buckets / 2 + 1 && scheme.max_relative_positions <= kMaxLength, kOp,
            "deberta_max_relative_positions", scheme.max_relative_positions,
            "must be in (deberta_buckets / 2 + 1 = " + std::to_string(scheme.buckets / 2 + 1) + ", " +
                std::to_string(kMaxLength) + "] (the log range must be non-empty)");
  }

  std::vector<SchemeTensor> Tensors(std::int64_t layer) const override {
    const auto init = [](TinyLmTensor& t, std::uint64_t seed) { FillNormal(t, seed, 0.02); };
    const std::int64_t d = config().d_model;
    if (layer == kModelWide) return {{.name = "rel_embd.weight", .shape = {Rows(), d}, .init = init}};
    const std::string prefix = "blk." + std::to_string(layer) + ".attn_deberta_";
    return {{.name = prefix + "k.weight", .shape = {d, d}, .init = init},
            {.name = prefix + "q.weight", .shape = {d, d}, .init = init}};
  }

  LayerTerms Layer(const TinyLmParams& params, std::int64_t layer, std::int64_t length) const override {
    const std::vector<TinyLmTensor>& t = params.blocks[static_cast<std::size_t>(layer)].scheme;
    const std::vector<double> embeddings = Embeddings(params);
    const std::vector<std::int64_t> rows = RowOfDistance(length);
    const auto table = [&](const TinyLmTensor& w) {
      return RelativeTableTerm{.values = ProjectPerHead(embeddings, Rows(), w, config().heads, config().HeadDim()),
                               .per_head = true,
                               .rows = Rows(),
                               .row_of_distance = rows};
    };
    LayerTerms terms;
    terms.scale = spec_.Scale(config().HeadDim());
    terms.query_table = table(t[kKeyProjection]);  // c2p: q_i . K_r
    terms.key_table = table(t[kQueryProjection]);  // p2c: k_j . Q_r
    return terms;
  }

  void LayerBackward(const TinyLmParams& params, std::int64_t layer, std::int64_t /*length*/,
                     const LayerTermGrads& dterms, TinyLmParams& grads) const override {
    const std::vector<TinyLmTensor>& t = params.blocks[static_cast<std::size_t>(layer)].scheme;
    std::vector<TinyLmTensor>& g = grads.blocks[static_cast<std::size_t>(layer)].scheme;
    const std::vector<double> embeddings = Embeddings(params);
    std::vector<double> dembeddings(embeddings.size(), 0.0);
    const std::int64_t heads = config().heads, hd = config().HeadDim();
    ProjectPerHeadBackward(dterms.query_table, embeddings, Rows(), t[kKeyProjection], heads, hd, g[kKeyProjection],
                           &dembeddings);
    ProjectPerHeadBackward(dterms.key_table, embeddings, Rows(), t[kQueryProjection], heads, hd, g[kQueryProjection],
                           &dembeddings);
    std::vector<float>& de = grads.scheme[0].values;  // shared by the layers: they add up
    for (std::size_t e = 0; e < de.size(); ++e) de[e] += static_cast<float>(dembeddings[e]);
  }

  std::optional<PositionEncoding> KernelEncoding(const TinyLmParams& /*params*/,
                                                 std::int64_t /*layer*/) const override {
    return std::nullopt;
  }

  double ScratchBytes(std::int64_t batch) const override {  // float64 partials of the two tables per (b, h)
    return 2.0 * sizeof(double) * static_cast<double>(batch * config().heads * Rows() * config().HeadDim());
  }

 private:
  std::int64_t Rows() const { return 2 * spec_.Span(); }

  std::vector<double> Embeddings(const TinyLmParams& params) const {
    return {params.scheme[0].values.begin(), params.scheme[0].values.end()};
  }

  std::vector<std::int64_t> RowOfDistance(std::int64_t length) const {
    std::vector<std::int64_t> rows(static_cast<std::size_t>(length));
    const std::int64_t span = spec_.Span();
    for (std::int64_t delta = 0; delta < length; ++delta) {
      const std::int64_t bucket = DebertaLogBucket(delta, spec_.position_buckets, spec_.max_relative_positions);
      rows[delta] = std::clamp<std::int64_t>(bucket + span, 0, 2 * span - 1);
    }
    return rows;
  }

  DebertaRelativeSpec spec_;
};

}  // namespace

std::unique_ptr<SchemeTrainer> MakeSchemeTrainer(const DebertaScheme& scheme, const TinyLmConfig& config) {
  return std::make_unique<DebertaTrainer>(scheme, config);
}

}  // namespace posenc::tiny_lm
