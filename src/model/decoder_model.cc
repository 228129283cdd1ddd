// The decoder's forward pass, as its features say (decoder_features.h):
// batched prefill of one sequence at positions 0..n-1, and decoding.
#include "posenc/decoder_model.h"

#include <algorithm>
#include <array>
#include <memory>
#include <limits>
#include <string>

#include "attention/decode_keys.h"
#include "kernels/logit_range.h"
#include "model/decoder_weights.h"
#include "model/model_ops.h"
#include "model/output_nll.h"
#include "posenc/error.h"
#include "posenc/input_file.h"
#include "posenc/rope_frequencies.h"

namespace posenc {
namespace {

constexpr const char* kOp = "llama";
// Rows of logits computed at once: a [rows, vocab] block of at most
// 256 MiB instead of [n, vocab] (512 rows for SmolLM2's 49,152 tokens, 256
// for Gemma 3's 262,144). Many rows amortize what a product with weights
// kept quantized costs per call: dequantizing the output matrix into
// panels (matmul.h), which at 64 rows took a fifth of Gemma 3's prefill.
// The rows per block do not change a logit (one FMA chain each, matmul.h).
std::int64_t LogitRows(std::int64_t vocab) {
  constexpr double kBlockBytes = 256.0 * (1 << 20);
  const auto rows = static_cast<std::int64_t>(kBlockBytes / (sizeof(float) * static_cast<double>(vocab)));
  return std::clamp<std::int64_t>(rows / 64 * 64, 64, 512);
}

// A local layer of W keys keeps its tokens from LocalKeepFrom(total) on,
// and moves its front only when that passes the first kept token by W:
// then it holds 2 W to 3 W + 16 tokens, so that a rewind of up to W tokens
// (a passkey answer scored, then generated) keeps what the window sees, at
// one move per W tokens. Multiples of the decode keys' chunk of 16.
std::int64_t LocalKeepFrom(std::int64_t total, std::int64_t window) {
  constexpr std::int64_t kChunk = detail::DecodeKeys::kChunk;
  return std::max<std::int64_t>(0, total - 2 * window) / kChunk * kChunk;
}

void CheckTokens(std::span<const std::int32_t> tokens, std::int64_t vocab) {
  Require(!tokens.empty(), kOp, "tokens.size()", 0, "must be >= 1");
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    // The message built only when the check fails: every decode step checks its token.
    Require(
        tokens[i] >= 0 && tokens[i] < vocab, kOp, [&] { return "tokens[" + std::to_string(i) + "]"; }, tokens[i],
        [&] { return "must be a token id in [0, vocab_size = " + std::to_string(vocab) + ")"; });
  }
}

// Throws where the hidden state x [n, width] after `layer` (the input
// embedding when layer < 0), its first row at position `first_position`,
// holds a NaN or an infinity: a corrupt or overflowing model stops where it
// shows, named, not as logits that are NaN everywhere. The message is built
// only then: a decode step checks every layer, and building it each time
// would cost more than the check.
void RequireFiniteHidden(std::span<const float> values, std::int64_t width, std::int64_t first_position,
                         std::int64_t layer) {
  const auto size = static_cast<std::int64_t>(values.size());
  const std::int64_t i = detail::FirstOutOfRange(values.data(), size, std::numeric_limits<float>::infinity());
  if (i == size) return;
  const std::string what = layer < 0 ? "input embedding" : "hidden state after layer " + std::to_string(layer);
  const std::string why =
      layer < 0 ? "token_embd holds NaN or infinity in that token's row"
                : "layer " + std::to_string(layer) + "'s weights hold NaN or infinity, or its values overflow float32";
  ThrowError(
      kOp,
      what + "[position " + std::to_string(first_position + i / width) + ", element " + std::to_string(i % width) + "]",
      FormatValue(values[i]), "must be finite: " + why);
}

}  // namespace

DecoderModel::DecoderModel(std::unique_ptr<Weights> weights) : weights_(std::move(weights)) {}
DecoderModel::DecoderModel(DecoderModel&&) noexcept = default;
DecoderModel& DecoderModel::operator=(DecoderModel&&) noexcept = default;
DecoderModel::~DecoderModel() = default;

