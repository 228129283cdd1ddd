// A small Llama GGUF with random weights, made by the tests themselves: the
// engine's golden end-to-end model (no download needed). Its tokenizer is
// byte-level BPE over the 256 byte tokens (no merges), so any text encodes.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "gguf_builder.h"
#include "posenc/gguf.h"
#include "random_blocks.h"

namespace posenc::testing {

struct RandomLlamaOptions {
  std::int64_t d = 32;
  std::int64_t blocks = 2;
  std::int64_t heads = 4;
  std::int64_t kv_heads = 2;
  std::int64_t head_dim = 8;
  std::int64_t ffn = 48;
  std::int64_t context = 32;  // the "training length"
  double theta = 10000;
  bool tied = true;
  std::uint32_t seed = 1;
  // "gemma3": its QK and post norms, and a sliding window; "phi3": q, k, v
  // as one attn_qkv and gate, up as one ffn_up [2 ffn] (F32 weights only),
  // drawn as the separate tensors are, so that a phi3 and a qwen2 file of
  // one seed (and zero biases) hold the same weights.
  std::string architecture = "llama";
  std::int64_t sliding_window = 8;  // gemma3's local layers (every layer but each 6th)
  bool nan_in_output_norm = false;  // one NaN weight: what a broken file looks like
  // Biases on q, k and v (Qwen2's attn_q.bias ...) of this standard deviation
  // (0: all zero), written after every other tensor so that the other
  // weights are those of the same options without them.
  std::optional<double> qkv_bias;
  // F32 tensors multiplied by a factor, by name: a corrupt file (token_embd
  // x 1e20 gave logits near 1e21, a factor of NaN a NaN tensor).
  std::map<std::string, float> scaled;
  // > 0: LongRoPE as llama.cpp's converter writes Phi-3-128k's:
  // rope_factors_short [head_dim / 2] (in [1, 1.5]) and rope_factors_long
  // (1 to 8, growing with the pair), rope.scaling.original_context_length
  // this length (context_length stays `context`) and rope.scaling.attn_factor
  // sqrt(1 + ln(context / it) / ln(it)).
  std::int64_t longrope_original = 0;
  // Written as rope.scaling.type (with factor 2 and original_context_length
  // `context`): a file whose metadata scales its RoPE too.
  std::optional<std::string> rope_scaling_type;
  bool rope_freqs = false;  // llama.cpp's rope_freqs [head_dim / 2] (Llama 3's), factors 1 to 8
  // The type of every matrix (token_embd, output, Q/K/V/O, the MLP); the
  // norms stay F32. A block type needs d, heads * head_dim and ffn in whole
  // blocks.
  GgmlType weights = GgmlType::kF32;
};

constexpr std::int64_t kTinyVocab = 256;

// GPT-2's byte-to-character alphabet, each as UTF-8.
inline std::vector<std::string> ByteAlphabet() {
  std::vector<std::string> tokens(256);
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    const int cp = printable ? b : next++;
    std::string utf8;
    if (cp < 0x80) {
      utf8 += static_cast<char>(cp);
    } else {
      utf8 += static_cast<char>(0xC0 | (cp >> 6));
      utf8 += static_cast<char>(0x80 | (cp & 0x3F));
    }
    tokens[b] = utf8;
  }
  return tokens;
}

