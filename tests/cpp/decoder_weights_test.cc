// The Llama engine with its weights kept as stored (F16, BF16, the 32-block
// and the K-quant types): its forward against the float32 model and the
// float64 reference, its decode against one forward, and int8 activations.
#include <algorithm>
#include <cmath>
#include <string>

#include "decoder_model_test_util.h"
#include "posenc/decoder_model.h"

namespace posenc {
namespace {

using testing::ExpectError;
using testing::QuantizedLlama;
using testing::RandomLlamaGguf;
using testing::RandomModel;
using testing::RandomTokens;
using testing::RelativeError;

// Weights kept as stored: a forward of many tokens runs the float32 kernel
// on the exactly dequantized weights, so it is bitwise the float32 model's;
// both are near the float64 reference; the stored model holds the file's
// bytes, not 4 a weight.
TEST(DecoderModel, StoredWeightsForwardIsBitwiseTheFloat32Model) {
  for (const GgmlType type :
       {GgmlType::kF16, GgmlType::kBF16, GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
        GgmlType::kQ8_0, GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K}) {
    SCOPED_TRACE(std::string(TraitsOf(type).name));
    const RandomModel stored(QuantizedLlama(type));
    const RandomModel as_f32(QuantizedLlama(type), WeightStorage::kFloat32);
    const auto tokens = RandomTokens(37, 11);
    const std::vector<float> logits = stored.model.Logits(tokens, stored.model.DefaultAttention());
    EXPECT_EQ(logits, as_f32.model.Logits(tokens, as_f32.model.DefaultAttention()));
    const std::vector<double> ref = reference::DecoderLogits(stored.file, tokens, stored.model.DefaultAttention());
    // float32 sums over k = 256 for the K-quant models, 32 to 64 otherwise.
    EXPECT_LT(RelativeError(logits, ref), stored.model.hparams().embedding_length == 256 ? 1e-4 : 2e-5);
    const double block_bytes = static_cast<double>(TraitsOf(type).block_bytes) / TraitsOf(type).block_elements;
    EXPECT_LT(stored.model.WeightBytes(), as_f32.model.WeightBytes() * (block_bytes / 4 + 0.05));
  }
}

// max |decode - forward| / max |forward| over the logits of tokens
// [prefill, n): the first `prefill` tokens in one Extend, then one token a
// call, against one forward pass (Logits) of all n.
double DecodeVsForward(const DecoderModel& model, std::span<const std::int32_t> tokens, std::int64_t prefill) {
  const auto n = static_cast<std::int64_t>(tokens.size());
  const std::int64_t vocab = model.hparams().vocab_size;
  const AttentionOptions attention = model.DefaultAttention();
  const std::vector<float> full = model.Logits(tokens, attention);
  DecoderCache cache = model.NewCache();
  model.Extend(cache, tokens.first(prefill), attention, {},
               [](std::span<const std::int64_t>, std::span<const float>) {});
  double max_diff = 0, max_abs = 0;
  for (std::int64_t t = prefill; t < n; ++t) {
    const std::int64_t row0 = 0;
    model.Extend(cache, tokens.subspan(t, 1), attention, std::span(&row0, 1),
                 [&](std::span<const std::int64_t>, std::span<const float> logits) {
                   for (std::int64_t v = 0; v < vocab; ++v) {
                     max_diff = std::max(max_diff, std::abs(static_cast<double>(logits[v]) - full[t * vocab + v]));
                     max_abs = std::max(max_abs, std::abs(static_cast<double>(full[t * vocab + v])));
                   }
                 });
  }
  return max_diff / max_abs;
}

// Decode (one token a call: the kernels that read the stored blocks in
// registers) matches one forward pass.
TEST(DecoderModel, StoredWeightsDecodeMatchesOneForward) {
  for (const GgmlType type : {GgmlType::kQ4_1, GgmlType::kQ8_0, GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kBF16}) {
    SCOPED_TRACE(std::string(TraitsOf(type).name));
    const RandomModel tiny(QuantizedLlama(type));
    EXPECT_LT(DecodeVsForward(tiny.model, RandomTokens(40, 13), 33), 1e-5);
  }
}

// Int8 activations round x in every product with quantized weights, the
// prefill's and the decode's: one forward pass of int8 activations is near
// the float32 activations' but not equal to it (the rounding of x), and
// decode is near that pass (the same integer products summed in another
// order; not to float32 rounding, as a last-bit difference in x can move
// its int8 rounding); float32 weights have no integer product to use them
// (an error naming the parameter).
TEST(DecoderModel, Int8ActivationsInPrefillAndDecode) {
  for (const GgmlType type : {GgmlType::kQ4_1, GgmlType::kQ6_K}) {
    SCOPED_TRACE(std::string(TraitsOf(type).name));
    const RandomModel tiny(QuantizedLlama(type), WeightStorage::kAsStored, DotActivations::kInt8);
    const std::vector<std::int32_t> tokens = RandomTokens(24, 17);
    EXPECT_LT(DecodeVsForward(tiny.model, tokens, 20), 3e-2);
    const RandomModel float32(QuantizedLlama(type));
    const std::vector<float> int8_logits = tiny.model.Logits(tokens, tiny.model.DefaultAttention());
    const std::vector<float> float32_logits = float32.model.Logits(tokens, float32.model.DefaultAttention());
    double largest_diff = 0, largest = 0;
    for (std::size_t i = 0; i < int8_logits.size(); ++i) {
      largest_diff = std::max(largest_diff, std::abs(static_cast<double>(int8_logits[i]) - float32_logits[i]));
      largest = std::max(largest, std::abs(static_cast<double>(float32_logits[i])));
    }
    EXPECT_GT(largest_diff / largest, 1e-5);
    EXPECT_LT(largest_diff / largest, 3e-2);
  }
  const std::vector<unsigned char> bytes = RandomLlamaGguf(QuantizedLlama(GgmlType::kQ4_1));
  const GgufFile file = GgufFile::Parse(std::as_bytes(std::span(bytes)));
  ExpectError([&] { DecoderModel::FromGguf(file, WeightStorage::kFloat32, DotActivations::kInt8); },
              {"activations", "int8", "stored"});
}

}  // namespace
}  // namespace posenc
