// NoPE: no positional information at all; causal attention alone tells a
// token how many came before it (Kazemnejad et al., NeurIPS 2023).
#include "train/scheme_trainer.h"

namespace posenc::tiny_lm {
namespace {

class NopeTrainer final : public SchemeTrainer {
 public:
  using SchemeTrainer::SchemeTrainer;
  std::vector<SchemeTensor> Tensors(std::int64_t /*layer*/) const override { return {}; }
  std::optional<PositionEncoding> KernelEncoding(const TinyLmParams& /*params*/,
                                                 std::int64_t /*layer*/) const override {
    return NoPositionEncoding{};
  }
};

}  // namespace

std::unique_ptr<SchemeTrainer> MakeSchemeTrainer(const NopeScheme& /*scheme*/, const TinyLmConfig& config) {
  return std::make_unique<NopeTrainer>(config);
}

}  // namespace posenc::tiny_lm