DecoderModel DecoderModel::Load(const std::string& path, WeightStorage storage, DotActivations activations) {
  return FromGguf(GgufFile::Open(path), storage, activations);
}
ExtensionPlan PlanModelExtension(const ContextExtension& method, const DecoderHyperparams& hp, std::int64_t length) {
  ExtensionPlan plan = PlanContextExtension(method, hp.rope, hp.context_length, length);
  if (IsModelAsTrained(method)) return plan;  // the model's own attention
  bool global = false;
  for (std::int64_t l = 0; l < hp.block_count; ++l) global = global || !hp.IsLocalLayer(l);
  Require(global, kOp, "method", FormatContextExtension(method),
          "cannot apply to this model: all of its " + std::to_string(hp.block_count) +
              " layers are local (sliding_window " + std::to_string(hp.sliding_window) + ", sliding_window_pattern " +
              std::to_string(hp.sliding_window_pattern) +
              " > the block count), and a method changes only the global layers' attention (the local ones keep "
              "their window and base): it would leave the model as it is");
  return plan;
}

DecoderModel DecoderModel::FromGguf(const GgufFile& file, WeightStorage storage, DotActivations activations) {
  return DecoderModel(LoadDecoderWeights(file, storage, activations));
}

const DecoderHyperparams& DecoderModel::hparams() const { return weights_->hp; }

const AttentionOptions& DecoderModel::LayerAttention(const AttentionOptions& attention, std::int64_t layer) const {
  return hparams().IsLocalLayer(layer) ? weights_->local_attention : attention;
}

AttentionOptions DecoderModel::DefaultAttention() const {
  AttentionOptions options;
  options.encoding = RopeEncoding{hparams().rope, ComputeRopeFrequencies(hparams().rope)};
  return options;
}

double DecoderModel::ActivationBytes(std::int64_t n) const {
  const DecoderHyperparams& hp = hparams();
  const std::int64_t q_dim = hp.head_count * hp.head_dim, kv_dim = hp.head_count_kv * hp.head_dim;
  // Per token: x, normed, proj (3 d), qkv, attn, gate_up, hidden (as Forward
  // allocates them), and the attention kernel's float32 copies of q, k, v.
  const double per_token = 3.0 * static_cast<double>(hp.embedding_length) + 2.0 * static_cast<double>(q_dim + kv_dim) +
                           static_cast<double>(q_dim) + 3.0 * static_cast<double>(hp.feed_forward_length) +
                           static_cast<double>(q_dim + 2 * kv_dim);
  return sizeof(float) *
         (static_cast<double>(n) * per_token + static_cast<double>(LogitRows(hp.vocab_size) * hp.vocab_size));
}

double DecoderModel::WeightBytes() const {
  const Weights& w = *weights_;
  double bytes = w.token_embd.Bytes() + (w.output ? w.output->Bytes() : 0.0) +
                 sizeof(float) * static_cast<double>(w.output_norm.size());
  for (const DecoderLayerWeights& l : w.layers) {
    const std::size_t norms = l.attn_norm.size() + l.ffn_norm.size() + l.attn_q_norm.size() + l.attn_k_norm.size() +
                              l.post_attention_norm.size() + l.post_ffw_norm.size() + l.qkv_bias.size();
    bytes += sizeof(float) * static_cast<double>(norms) + l.qkv.Bytes() + l.attn_output.Bytes() + l.gate_up.Bytes() +
             l.down.Bytes();
  }
  return bytes;
}

double DecoderModel::KeyValueBytes(std::int64_t n) const {
  const DecoderHyperparams& hp = hparams();
  double tokens = 0;  // a local layer's query reads the last W
  for (std::int64_t l = 0; l < hp.block_count; ++l) {
    tokens += static_cast<double>(hp.IsLocalLayer(l) ? std::min(n, hp.sliding_window) : n);
  }
  return 2.0 * sizeof(float) * tokens * static_cast<double>(hp.head_count_kv * hp.head_dim);
}

double DecoderModel::CacheBytes(std::int64_t n) const {
  const DecoderHyperparams& hp = hparams();
  // During the Extend that brings it to n tokens every layer holds all n
  // (a local layer forgets what its window passed at the end).
  return 2.5 * 2.0 * sizeof(float) * static_cast<double>(n) * static_cast<double>(hp.block_count) *
         static_cast<double>(hp.head_count_kv * hp.head_dim);
}

