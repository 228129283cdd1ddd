// T5's relative bias (Raffel et al. 2020): causal log buckets of i - j
// (t5_bias.h), a learned bias per (bucket, head), one table
// "attn_rel_b.weight" [buckets, heads] (Hugging Face's
// relative_attention_bias layout) shared by every layer, as in T5.
#include <string>

#include "posenc/error.h"
#include "posenc/t5_bias.h"
#include "train/scheme_trainer.h"
#include "train/schemes/bucket_table.h"
#include "train/tensor_init.h"
#include "train/tiny_lm_internal.h"

namespace posenc::tiny_lm {
namespace {

class T5Trainer final : public SchemeTrainer {
 public:
  T5Trainer(const T5Scheme& scheme, const TinyLmConfig& config) : SchemeTrainer(config), scheme_(scheme) {
    CheckCausalBuckets(scheme.buckets, scheme.max_distance, "t5");
  }

  std::vector<SchemeTensor> Tensors(std::int64_t layer) const override {
    if (layer != kModelWide) return {};
    return {{.name = "attn_rel_b.weight",
             .shape = {scheme_.buckets, config().heads},
             .init = [](TinyLmTensor& t, std::uint64_t seed) { FillNormal(t, seed, 0.02); }}};
  }

  LayerTerms Layer(const TinyLmParams& params, std::int64_t /*layer*/, std::int64_t length) const override {
    LayerTerms terms;
    terms.distance_bias = TableByDistance(Spec(), params.scheme[0], config().heads, length);
    return terms;
  }

  // One table for every layer: each layer's gradient adds to it.
  void LayerBackward(const TinyLmParams& /*params*/, std::int64_t /*layer*/, std::int64_t length,
                     const LayerTermGrads& dterms, TinyLmParams& grads) const override {
    AddByBucket(Spec(), dterms.distance_bias, config().heads, length, grads.scheme[0]);
  }

  std::optional<PositionEncoding> KernelEncoding(const TinyLmParams& params, std::int64_t /*layer*/) const override {
    const std::vector<float>& table = params.scheme[0].values;
    return T5BiasEncoding{.buckets = Spec(), .weights = {table.begin(), table.end()}};
  }

  double ScratchBytes(std::int64_t batch) const override {  // float64 [B H, T] partials of the bias
    return sizeof(double) * static_cast<double>(batch * config().heads * config().PositionExtent());
  }

 private:
  T5BucketSpec Spec() const {
    return {.num_buckets = scheme_.buckets, .max_distance = scheme_.max_distance, .direction = T5Direction::kCausal};
  }

  T5Scheme scheme_;
};

}  // namespace

std::unique_ptr<SchemeTrainer> MakeSchemeTrainer(const T5Scheme& scheme, const TinyLmConfig& config) {
  return std::make_unique<T5Trainer>(scheme, config);
}

}  // namespace posenc::tiny_lm
