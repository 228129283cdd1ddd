// T5's relative bias (Raffel et al. 2020): causal log buckets of i - j
// (t5_bias.h), a learned bias per (bucket, head), one table
// "attn_rel_b.weight" [buckets, heads] (Hugging Face's
// relative_attention_bias layout) shared by every layer, as in T5.
#include <string>

#include "posenc/error.h"
#include "posenc/t5_bias.h"
#include "train/scheme_trainer.h"
#include "train/tensor_init.h"
#include "train/tiny_lm_internal.h"

namespace posenc::tiny_lm {
namespace {

class T5Trainer final : public SchemeTrainer {
 public:
  T5Trainer(const T5Scheme& scheme, const TinyLmConfig& config) : SchemeTrainer(config), scheme_(scheme) {
    RequireInRange(scheme.buckets, 2, kMaxWidth, "t5_buckets", " (causal: an exact and a log bucket at least)");
    Require(scheme.max_distance > scheme.buckets / 2 && scheme.max_distance <= kMaxLength, kOp, "t5_max_distance",
            scheme.max_distance,
            "must be in (t5_buckets / 2 = " + std::to_string(scheme.buckets / 2) + ", " + std::to_string(kMaxLength) +
                "] (past the exact buckets, or the log range is empty)");
  }

  std::vector<SchemeTensor> Tensors(std::int64_t layer) const override {
    if (layer != kModelWide) return {};
    return {{.name = "attn_rel_b.weight",
             .shape = {scheme_.buckets, config().heads},
             .init = [](TinyLmTensor& t, std::uint64_t seed) { FillNormal(t, seed, 0.02); }}};
  }

  LayerTerms Layer(const TinyLmParams& params, std::int64_t /*layer*/, std::int64_t length) const override {
    const std::int64_t heads = config().heads;
    const std::vector<std::int64_t> buckets = Buckets(length);
    const std::vector<float>& table = params.scheme[0].values;
    LayerTerms terms;
    terms.distance_bias.resize(static_cast<std::size_t>(heads * length));
    for (std::int64_t h = 0; h < heads; ++h) {
      for (std::int64_t delta = 0; delta < length; ++delta) {
        terms.distance_bias[h * length + delta] = table[buckets[delta] * heads + h];
      }
    }
    return terms;
  }

  void LayerBackward(const TinyLmParams& /*params*/, std::int64_t /*layer*/, std::int64_t length,
                     const LayerTermGrads& dterms, TinyLmParams& grads) const override {
    const std::int64_t heads = config().heads;
    const std::vector<std::int64_t> buckets = Buckets(length);
    std::vector<double> sum(grads.scheme[0].values.size(), 0.0);
    for (std::int64_t h = 0; h < heads; ++h) {
      for (std::int64_t delta = 0; delta < length; ++delta) {
        sum[buckets[delta] * heads + h] += dterms.distance_bias[h * length + delta];
      }
    }
    for (std::size_t e = 0; e < sum.size(); ++e) grads.scheme[0].values[e] += static_cast<float>(sum[e]);
  }

  std::optional<PositionEncoding> KernelEncoding(const TinyLmParams& params, std::int64_t /*layer*/) const override {
    const std::vector<float>& table = params.scheme[0].values;
    return T5BiasEncoding{.buckets = Spec(), .weights = {table.begin(), table.end()}};
  }

  double ScratchBytes(std::int64_t batch) const override {  // float64 [B H, T] partials of the bias
    return sizeof(double) * static_cast<double>(batch * config().heads * config().train_length);
  }

 private:
  T5BucketSpec Spec() const {
    return {.num_buckets = scheme_.buckets, .max_distance = scheme_.max_distance, .direction = T5Direction::kCausal};
  }
  // The bucket of key j = i - delta: relative position j - i = -delta.
  std::vector<std::int64_t> Buckets(std::int64_t length) const {
    const T5BucketSpec spec = Spec();
    std::vector<std::int64_t> buckets(static_cast<std::size_t>(length));
    for (std::int64_t delta = 0; delta < length; ++delta) buckets[delta] = T5RelativeBucket(spec, -delta);
    return buckets;
  }

  T5Scheme scheme_;
};

}  // namespace

std::unique_ptr<SchemeTrainer> MakeSchemeTrainer(const T5Scheme& scheme, const TinyLmConfig& config) {
  return std::make_unique<T5Trainer>(scheme, config);
}

}  // namespace posenc::tiny_lm