void DecoderModel::RequireActivationsFit(std::int64_t n) const {
  RequireFitsInMemory(kOp, "tokens", n, "the activations of one forward pass", ActivationBytes(n) / sizeof(float),
                      sizeof(float));
}

struct DecoderCache::LoweredKeys {
  std::vector<detail::DecodeKeys> layers;
};

DecoderCache::DecoderCache() = default;
DecoderCache::DecoderCache(DecoderCache&&) noexcept = default;
DecoderCache& DecoderCache::operator=(DecoderCache&&) noexcept = default;
DecoderCache::~DecoderCache() = default;

void DecoderCache::Truncate(std::int64_t tokens) {
  Require(tokens >= 0 && tokens <= tokens_, kOp, "cache.truncate", tokens,
          "must be in [0, cached tokens = " + std::to_string(tokens_) + "]");
  for (std::size_t l = 0; l < first_.size(); ++l) {
    Require(first_[l] == 0 || tokens - window_[l] + 1 >= first_[l], kOp, "cache.truncate", tokens,
            "must be >= " + std::to_string(first_[l] + window_[l] - 1) + ": local layer " + std::to_string(l) +
                " keeps the tokens from " + std::to_string(first_[l]) + " on, and a query at position " +
                std::to_string(tokens) + " sees the last " + std::to_string(window_[l]) + " (its sliding window)");
  }
  tokens_ = tokens;
  for (std::size_t l = 0; l < keys_.size(); ++l) {
    const std::int64_t first = first_.empty() ? 0 : first_[l];
    keys_[l].resize(static_cast<std::size_t>((tokens - first) * kv_dim_));
    values_[l].resize(static_cast<std::size_t>((tokens - first) * kv_dim_));
  }
  if (lowered_) {
    for (detail::DecodeKeys& layer : lowered_->layers) layer.Truncate(tokens);
  }
}

double DecoderCache::Bytes() const {
  double bytes = 0;
  for (std::size_t l = 0; l < keys_.size(); ++l) {
    bytes += sizeof(float) * static_cast<double>(keys_[l].capacity() + values_[l].capacity());
  }
  if (lowered_) {
    for (const detail::DecodeKeys& layer : lowered_->layers) bytes += layer.Bytes();
  }
  return bytes;
}

DecoderCache DecoderModel::NewCache(CachedKeys cached_keys) const {
  const DecoderHyperparams& hp = hparams();
  DecoderCache cache;
  cache.cached_keys_ = cached_keys;
  cache.kv_dim_ = hp.head_count_kv * hp.head_dim;
  cache.keys_.resize(static_cast<std::size_t>(hp.block_count));
  cache.values_.resize(static_cast<std::size_t>(hp.block_count));
  cache.first_.assign(static_cast<std::size_t>(hp.block_count), 0);
  for (std::int64_t l = 0; l < hp.block_count; ++l) cache.window_.push_back(hp.IsLocalLayer(l) ? hp.sliding_window : 0);
  cache.lowered_ = std::make_unique<DecoderCache::LoweredKeys>();
  cache.lowered_->layers.resize(static_cast<std::size_t>(hp.block_count));
  return cache;
}

namespace {

// Whether a cache keeping its keys as written keeps these ones rather than
// lowering them again: every one of the cache's tokens there, rotations
// (NoPE or RoPE) both, of the same shapes.
bool KeepsAsWritten(const detail::DecodeKeys& kept, std::int64_t first, std::int64_t start, std::int64_t kv_heads,
                    std::int64_t head_dim, const AttentionOptions& attention) {
  const auto rotation = [](const PositionEncoding& e) {
    return std::holds_alternative<RopeEncoding>(e) || std::holds_alternative<NoPositionEncoding>(e);
  };
  return kept.first() == first && kept.tokens() == start && kept.kept() > 0 && kept.kv_heads() == kv_heads &&
         kept.head_dim() == head_dim && rotation(kept.encoding()) && rotation(attention.encoding);
}

// Brings a layer's lowered keys up to the cache's tokens [first, start)
// (keys and values [start - first, kv_dim] before RoPE), lowered as
// `attention` lowers them: kept as they are when they already are (or, with
// CachedKeys::kAsWritten, when KeepsAsWritten), else lowered again.
void SyncLoweredKeys(detail::DecodeKeys& kept, const std::vector<float>& keys, const std::vector<float>& values,
                     std::int64_t first, std::int64_t start, std::int64_t kv_heads, std::int64_t head_dim,
                     const AttentionOptions& attention, CachedKeys cached_keys) {
  if (kept.LoweredAs(attention, kv_heads, head_dim, head_dim) && kept.first() == first && kept.tokens() == start) {
    return;
  }
  if (cached_keys == CachedKeys::kAsWritten && KeepsAsWritten(kept, first, start, kv_heads, head_dim, attention)) {
    return;
  }
  kept.Reset(attention, kv_heads, head_dim, head_dim, first);
  kept.AppendRaw(keys.data(), values.data(), start - first, attention);
}

}  // namespace

