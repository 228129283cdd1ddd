// XLNet / Transformer-XL relative attention (Dai et al. 2019; Yang et al.
// 2019), trained in the causal decoder, per layer:
//   s_ij = scale ((q_i + u_h).k_j + (q_i + v_h).r_h(i - j))
//   r(delta) = W_R R(delta),  R the distance's sinusoid [sin | cos], base
//   10000 (XLNetRelativeEncoding, the library's XLNet encoding, checked
//   against Hugging Face)
// Mapped onto the trainer's terms: r is a per-head query table (row of
// distance delta: T - 1 - delta, XLNet's row order), v_h.r_h(delta) a bias
// of the distance (times the scale), u_h the key bias. One segment (no
// segment term), no memory.
//
// Tensors of layer N (XLNet's r, r_w_bias and r_r_bias; Normal(0, 0.02),
// its initializer_range; none decays): blk.N.attn_xlnet_r.weight [d, d],
// blk.N.attn_xlnet_u.weight [heads, hd], blk.N.attn_xlnet_v.weight
// [heads, hd]. The kernel has no XLNet form: evaluation runs the trainer's
// attention. Any length runs: the sinusoid is defined at every distance.
#include <cmath>
#include <string>

#include "posenc/error.h"
#include "posenc/xlnet_relative.h"
#include "train/scheme_trainer.h"
#include "train/schemes/projected_table.h"
#include "train/tensor_init.h"

namespace posenc::tiny_lm {
namespace {

enum XlnetTensor : std::size_t { kR, kU, kV };

class XlnetTrainer final : public SchemeTrainer {
 public:
  using SchemeTrainer::SchemeTrainer;

  std::vector<SchemeTensor> Tensors(std::int64_t layer) const override {
    if (layer == kModelWide) return {};
    const std::string prefix = "blk." + std::to_string(layer) + ".attn_xlnet_";
    const auto init = [](TinyLmTensor& t, std::uint64_t seed) { FillNormal(t, seed, 0.02); };
    const std::int64_t d = config().d_model, heads = config().heads, hd = config().HeadDim();
    return {{.name = prefix + "r.weight", .shape = {d, d}, .init = init},
            {.name = prefix + "u.weight", .shape = {heads, hd}, .init = init},
            {.name = prefix + "v.weight", .shape = {heads, hd}, .init = init}};
  }

  LayerTerms Layer(const TinyLmParams& params, std::int64_t layer, std::int64_t length) const override {
    const std::vector<TinyLmTensor>& t = params.blocks[static_cast<std::size_t>(layer)].scheme;
    const std::int64_t heads = config().heads, hd = config().HeadDim();
    LayerTerms terms;
    terms.query_table = Table(t[kR], length);
    terms.key_bias.assign(t[kU].values.begin(), t[kU].values.end());
    const double scale = Scale();
    terms.distance_bias.resize(static_cast<std::size_t>(heads * length));
    for (std::int64_t h = 0; h < heads; ++h) {
      for (std::int64_t delta = 0; delta < length; ++delta) {
        const double* r = Row(terms.query_table, h, delta);
        double dot = 0.0;
        for (std::int64_t e = 0; e < hd; ++e) dot += static_cast<double>(t[kV].values[h * hd + e]) * r[e];
        terms.distance_bias[h * length + delta] = scale * dot;
      }
    }
    return terms;
  }

  void LayerBackward(const TinyLmParams& params, std::int64_t layer, std::int64_t length, const LayerTermGrads& dterms,
                     TinyLmParams& grads) const override {
    const std::vector<TinyLmTensor>& t = params.blocks[static_cast<std::size_t>(layer)].scheme;
    std::vector<TinyLmTensor>& g = grads.blocks[static_cast<std::size_t>(layer)].scheme;
    const std::int64_t heads = config().heads, hd = config().HeadDim();
    const RelativeTableTerm table = Table(t[kR], length);
    // The bias v.r(delta) * scale: into the table and into v.
    std::vector<double> dtable = dterms.query_table;
    std::vector<double> dv(static_cast<std::size_t>(heads * hd), 0.0);
    const double scale = Scale();
    for (std::int64_t h = 0; h < heads; ++h) {
      for (std::int64_t delta = 0; delta < length; ++delta) {
        const double gb = scale * dterms.distance_bias[h * length + delta];
        const std::int64_t row = (h * table.rows + table.row_of_distance[delta]) * hd;
        for (std::int64_t e = 0; e < hd; ++e) {
          dtable[row + e] += gb * t[kV].values[h * hd + e];
          dv[h * hd + e] += gb * table.values[row + e];
        }
      }
    }
    ProjectPerHeadBackward(dtable, Encoding(length), length, t[kR], heads, hd, g[kR], nullptr);
    for (std::size_t e = 0; e < dv.size(); ++e) {
      g[kU].values[e] += static_cast<float>(dterms.key_bias[e]);
      g[kV].values[e] += static_cast<float>(dv[e]);
    }
  }

  std::optional<PositionEncoding> KernelEncoding(const TinyLmParams& /*params*/,
                                                 std::int64_t /*layer*/) const override {
    return std::nullopt;
  }

  double ScratchBytes(std::int64_t batch) const override {  // float64 partials of the table and the bias
    const auto rows = static_cast<double>(batch * config().heads * config().PositionExtent());
    return sizeof(double) * rows * static_cast<double>(config().HeadDim() + 1);
  }

 private:
  double Scale() const { return 1.0 / std::sqrt(static_cast<double>(config().HeadDim())); }

  // R [T, d]: row m the sinusoid of distance T - 1 - m (XLNet's order:
  // the longest distance first).
  std::vector<double> Encoding(std::int64_t length) const {
    return XLNetRelativeEncoding(config().d_model, length, length - 1, XLNetAttnType::kUnidirectional);
  }

  RelativeTableTerm Table(const TinyLmTensor& w, std::int64_t length) const {
    RelativeTableTerm table{.values = ProjectPerHead(Encoding(length), length, w, config().heads, config().HeadDim()),
                            .per_head = true,
                            .rows = length};
    table.row_of_distance.resize(static_cast<std::size_t>(length));
    for (std::int64_t delta = 0; delta < length; ++delta) table.row_of_distance[delta] = length - 1 - delta;
    return table;
  }

  const double* Row(const RelativeTableTerm& table, std::int64_t h, std::int64_t delta) const {
    return table.values.data() + (h * table.rows + table.row_of_distance[delta]) * config().HeadDim();
  }
};

}  // namespace

std::unique_ptr<SchemeTrainer> MakeSchemeTrainer(const XlnetScheme& /*scheme*/, const TinyLmConfig& config) {
  Require(config.d_model % 2 == 0, "tiny_lm", "d_model", config.d_model,
          "must be even for xlnet (the distance sinusoid pairs sin and cos)");
  return std::make_unique<XlnetTrainer>(config);
}

}  // namespace posenc::tiny_lm
