// The trainer's attention under XLNet and DeBERTa against the library's
// float64 references of the two forms (reference::XLNetAttention and
// reference::DebertaAttention, themselves held to Hugging Face's
// XLNetRelativeAttention and DebertaV2's DisentangledSelfAttention by
// tests/python): the same q, k, v, the scheme's trained tensors projected
// here as the papers write it, the same outputs.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "posenc/deberta_relative.h"
#include "posenc/xlnet_relative.h"
#include "test_util.h"
#include "tiny_lm_test_util.h"
#include "train/scheme_trainer.h"
#include "train/tiny_lm_internal.h"

namespace posenc {
namespace {

constexpr std::int64_t kBatch = 2, kLength = 9, kHeads = 3, kHeadDim = 8, kWidth = kHeads * kHeadDim;

std::vector<float> RandomQkv(std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> qkv(static_cast<std::size_t>(kBatch * kLength * 3 * kWidth));
  for (float& x : qkv) x = u(rng);
  return qkv;
}

// part 0 q, 1 k, 2 v of qkv [B T, 3d] as [B, H, T, hd] in float64.
std::vector<double> HeadsFirst(const std::vector<float>& qkv, int part) {
  std::vector<double> out(static_cast<std::size_t>(kBatch * kHeads * kLength * kHeadDim));
  for (std::int64_t b = 0; b < kBatch; ++b) {
    for (std::int64_t h = 0; h < kHeads; ++h) {
      for (std::int64_t t = 0; t < kLength; ++t) {
        for (std::int64_t e = 0; e < kHeadDim; ++e) {
          out[((b * kHeads + h) * kLength + t) * kHeadDim + e] =
              qkv[(b * kLength + t) * 3 * kWidth + part * kWidth + h * kHeadDim + e];
        }
      }
    }
  }
  return out;
}

// y = W x for each row x of rows [n, d], W [d, d] (out, in): [n, d].
std::vector<double> Project(const std::vector<double>& rows, const TinyLmTensor& w) {
  const std::size_t n = rows.size() / kWidth;
  std::vector<double> out(rows.size(), 0.0);
  for (std::size_t m = 0; m < n; ++m) {
    for (std::int64_t o = 0; o < kWidth; ++o) {
      for (std::int64_t c = 0; c < kWidth; ++c) out[m * kWidth + o] += w.values[o * kWidth + c] * rows[m * kWidth + c];
    }
  }
  return out;
}

std::vector<double> AsFloat64(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// The trainer's float32 attention of layer 0 of the scheme, against `expected` [B, H, T, hd].
void ExpectTrainerAttention(const TinyLmConfig& config, const TinyLmParams& params, const std::vector<float>& qkv,
                            const std::vector<double>& expected) {
  const tiny_lm::FloatLayerTerms terms(tiny_lm::MakeSchemeTrainer(config)->Layer(params, 0, kLength));
  std::vector<float> out(static_cast<std::size_t>(kBatch * kLength * kWidth));
  tiny_lm::AttentionForward({.batch = kBatch, .length = kLength, .heads = kHeads, .head_dim = kHeadDim}, terms.View(),
                            qkv, out);
  double worst = 0;
  for (std::int64_t b = 0; b < kBatch; ++b) {
    for (std::int64_t h = 0; h < kHeads; ++h) {
      for (std::int64_t i = 0; i < kLength; ++i) {
        for (std::int64_t e = 0; e < kHeadDim; ++e) {
          const double want = expected[((b * kHeads + h) * kLength + i) * kHeadDim + e];
          const double got = out[(b * kLength + i) * kWidth + h * kHeadDim + e];
          EXPECT_NEAR(got, want, 2e-6) << "b " << b << " h " << h << " i " << i << " e " << e;
          worst = std::max(worst, std::abs(got - want));
        }
      }
    }
  }
  std::printf("[%s] worst difference to the float64 reference: %.2e\n",
              std::string(PositionSchemeName(config.scheme)).c_str(), worst);
}

RelativeAttentionInputs Inputs(const std::vector<double>& q, const std::vector<double>& k,
                               const std::vector<double>& v) {
  return {.shape = {.batch = kBatch, .heads = kHeads, .q_len = kLength, .k_len = kLength, .head_dim = kHeadDim},
          .q = q,
          .k = k,
          .v = v,
          .mask = RelativeAttentionMask::kCausal};
}

TEST(TinyLmXlnet, TrainerAttentionEqualsTheXlnetReference) {
  const TinyLmConfig config = testing::TinyConfig(XlnetScheme{}, {kWidth, kHeads, 1, 13, kLength, kBatch});
  const TinyLmParams params = testing::RandomTinyParams(config, 4);
  const std::vector<float> qkv = RandomQkv(5);
  const std::vector<double> q = HeadsFirst(qkv, 0), k = HeadsFirst(qkv, 1), v = HeadsFirst(qkv, 2);
  // XLNet's r: the sinusoids of distances T, T - 1, ..., -T + 1 (rows
  // 0..2T - 1, "bi": the rows a causal query never reads included) times
  // W_R, per head, the same for every sequence.
  const std::vector<double> r = Project(XLNetRelativeEncoding(kWidth, kLength, kLength, XLNetAttnType::kBidirectional),
                                        params.Tensor("blk.0.attn_xlnet_r.weight"));
  const std::int64_t rows = 2 * kLength;
  std::vector<double> rel_k(static_cast<std::size_t>(kBatch * kHeads * rows * kHeadDim));
  for (std::int64_t b = 0; b < kBatch; ++b) {
    for (std::int64_t h = 0; h < kHeads; ++h) {
      for (std::int64_t m = 0; m < rows; ++m) {
        for (std::int64_t e = 0; e < kHeadDim; ++e) {
          rel_k[((b * kHeads + h) * rows + m) * kHeadDim + e] = r[m * kWidth + h * kHeadDim + e];
        }
      }
    }
  }
  const std::vector<double> u = AsFloat64(params.Tensor("blk.0.attn_xlnet_u.weight").values);
  const std::vector<double> bias_v = AsFloat64(params.Tensor("blk.0.attn_xlnet_v.weight").values);
  const RelativeAttentionResult expected =
      reference::XLNetAttention(Inputs(q, k, v), {.rel_k = rel_k, .r_w_bias = u, .r_r_bias = bias_v});
  ExpectTrainerAttention(config, params, qkv, expected.output);
}

TEST(TinyLmDeberta, TrainerAttentionEqualsTheDebertaReference) {
  // 4 buckets up to distance 6 (testing::TestSized): length 9 reaches the
  // exact, the logarithmic and the clamped rows.
  const TinyLmConfig config = testing::TinyConfig(DebertaScheme{}, {kWidth, kHeads, 1, 13, kLength, kBatch});
  const auto& scheme = std::get<DebertaScheme>(config.scheme);
  const TinyLmParams params = testing::RandomTinyParams(config, 6);
  const std::vector<float> qkv = RandomQkv(7);
  const std::vector<double> q = HeadsFirst(qkv, 0), k = HeadsFirst(qkv, 1), v = HeadsFirst(qkv, 2);
  const std::vector<double> embeddings = AsFloat64(params.Tensor("rel_embd.weight").values);
  // K_r and Q_r [heads, 2S, hd] from the projections [2S, d].
  const auto per_head = [&](const std::vector<double>& projected) {
    const std::int64_t rows = 2 * scheme.buckets;
    std::vector<double> out(projected.size());
    for (std::int64_t m = 0; m < rows; ++m) {
      for (std::int64_t h = 0; h < kHeads; ++h) {
        for (std::int64_t e = 0; e < kHeadDim; ++e) {
          out[(h * rows + m) * kHeadDim + e] = projected[m * kWidth + h * kHeadDim + e];
        }
      }
    }
    return out;
  };
  const std::vector<double> pos_key = per_head(Project(embeddings, params.Tensor("blk.0.attn_deberta_k.weight")));
  const std::vector<double> pos_query = per_head(Project(embeddings, params.Tensor("blk.0.attn_deberta_q.weight")));
  const RelativeAttentionResult expected = reference::DebertaAttention(
      Inputs(q, k, v), {.position_buckets = scheme.buckets, .max_relative_positions = scheme.max_relative_positions},
      pos_key, pos_query);
  ExpectTrainerAttention(config, params, qkv, expected.output);
}

}  // namespace
}  // namespace posenc