void DecoderCache::ForgetPastWindow() {
  for (std::size_t l = 0; l < window_.size(); ++l) {
    const std::int64_t keep_from = LocalKeepFrom(tokens_, window_[l]);
    if (window_[l] == 0 || keep_from - first_[l] < window_[l]) continue;
    const auto dropped = static_cast<std::ptrdiff_t>((keep_from - first_[l]) * kv_dim_);
    for (std::vector<float>* rows : {&keys_[l], &values_[l]}) {
      rows->erase(rows->begin(), rows->begin() + dropped);
      if (rows->capacity() > 4 * rows->size()) rows->shrink_to_fit();  // after a prefill
    }
    detail::DecodeKeys& lowered = lowered_->layers[l];
    if (lowered.first() == first_[l] && lowered.tokens() == tokens_) lowered.DropFront(keep_from);
    first_[l] = keep_from;
  }
}

void DecoderModel::RequireKeptAsWritten(const DecoderCache& cache, std::int64_t n,
                                        const AttentionOptions& attention) const {
  const DecoderHyperparams& hp = hparams();
  for (std::int64_t l = 0; l < hp.block_count; ++l) {
    const AttentionOptions& layer_attention = LayerAttention(attention, l);
    if (!detail::DecodeKeys::Supports(layer_attention)) continue;  // nothing kept lowered
    const detail::DecodeKeys& kept = cache.lowered_->layers[static_cast<std::size_t>(l)];
    const auto at = static_cast<std::size_t>(l);
    if (kept.kept() == 0 || kept.first() != cache.first_[at] || kept.tokens() != cache.tokens_ ||
        kept.LoweredAs(layer_attention, hp.head_count_kv, hp.head_dim, hp.head_dim)) {
      continue;  // lowered as this call lowers them, or lowered afresh
    }
    Require(KeepsAsWritten(kept, cache.first_[at], cache.tokens_, hp.head_count_kv, hp.head_dim, layer_attention), kOp,
            "cached_keys", Verbatim{"as-written"},
            "keeps rotations only (NoPE and RoPE, plain or frequency-scaled), not the keys of a position method "
            "(ReRoPE, Leaky ReRoPE, Self-Extend) that the kept keys or this call's have at layer " +
                std::to_string(l));
    Require(n == 1, kOp, "tokens", n,
            "must be 1: the keys this cache kept as written (CachedKeys::kAsWritten) are rotated otherwise than "
            "this call rotates, and several new tokens would see each other's keys at this call's rotation, not "
            "as written (layer " +
                std::to_string(l) + ")");
  }
}

void DecoderModel::Extend(DecoderCache& cache, std::span<const std::int32_t> tokens, const AttentionOptions& attention,
                          std::span<const std::int64_t> logit_rows, const RowLogitsSink& sink,
                          const LayerProgress& progress) const {
  const std::int64_t start = cache.tokens_, n = static_cast<std::int64_t>(tokens.size());
  ExtendRows(
      cache, tokens, attention, logit_rows,
      [&](std::span<const float> hidden) { EmitLogits(hidden, logit_rows, start, n, sink); }, progress);
}