inline std::vector<unsigned char> RandomLlamaGguf(const RandomLlamaOptions& o = {}) {
  constexpr std::uint32_t kU32 = 4, kF32 = 6, kF32Tensor = 0;
  std::mt19937 rng(o.seed);
  // Uniform values of standard deviation `scale`.
  const auto values = [&](std::int64_t count, double scale, double mean = 0) {
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<unsigned char> bytes(count * 4);
    for (std::int64_t i = 0; i < count; ++i) {
      const auto v = static_cast<float>(mean + scale * std::sqrt(3.0) * dist(rng));
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    }
    return bytes;
  };
  const auto u64 = [](std::int64_t v) { return static_cast<std::uint64_t>(v); };
  const std::int64_t q_dim = o.heads * o.head_dim, kv_dim = o.kv_heads * o.head_dim;
  const std::string p = o.architecture + ".";

  // Every tensor goes through here: F32 data scaled where asked.
  struct ScalingBuilder : GgufBuilder {
    const std::map<std::string, float>* scaled = nullptr;
    ScalingBuilder& Tensor(const std::string& name, const std::vector<std::uint64_t>& shape, std::uint32_t type,
                           std::vector<unsigned char> data) {
      if (const auto it = scaled->find(name); it != scaled->end() && type == 0) {
        for (std::size_t i = 0; i + 4 <= data.size(); i += 4) {
          float v;
          std::memcpy(&v, data.data() + i, 4);
          v *= it->second;
          std::memcpy(data.data() + i, &v, 4);
        }
      }
      GgufBuilder::Tensor(name, shape, type, data);
      return *this;
    }
  };
  ScalingBuilder b;
  b.scaled = &o.scaled;
  b.Text("general.architecture", o.architecture)
      .Scalar(p + "context_length", kU32, static_cast<std::uint32_t>(o.context))
      .Scalar(p + "embedding_length", kU32, static_cast<std::uint32_t>(o.d))
      .Scalar(p + "block_count", kU32, static_cast<std::uint32_t>(o.blocks))
      .Scalar(p + "feed_forward_length", kU32, static_cast<std::uint32_t>(o.ffn))
      .Scalar(p + "attention.head_count", kU32, static_cast<std::uint32_t>(o.heads))
      .Scalar(p + "attention.head_count_kv", kU32, static_cast<std::uint32_t>(o.kv_heads))
      .Scalar(p + "attention.key_length", kU32, static_cast<std::uint32_t>(o.head_dim))
      .Scalar(p + "rope.dimension_count", kU32, static_cast<std::uint32_t>(o.head_dim))
      .Scalar(p + "rope.freq_base", kF32, static_cast<float>(o.theta))
      .Scalar(p + "attention.layer_norm_rms_epsilon", kF32, 1e-5f)
      .Text("tokenizer.ggml.model", "gpt2")
      .Text("tokenizer.ggml.pre", "gpt2");
  b.StringArray("tokenizer.ggml.tokens", ByteAlphabet()).StringArray("tokenizer.ggml.merges", {});
  const bool gemma = o.architecture == "gemma3";
  const bool fused = o.architecture == "phi3";
  if (gemma) b.Scalar(p + "attention.sliding_window", kU32, static_cast<std::uint32_t>(o.sliding_window));
  if (fused && o.weights != GgmlType::kF32) throw std::invalid_argument("phi3: F32 weights only");
  const std::int64_t pairs = o.head_dim / 2;
  // Per-pair factors rising from `low` to `high`.
  const auto rising = [&](double low, double high) {
    std::vector<unsigned char> bytes(pairs * 4);
    for (std::int64_t k = 0; k < pairs; ++k) {
      const auto v = static_cast<float>(low + (high - low) * static_cast<double>(k) / static_cast<double>(pairs - 1));
      std::memcpy(bytes.data() + 4 * k, &v, 4);
    }
    return bytes;
  };
  if (o.longrope_original > 0) {
    const double s = static_cast<double>(o.context) / static_cast<double>(o.longrope_original);
    b.Scalar(p + "rope.scaling.original_context_length", kU32, static_cast<std::uint32_t>(o.longrope_original))
        .Scalar(p + "rope.scaling.attn_factor", kF32,
                static_cast<float>(std::sqrt(1 + std::log(s) / std::log(static_cast<double>(o.longrope_original)))));
  }
  if (o.rope_scaling_type) {
    b.Text(p + "rope.scaling.type", *o.rope_scaling_type)
        .Scalar(p + "rope.scaling.factor", kF32, 2.0f)
        .Scalar(p + "rope.scaling.original_context_length", kU32, static_cast<std::uint32_t>(o.context));
  }

  // A matrix of `rows` rows of k values with standard deviation about `scale`.
  std::uint32_t matrix_seed = o.seed;
  const auto matrix = [&](const std::string& name, std::int64_t k, std::int64_t rows, double scale) {
    if (o.weights == GgmlType::kF32) {
      b.Tensor(name, {u64(k), u64(rows)}, kF32Tensor, values(rows * k, scale));
      return;
    }
    const std::vector<std::byte> blocks =
        RandomBlocks(o.weights, rows, k, ++matrix_seed, static_cast<float>(scale * std::sqrt(3.0)));
    const auto* first = reinterpret_cast<const unsigned char*>(blocks.data());
    b.Tensor(name, {u64(k), u64(rows)}, static_cast<std::uint32_t>(o.weights),
             std::vector<unsigned char>(first, first + blocks.size()));
  };
  matrix("token_embd.weight", o.d, kTinyVocab, 1.0);
  std::vector<unsigned char> output_norm = values(o.d, 0.1, 1.0);
  if (o.nan_in_output_norm) {
    const float nan = std::nanf("");
    std::memcpy(output_norm.data() + 4 * (o.d / 2), &nan, 4);
  }
  b.Tensor("output_norm.weight", {u64(o.d)}, kF32Tensor, output_norm);
  if (!o.tied) matrix("output.weight", o.d, kTinyVocab, 0.3);
  const double in_scale = 1.0 / std::sqrt(static_cast<double>(o.d));
  for (std::int64_t l = 0; l < o.blocks; ++l) {
    const std::string blk = "blk." + std::to_string(l) + ".";
    b.Tensor(blk + "attn_norm.weight", {u64(o.d)}, kF32Tensor, values(o.d, 0.1, 1.0));
    if (fused) {  // rows q | k | v, each part drawn as its own tensor would be
      std::vector<unsigned char> qkv = values(q_dim * o.d, 2 * in_scale);
      for (const double scale : {2 * in_scale, in_scale}) {
        const std::vector<unsigned char> part = values(kv_dim * o.d, scale);
        qkv.insert(qkv.end(), part.begin(), part.end());
      }
      b.Tensor(blk + "attn_qkv.weight", {u64(o.d), u64(q_dim + 2 * kv_dim)}, kF32Tensor, qkv);
    } else {
      matrix(blk + "attn_q.weight", o.d, q_dim, 2 * in_scale);
      matrix(blk + "attn_k.weight", o.d, kv_dim, 2 * in_scale);
      matrix(blk + "attn_v.weight", o.d, kv_dim, in_scale);
    }
    matrix(blk + "attn_output.weight", q_dim, o.d, in_scale);
    b.Tensor(blk + "ffn_norm.weight", {u64(o.d)}, kF32Tensor, values(o.d, 0.1, 1.0));
    if (fused) {  // rows gate | up
      std::vector<unsigned char> gate_up = values(o.ffn * o.d, in_scale);
      const std::vector<unsigned char> up = values(o.ffn * o.d, in_scale);
      gate_up.insert(gate_up.end(), up.begin(), up.end());
      b.Tensor(blk + "ffn_up.weight", {u64(o.d), u64(2 * o.ffn)}, kF32Tensor, gate_up);
    } else {
      matrix(blk + "ffn_gate.weight", o.d, o.ffn, in_scale);
      matrix(blk + "ffn_up.weight", o.d, o.ffn, in_scale);
    }
    matrix(blk + "ffn_down.weight", o.ffn, o.d, 1.0 / std::sqrt(static_cast<double>(o.ffn)));
    if (gemma) {  // stored as llama.cpp's converter writes them: 1 + Hugging Face's weight
      b.Tensor(blk + "attn_q_norm.weight", {u64(o.head_dim)}, kF32Tensor, values(o.head_dim, 0.1, 1.0));
      b.Tensor(blk + "attn_k_norm.weight", {u64(o.head_dim)}, kF32Tensor, values(o.head_dim, 0.1, 1.0));
      b.Tensor(blk + "post_attention_norm.weight", {u64(o.d)}, kF32Tensor, values(o.d, 0.1, 1.0));
      b.Tensor(blk + "post_ffw_norm.weight", {u64(o.d)}, kF32Tensor, values(o.d, 0.1, 1.0));
    }
  }
  for (std::int64_t l = 0; o.qkv_bias && l < o.blocks; ++l) {
    const std::string blk = "blk." + std::to_string(l) + ".";
    if (fused) {
      b.Tensor(blk + "attn_qkv.bias", {u64(q_dim + 2 * kv_dim)}, kF32Tensor, values(q_dim + 2 * kv_dim, *o.qkv_bias));
      continue;
    }
    b.Tensor(blk + "attn_q.bias", {u64(q_dim)}, kF32Tensor, values(q_dim, *o.qkv_bias));
    b.Tensor(blk + "attn_k.bias", {u64(kv_dim)}, kF32Tensor, values(kv_dim, *o.qkv_bias));
    b.Tensor(blk + "attn_v.bias", {u64(kv_dim)}, kF32Tensor, values(kv_dim, *o.qkv_bias));
  }
  // Last, as the biases, so that the weights are those of the same options without them.
  if (o.longrope_original > 0) {
    b.Tensor("rope_factors_short.weight", {u64(pairs)}, kF32Tensor, values(pairs, 0.1, 1.25))
        .Tensor("rope_factors_long.weight", {u64(pairs)}, kF32Tensor, rising(1.0, 8.0));
  }
  if (o.rope_freqs) b.Tensor("rope_freqs.weight", {u64(pairs)}, kF32Tensor, rising(1.0, 8.0));
  return b.Bytes();
}

}  // namespace posenc::testing
