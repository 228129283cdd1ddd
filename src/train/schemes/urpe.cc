// URPE (Luo et al., NeurIPS 2022, "Your Transformer May Not be as Powerful
// as You Expect"; lsj2408/URPE), in the causal decoder, per layer:
//   out_i = sum_j softmax_j(q_i.k_j / sqrt(hd) + B_h[b(i - j)]) C_h[b(i - j)] v_j
// b the T5 causal bucket of the distance (t5_bias.h), B a relative bias and
// C the Toeplitz weight per (bucket, head), no renormalization. The paper
// builds C over exact distances of a fixed maximum length; bucketing both
// gives them a value at every length (the last bucket from max_distance
// on). Mapped onto the trainer's terms: B a bias of the distance, C the
// probability weight. The kernel has it (UrpeEncoding).
//
// Tensors of layer N ([buckets, heads], HF's relative_attention_bias
// layout; none decays): blk.N.attn_urpe_bias.weight Normal(0, 0.02), as
// T5's table; blk.N.attn_urpe_scale.weight 1 (C = 1 is the plain bias).
#include <string>

#include "posenc/error.h"
#include "posenc/t5_bias.h"
#include "train/scheme_trainer.h"
#include "train/schemes/bucket_table.h"
#include "train/tensor_init.h"
#include "train/tiny_lm_internal.h"

namespace posenc::tiny_lm {
namespace {

enum UrpeTensor : std::size_t { kBias, kScale };

class UrpeTrainer final : public SchemeTrainer {
 public:
  UrpeTrainer(const UrpeScheme& scheme, const TinyLmConfig& config) : SchemeTrainer(config), scheme_(scheme) {
    CheckCausalBuckets(scheme.buckets, scheme.max_distance, "urpe");
  }

  std::vector<SchemeTensor> Tensors(std::int64_t layer) const override {
    if (layer == kModelWide) return {};
    const std::string prefix = "blk." + std::to_string(layer) + ".attn_urpe_";
    const std::vector<std::int64_t> shape{scheme_.buckets, config().heads};
    return {{.name = prefix + "bias.weight",
             .shape = shape,
             .init = [](TinyLmTensor& t, std::uint64_t seed) { FillNormal(t, seed, 0.02); }},
            {.name = prefix + "scale.weight", .shape = shape, .init = [](TinyLmTensor& t, std::uint64_t /*seed*/) {
               FillConstant(t, 1.0f);
             }}};
  }

  LayerTerms Layer(const TinyLmParams& params, std::int64_t layer, std::int64_t length) const override {
    const std::vector<TinyLmTensor>& t = params.blocks[static_cast<std::size_t>(layer)].scheme;
    LayerTerms terms;
    terms.distance_bias = TableByDistance(Spec(), t[kBias], config().heads, length);
    terms.probability_weight = TableByDistance(Spec(), t[kScale], config().heads, length);
    return terms;
  }

  void LayerBackward(const TinyLmParams& /*params*/, std::int64_t layer, std::int64_t length,
                     const LayerTermGrads& dterms, TinyLmParams& grads) const override {
    std::vector<TinyLmTensor>& g = grads.blocks[static_cast<std::size_t>(layer)].scheme;
    AddByBucket(Spec(), dterms.distance_bias, config().heads, length, g[kBias]);
    AddByBucket(Spec(), dterms.probability_weight, config().heads, length, g[kScale]);
  }

  std::optional<PositionEncoding> KernelEncoding(const TinyLmParams& params, std::int64_t layer) const override {
    const std::vector<TinyLmTensor>& t = params.blocks[static_cast<std::size_t>(layer)].scheme;
    return UrpeEncoding{.buckets = Spec(),
                        .bias = {t[kBias].values.begin(), t[kBias].values.end()},
                        .scale = {t[kScale].values.begin(), t[kScale].values.end()}};
  }

  double ScratchBytes(std::int64_t batch) const override {  // float64 [B H, T] partials of B and of C
    return 2.0 * sizeof(double) * static_cast<double>(batch * config().heads * config().PositionExtent());
  }

 private:
  T5BucketSpec Spec() const {
    return {.num_buckets = scheme_.buckets, .max_distance = scheme_.max_distance, .direction = T5Direction::kCausal};
  }
  UrpeScheme scheme_;
};

}  // namespace

std::unique_ptr<SchemeTrainer> MakeSchemeTrainer(const UrpeScheme& scheme, const TinyLmConfig& config) {
  return std::make_unique<UrpeTrainer>(scheme, config);
}

}  // namespace posenc::tiny_lm