void DecoderModel::ExtendRows(DecoderCache& cache, std::span<const std::int32_t> tokens,
                              const AttentionOptions& attention, std::span<const std::int64_t> logit_rows,
                              const HiddenRowsSink& finish, const LayerProgress& progress) const {
  const Weights& w = *weights_;
  const DecoderHyperparams& hp = w.hp;
  CheckTokens(tokens, hp.vocab_size);
  const auto n = static_cast<std::int64_t>(tokens.size());
  for (std::size_t r = 0; r < logit_rows.size(); ++r) {
    Require(
        logit_rows[r] >= 0 && logit_rows[r] < n && (r == 0 || logit_rows[r] > logit_rows[r - 1]), kOp,
        [&] { return "logit_rows[" + std::to_string(r) + "]"; }, logit_rows[r],
        [&] { return "must be a row of the call in [0, " + std::to_string(n) + "), after the previous one"; });
  }
  RequireActivationsFit(n);
  const std::int64_t kv_dim = hp.head_count_kv * hp.head_dim;
  const std::int64_t start = cache.tokens_, total = start + n;
  Require(cache.kv_dim_ == kv_dim &&
              (cache.keys_.size() == 1 || static_cast<std::int64_t>(cache.keys_.size()) == hp.block_count),
          kOp, "cache", Verbatim{"of another model"}, "must come from this model's NewCache");
  if (cache.cached_keys_ == CachedKeys::kAsWritten) RequireKeptAsWritten(cache, n, attention);
  // Keys and values before RoPE, and (kept lowered) up to two lowered keys
  // and the values again; a local layer holds what it kept and the new
  // tokens until its attention has run.
  double held = 0;
  for (std::size_t l = 0; l < cache.keys_.size(); ++l) held += static_cast<double>(total - cache.first_[l]);
  const double copies = cache.lowered_ && detail::DecodeKeys::Supports(attention) ? 5.0 : 2.0;
  RequireFitsInMemory(kOp, "tokens", total, "the key/value cache", copies * held * static_cast<double>(kv_dim),
                      sizeof(float));
  // Room for a quarter more, as the lowered keys (decode_keys.cc): decode
  // steps after a prefill append without copying the cache.
  for (std::size_t l = 0; l < cache.keys_.size(); ++l) {
    const std::int64_t rows = total - cache.first_[l];
    for (std::vector<float>* layer : {&cache.keys_[l], &cache.values_[l]}) {
      if (layer->capacity() < static_cast<std::size_t>(rows * kv_dim))
        layer->reserve(static_cast<std::size_t>((rows + rows / 4 + 256) * kv_dim));
      layer->resize(static_cast<std::size_t>(rows * kv_dim));
    }
  }
  cache.tokens_ = total;
  try {
    ExtendCached(cache, tokens, attention, logit_rows, finish, progress);
  } catch (...) {
    cache.Truncate(start);  // attention options the kernel rejects, a throwing sink: the cache as it was
    throw;
  }
}

