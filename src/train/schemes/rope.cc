// RoPE (Su et al. 2021; Su Jianlin's posts on kexue.fm): q and k rotated by
// their positions, half-split pairs (i, i + hd/2) as GPT-NeoX and Llama in
// Hugging Face, every dimension of a head rotated, base rope_theta.
// Nothing is trained; the backward rotates the gradients back.
#include <cmath>

#include "posenc/error.h"
#include "posenc/rope_frequencies.h"
#include "train/scheme_trainer.h"
#include "train/tiny_lm_internal.h"

namespace posenc::tiny_lm {
namespace {

class RopeTrainer final : public SchemeTrainer {
 public:
  RopeTrainer(const RopeScheme& scheme, const TinyLmConfig& config) : SchemeTrainer(config), scheme_(scheme) {
    Require(config.HeadDim() % 2 == 0, kOp, "head_dim", config.HeadDim(),
            "must be even for rope (d_model " + std::to_string(config.d_model) + " / heads " +
                std::to_string(config.heads) + "; dimensions rotate in pairs)");
    Require(std::isfinite(scheme.theta) && scheme.theta > 1, kOp, "rope_theta", scheme.theta,
            "must be a finite number > 1");
  }
  std::vector<SchemeTensor> Tensors(std::int64_t /*layer*/) const override { return {}; }
  std::optional<RopeSpec> Rotation() const override {
    return RopeSpec{.theta = scheme_.theta, .head_dim = config().HeadDim(), .layout = RopeLayout::kHalfSplit};
  }
  std::optional<PositionEncoding> KernelEncoding(const TinyLmParams& /*params*/,
                                                 std::int64_t /*layer*/) const override {
    const RopeSpec spec = *Rotation();
    return RopeEncoding{.spec = spec, .frequencies = ComputeRopeFrequencies(spec, config().train_length)};
  }

 private:
  RopeScheme scheme_;
};

}  // namespace

std::unique_ptr<SchemeTrainer> MakeSchemeTrainer(const RopeScheme& scheme, const TinyLmConfig& config) {
  return std::make_unique<RopeTrainer>(scheme, config);
}

}  // namespace posenc::tiny_lm
