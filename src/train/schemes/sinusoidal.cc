// Vaswani et al.'s sinusoid added to the input embeddings: the paper's
// interleaved sin/cos, base 10000, w_k = base^(-2k/d) (sinusoidal.h). The
// token embedding is multiplied by sqrt(d_model) (the paper's section 3.4
// and fairseq's embed_scale): without it the sinusoid's unit amplitude
// drowns embeddings initialised at 0.02. Nothing is trained.
#include <cmath>

#include "posenc/sinusoidal.h"
#include "train/scheme_trainer.h"

namespace posenc::tiny_lm {
namespace {

class SinusoidalTrainer final : public SchemeTrainer {
 public:
  using SchemeTrainer::SchemeTrainer;
  std::vector<SchemeTensor> Tensors(std::int64_t /*layer*/) const override { return {}; }
  double EmbeddingScale() const override { return std::sqrt(static_cast<double>(config().d_model)); }
  std::vector<double> InputPositions(const TinyLmParams& /*params*/, std::int64_t length) const override {
    return SinusoidalTable(SinusoidalSpec{.dim = config().d_model}, 0, length);
  }
  std::optional<PositionEncoding> KernelEncoding(const TinyLmParams& /*params*/,
                                                 std::int64_t /*layer*/) const override {
    return NoPositionEncoding{};  // the positions are in the input, not in attention
  }
};

}  // namespace

std::unique_ptr<SchemeTrainer> MakeSchemeTrainer(const SinusoidalScheme& /*scheme*/, const TinyLmConfig& config) {
  return std::make_unique<SinusoidalTrainer>(config);
}

}  // namespace posenc::tiny_lm