void DecoderModel::ExtendCached(DecoderCache& cache, std::span<const std::int32_t> tokens,
                                const AttentionOptions& attention, std::span<const std::int64_t> logit_rows,
                                const HiddenRowsSink& finish, const LayerProgress& progress) const {
  const Weights& w = *weights_;
  const DecoderHyperparams& hp = w.hp;
  const auto n = static_cast<std::int64_t>(tokens.size());
  const std::int64_t d = hp.embedding_length, ffn = hp.feed_forward_length, hd = hp.head_dim;
  const std::int64_t q_dim = hp.head_count * hd, kv_dim = hp.head_count_kv * hd, qkv_dim = q_dim + 2 * kv_dim;
  const std::int64_t total = cache.tokens_, start = total - n;

  std::vector<float> x(n * d), normed(n * d), qkv(n * qkv_dim), attn(n * q_dim), proj(n * d);
  std::vector<float> gate_up(n * 2 * ffn), hidden(n * ffn);
  model::GatherRows(w.token_embd, tokens, x);

  // q is a view into qkv [n, q | k | v]: each token's row holds its q heads,
  // then its k heads, then its v heads. k and v are copied to the cache and
  // attended to there: [total, kv_heads, head_dim], the new tokens last.
  const std::array<std::int64_t, 4> qkv_strides{n * qkv_dim, qkv_dim, hd, 1};
  AttentionInputs in;
  in.q = ConstTensorView{qkv.data(), DType::kF32, {1, n, hp.head_count, hd}, qkv_strides};
  in.out = TensorView::Contiguous(attn.data(), DType::kF32, {1, n, hp.head_count, hd});
  in.q_positions = TokenPositions::Offset(start);

  if (hp.embedding_scale != 1.0F) model::Scale(x, hp.embedding_scale);
  RequireFiniteHidden(x, d, start, -1);
  detail::AttentionPlan fresh_plan{};

  for (std::size_t l = 0; l < w.layers.size(); ++l) {
    const DecoderLayerWeights& layer = w.layers[l];
    const AttentionOptions& layer_attention = LayerAttention(attention, static_cast<std::int64_t>(l));
    // Keys kept lowered (DecoderCache) when the method allows it; a single new
    // token then attends over them with the decode kernel.
    const bool keep_lowered = cache.lowered_ != nullptr && detail::DecodeKeys::Supports(layer_attention);
    const std::size_t at = cache.keys_.size() == 1 ? 0 : l;
    std::vector<float>& keys = cache.keys_[at];
    std::vector<float>& values = cache.values_[at];
    const std::int64_t first = cache.first_[at], kept = start - first;  // tokens [first, start) held before
    model::RmsNorm(x, layer.attn_norm, hp.rms_norm_eps, normed);
    MatMul(normed, n, layer.qkv, qkv, w.activations);
    if (hp.qkv_bias) model::AddBias(qkv, layer.qkv_bias);
    if (hp.qk_norm) {  // before the cache keeps k and before RoPE
      model::RmsNormHeads(qkv, qkv_dim, 0, hp.head_count, layer.attn_q_norm, hp.rms_norm_eps);
      model::RmsNormHeads(qkv, qkv_dim, q_dim, hp.head_count_kv, layer.attn_k_norm, hp.rms_norm_eps);
    }
    // The model's query scale: q times a factor, the kernel's 1/sqrt(head_dim) then gives it.
    if (const auto factor = static_cast<float>(hp.QueryFactor()); factor != 1.0F) {
      for (std::int64_t t = 0; t < n; ++t) {
        float* q_row = qkv.data() + t * qkv_dim;
        for (std::int64_t i = 0; i < q_dim; ++i) q_row[i] *= factor;
      }
    }
    for (std::int64_t t = 0; t < n; ++t) {
      const float* row = qkv.data() + t * qkv_dim;
      std::copy(row + q_dim, row + q_dim + kv_dim, keys.begin() + (kept + t) * kv_dim);
      std::copy(row + q_dim + kv_dim, row + qkv_dim, values.begin() + (kept + t) * kv_dim);
    }
    in.k = ConstTensorView::Contiguous(keys.data(), DType::kF32, {1, kept + n, hp.head_count_kv, hd});
    in.v = ConstTensorView::Contiguous(values.data(), DType::kF32, {1, kept + n, hp.head_count_kv, hd});
    in.k_positions = TokenPositions::Offset(first);
    if (keep_lowered) {
      detail::DecodeKeys& lowered = cache.lowered_->layers[l];
      SyncLoweredKeys(lowered, keys, values, first, start, hp.head_count_kv, hd, layer_attention, cache.cached_keys_);
      // The new tokens alone: their queries and keys lowered (and checked).
      AttentionInputs fresh = in;
      fresh.k = ConstTensorView::Contiguous(keys.data() + kept * kv_dim, DType::kF32, {1, n, hp.head_count_kv, hd});
      fresh.v = ConstTensorView::Contiguous(values.data() + kept * kv_dim, DType::kF32, {1, n, hp.head_count_kv, hd});
      fresh.k_positions = TokenPositions::Offset(start);
      detail::PrepareAttentionPlan(fresh, layer_attention, fresh_plan);
      lowered.Append(fresh_plan);
    }
    if (keep_lowered && n == 1) {
      detail::DecodeAttention(fresh_plan, cache.lowered_->layers[l]);
    } else {
      Attention(in, layer_attention);
    }
    MatMul(attn, n, layer.attn_output, proj, w.activations);
    if (hp.post_norms) model::RmsNorm(proj, layer.post_attention_norm, hp.rms_norm_eps, proj);
    model::AddInPlace(x, proj);

    model::RmsNorm(x, layer.ffn_norm, hp.rms_norm_eps, normed);
    MatMul(normed, n, layer.gate_up, gate_up, w.activations);
    model::GatedUnit(gate_up, ffn, hp.activation, hidden);
    MatMul(hidden, n, layer.down, proj, w.activations);
    if (hp.post_norms) model::RmsNorm(proj, layer.post_ffw_norm, hp.rms_norm_eps, proj);
    model::AddInPlace(x, proj);
    RequireFiniteHidden(x, d, start, static_cast<std::int64_t>(l));
    if (progress) progress(static_cast<std::int64_t>(l) + 1, hp.block_count);
  }

  // The chosen rows' last hidden states, normed; only their logits are
  // computed. The rows left out are most of a prefill's work when the
  // vocabulary is large (Gemma 3: 262,144 x 640, 687 GFLOP for every row of
  // 2,048 tokens). The norm is a row's own: these rows are bitwise what they
  // are when every row is chosen.
  const auto chosen = static_cast<std::int64_t>(logit_rows.size());
  std::vector<float> last(chosen * d);
  for (std::int64_t r = 0; r < chosen; ++r) std::copy_n(x.begin() + logit_rows[r] * d, d, last.begin() + r * d);
  model::RmsNorm(last, w.output_norm, hp.rms_norm_eps, last);
  finish(last);
  // Done: nothing can throw that would need the cache as it was before.
  if (cache.lowered_) cache.ForgetPastWindow();  // not Forward's scratch cache
}

