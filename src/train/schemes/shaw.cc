// Shaw et al. 2018, relative keys and values: per layer a table a^K and a
// table a^V of 2 clip + 1 rows [hd], shared by the heads, row
// clip + clamp(j - i, -clip, clip) (ShawRelativeSpec, distance key minus
// query); scores gain q_i.a^K, values gain a^V. Causal rows use the rows
// of j <= i only.
#include "posenc/error.h"
#include "posenc/shaw_relative.h"
#include "train/scheme_trainer.h"
#include "train/tensor_init.h"
#include "train/tiny_lm_internal.h"

namespace posenc::tiny_lm {
namespace {

class ShawTrainer final : public SchemeTrainer {
 public:
  ShawTrainer(const ShawScheme& scheme, const TinyLmConfig& config) : SchemeTrainer(config), scheme_(scheme) {
    RequireInRange(scheme.clip, 1, kMaxLength, "shaw_clip", "");
  }

  // "blk.N.attn_rel_k.weight", "blk.N.attn_rel_v.weight" [2 clip + 1, hd], Normal(0, 0.02).
  std::vector<SchemeTensor> Tensors(std::int64_t layer) const override {
    if (layer == kModelWide) return {};
    const std::string prefix = "blk." + std::to_string(layer) + ".";
    const std::vector<std::int64_t> shape{2 * scheme_.clip + 1, config().HeadDim()};
    const auto init = [](TinyLmTensor& t, std::uint64_t seed) { FillNormal(t, seed, 0.02); };
    return {{.name = prefix + "attn_rel_k.weight", .shape = shape, .init = init},
            {.name = prefix + "attn_rel_v.weight", .shape = shape, .init = init}};
  }

  // a^K is the query table, a^V the value table, both shared by the heads,
  // row clip - min(i - j, clip) (ShawRelativeSpec::Row of a query at i - j
  // and a key at 0).
  LayerTerms Layer(const TinyLmParams& params, std::int64_t layer, std::int64_t length) const override {
    const TinyLmBlock& block = params.blocks[static_cast<std::size_t>(layer)];
    std::vector<std::int64_t> rows(static_cast<std::size_t>(length));
    for (std::int64_t delta = 0; delta < length; ++delta) rows[delta] = Spec().Row(delta, 0);
    const auto table = [&](const TinyLmTensor& t) {
      return RelativeTableTerm{
          .values = {t.values.begin(), t.values.end()}, .rows = t.shape[0], .row_of_distance = rows};
    };
    LayerTerms terms;
    terms.query_table = table(block.scheme[0]);
    terms.value_table = table(block.scheme[1]);
    return terms;
  }

  void LayerBackward(const TinyLmParams& /*params*/, std::int64_t layer, std::int64_t /*length*/,
                     const LayerTermGrads& dterms, TinyLmParams& grads) const override {
    TinyLmBlock& block = grads.blocks[static_cast<std::size_t>(layer)];
    for (std::size_t e = 0; e < dterms.query_table.size(); ++e) {
      block.scheme[0].values[e] += static_cast<float>(dterms.query_table[e]);
      block.scheme[1].values[e] += static_cast<float>(dterms.value_table[e]);
    }
  }

  std::optional<PositionEncoding> KernelEncoding(const TinyLmParams& params, std::int64_t layer) const override {
    const TinyLmBlock& block = params.blocks[static_cast<std::size_t>(layer)];
    return ShawEncoding{.spec = Spec(),
                        .rel_k = {block.scheme[0].values.begin(), block.scheme[0].values.end()},
                        .rel_v = {block.scheme[1].values.begin(), block.scheme[1].values.end()}};
  }

  double ScratchBytes(std::int64_t batch) const override {  // float64 [B H, 2K + 1, hd] partials of a^K and a^V
    return 2.0 * sizeof(double) * static_cast<double>(batch * config().heads) *
           static_cast<double>((2 * scheme_.clip + 1) * config().HeadDim());
  }

 private:
  ShawRelativeSpec Spec() const {
    return {.max_distance = scheme_.clip,
            .distance = RelativeDistance::kKeyMinusQuery,
            .key_term = true,
            .value_term = true};
  }

  ShawScheme scheme_;
};

}  // namespace

std::unique_ptr<SchemeTrainer> MakeSchemeTrainer(const ShawScheme& scheme, const TinyLmConfig& config) {
  return std::make_unique<ShawTrainer>(scheme, config);
}

}  // namespace posenc::tiny_lm
