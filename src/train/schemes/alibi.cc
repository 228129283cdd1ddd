// ALiBi (Press et al., ICLR 2022): the bias -slope_h (i - j) with the fixed
// geometric slopes of AlibiSlopes. Nothing is trained.
#include "posenc/alibi.h"
#include "train/scheme_trainer.h"

namespace posenc::tiny_lm {
namespace {

class AlibiTrainer final : public SchemeTrainer {
 public:
  using SchemeTrainer::SchemeTrainer;
  std::vector<SchemeTensor> Tensors(std::int64_t /*layer*/) const override { return {}; }

  LayerTerms Layer(const TinyLmParams& /*params*/, std::int64_t /*layer*/, std::int64_t length) const override {
    const std::int64_t heads = config().heads;
    const std::vector<double> slopes = Slopes();
    LayerTerms terms;
    terms.distance_bias.resize(static_cast<std::size_t>(heads * length));
    for (std::int64_t h = 0; h < heads; ++h) {
      for (std::int64_t delta = 0; delta < length; ++delta) {
        terms.distance_bias[h * length + delta] = AlibiBiasAt(AlibiForm::kDistance, slopes[h], delta, 0);
      }
    }
    return terms;
  }

  std::optional<PositionEncoding> KernelEncoding(const TinyLmParams& /*params*/,
                                                 std::int64_t /*layer*/) const override {
    return AlibiEncoding{.slopes = Slopes(), .form = AlibiForm::kDistance};
  }

  double ScratchBytes(std::int64_t batch) const override {  // float64 [B H, T] partials of the bias
    return sizeof(double) * static_cast<double>(batch * config().heads * config().PositionExtent());
  }

 private:
  std::vector<double> Slopes() const { return AlibiSlopes(AlibiSpec{.heads = config().heads}); }
};

}  // namespace

std::unique_ptr<SchemeTrainer> MakeSchemeTrainer(const AlibiScheme& /*scheme*/, const TinyLmConfig& config) {
  return std::make_unique<AlibiTrainer>(config);
}

}  // namespace posenc::tiny_lm