void DecoderModel::EmitLogits(std::span<const float> hidden, std::span<const std::int64_t> rows, std::int64_t start,
                              std::int64_t n, const RowLogitsSink& sink) const {
  // LogitRows at a time. A call of several tokens takes the kernel of many
  // rows even for one chosen row (a prompt's last): its logits are then
  // bitwise those of the same row when every row is chosen (a perplexity
  // pass), which a decode kernel's would not be.
  const Weights& w = *weights_;
  const DecoderHyperparams& hp = w.hp;
  const std::int64_t d = hp.embedding_length;
  const FewRows few = n > 1 ? FewRows::kPanels : FewRows::kDot;
  const std::int64_t kLogitRows = LogitRows(hp.vocab_size);
  const auto chosen = static_cast<std::int64_t>(rows.size());
  std::vector<float> logits(std::min(chosen, kLogitRows) * hp.vocab_size);
  for (std::int64_t first = 0; first < chosen; first += kLogitRows) {
    const std::int64_t block_rows = std::min(kLogitRows, chosen - first);
    const std::span<float> block(logits.data(), block_rows * hp.vocab_size);
    MatMul(hidden.subspan(first * d, block_rows * d), block_rows, w.Output(), block, w.activations, few);
    for (std::int64_t r = 0; r < block_rows; ++r) {
      const float* row = block.data() + r * hp.vocab_size;
      const std::int64_t j = detail::FirstOutOfRange(row, hp.vocab_size, detail::kLogitLimit);
      if (j < hp.vocab_size) {
        detail::ThrowLogitOutOfRange(kOp, start + rows[first + r], j, row[j]);
      }
    }
    sink(rows.subspan(first, block_rows), block);
  }
}

void DecoderModel::ForwardRows(std::span<const std::int32_t> tokens, const AttentionOptions& attention,
                               std::span<const std::int64_t> logit_rows, const HiddenRowsSink& finish,
                               const LayerProgress& progress) const {
  // A scratch cache with one layer's keys and values, shared by the layers.
  DecoderCache scratch = NewCache();
  scratch.keys_.resize(1);
  scratch.values_.resize(1);
  scratch.lowered_.reset();  // nothing decodes from it
  ExtendRows(scratch, tokens, attention, logit_rows, finish, progress);
}

void DecoderModel::Forward(std::span<const std::int32_t> tokens, const AttentionOptions& attention,
                           const LogitsSink& sink, const LayerProgress& progress) const {
  std::vector<std::int64_t> rows(tokens.size());
  for (std::size_t r = 0; r < rows.size(); ++r) rows[r] = static_cast<std::int64_t>(r);
  const auto n = static_cast<std::int64_t>(tokens.size());
  ForwardRows(
      tokens, attention, rows,
      [&](std::span<const float> hidden) {
        EmitLogits(hidden, rows, 0, n, [&](std::span<const std::int64_t> block_rows, std::span<const float> logits) {
          sink(block_rows.front(), static_cast<std::int64_t>(block_rows.size()), logits);
        });
      },
      progress);
}

std::vector<float> DecoderModel::Logits(std::span<const std::int32_t> tokens, const AttentionOptions& attention) const {
  const std::int64_t vocab = hparams().vocab_size;
  std::vector<float> out(tokens.size() * vocab);
  Forward(tokens, attention, [&](std::int64_t row, std::int64_t, std::span<const float> logits) {
    std::copy(logits.begin(), logits.end(), out.begin() + row * vocab);
  });
  return out;
}

std::vector<double> DecoderModel::NextTokenNll(std::span<const std::int32_t> tokens, const AttentionOptions& attention,
                                               const LayerProgress& progress) const {
  // Forward's every row, the last one's logits included (unused): an empty
  // sequence is Forward's error, not first's.
  if (tokens.size() < 2) {
    Forward(
        tokens, attention, [](std::int64_t, std::int64_t, std::span<const float>) {}, progress);
    return {};
  }
  return NextTokenNll(tokens, 0, attention, progress);
}

std::vector<double> DecoderModel::NextTokenNll(std::span<const std::int32_t> tokens, std::int64_t first,
                                               const AttentionOptions& attention, const LayerProgress& progress) const {
  const auto n = static_cast<std::int64_t>(tokens.size());
  Require(
      first >= 0 && first < n - 1, kOp, "first", first,
      "must be in [0, tokens - 1 = " + std::to_string(n - 1) + ") (the first row scored; row i predicts token i + 1)");
  // Row i predicts tokens[i + 1]; the last row predicts nothing. The losses
  // come straight from the hidden states (model::OutputNegativeLogLikelihood):
  // the rows' [rows, vocab] logits never exist at once.
  std::vector<std::int64_t> rows(static_cast<std::size_t>(n - 1 - first));
  std::vector<std::int32_t> targets(rows.size());
  for (std::size_t r = 0; r < rows.size(); ++r) {
    rows[r] = first + static_cast<std::int64_t>(r);
    targets[r] = tokens[rows[r] + 1];
  }
  std::vector<double> nll(rows.size());
  const Weights& w = *weights_;
  ForwardRows(
      tokens, attention, rows,
      [&](std::span<const float> hidden) {
        model::OutputNegativeLogLikelihood(hidden, w.Output(), w.activations, targets, rows, kOp, nll);
      },
      progress);
  return nll;
}

double DecoderModel::ForwardFlops(std::int64_t n, std::int64_t logit_rows) const {
  Require(n >= 0, kOp, "tokens", n, "must be >= 0 (the number of tokens in the forward pass)");
  Require(logit_rows >= 0 && logit_rows <= n, kOp, "logit_rows", logit_rows,
          "must be in [0, tokens = " + std::to_string(n) + "]");
  const DecoderHyperparams& hp = hparams();
  const double d = hp.embedding_length, hd = hp.head_dim, ffn = hp.feed_forward_length;
  const double q_dim = hp.head_count * hd, kv_dim = hp.head_count_kv * hd;
  const double tokens = static_cast<double>(n);
  const double linear_per_token = d * (q_dim + 2 * kv_dim) + q_dim * d + 3 * d * ffn;
  // Causal (query, key) pairs: query i sees i + 1 keys, or the window's W
  // in a local layer (the kernel skips the key blocks before the window).
  const auto causal_pairs = [tokens](double window) {
    if (window <= 0 || window >= tokens) return tokens * (tokens + 1) / 2;
    return window * (window + 1) / 2 + (tokens - window) * window;
  };
  double pairs = 0;
  for (std::int64_t l = 0; l < hp.block_count; ++l) {
    pairs += causal_pairs(hp.IsLocalLayer(l) ? static_cast<double>(hp.sliding_window) : 0.0);
  }
  const double attention_per_pair = 4.0 * static_cast<double>(hp.head_count) * hd;  // q.k and p.v: 2 x 2 flops
  return hp.block_count * 2 * tokens * linear_per_token + attention_per_pair * pairs +
         2 * static_cast<double>(logit_rows) * d * static_cast<double>(hp.vocab_size);
}

}  // namespace posenc
