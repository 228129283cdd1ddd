// A decoder run from a GGUF file in float32: the real model on which posenc
// measures the context-extension methods. The positional part of every
// layer's attention is the AttentionOptions the caller passes, so each
// context-extension method runs through the same engine and the same kernel.
// The forward pass reads the model's features (decoder_features.h), filled
// from the file by its family's function (src/model/families/: llama,
// gemma3, qwen2, phi3), never the family itself.
//
// One layer, x [n, d] with one token a row (d = embedding_length):
//   a = rms_norm(x) * attn_norm
//   q = a Wq^T [n, heads, head_dim]   k = a Wk^T, v = a Wv^T [n, kv_heads, head_dim]
//   x = x + Attention(q, k, v; positions 0..n-1, causal) Wo^T
//   f = rms_norm(x) * ffn_norm
//   x = x + (silu(f Wgate^T) * (f Wup^T)) Wdown^T          [n, ffn] -> [n, d]
// then logits = (rms_norm(x) * output_norm) Wout^T [n, vocab], with Wout the
// token embeddings when the file has no output.weight (tied, as SmolLM2).
//
// The features change it (Gemma 3: Gemma 3 technical report; Hugging Face
// transformers' models/gemma3/modeling_gemma3.py; llama.cpp's gemma3 graph):
//   x = token_embd[tokens] * embedding_scale
//   qk_norm: q, k: each head's head_dim vector rms-normed (attn_q_norm,
//         attn_k_norm) before RoPE
//   post_norms: x = x + rms_norm(Attention(...) Wo^T) * post_attention_norm
//         and x = x + rms_norm(MLP(f)) * post_ffw_norm
//   activation: gelu_tanh in place of silu
//   layer kinds: global layers (every sliding_window_pattern-th, 5, 11, 17
//   of Gemma 3 270M's 18) take the caller's options; local layers see a
//   sliding window of the last sliding_window keys with RoPE of base
//   local_rope_theta, whatever method the global layers use (LayerAttention).
// The norm weights are used as stored: Hugging Face's Gemma3RMSNorm scales by
// (1 + weight) and llama.cpp's converter (convert_hf_to_gguf.py, Gemma3Model)
// adds the 1 to every *norm.weight when it writes the GGUF.
//
// Weights stay in the file's type (WeightStorage::kAsStored: matmul.h's
// kernels read Q4_0 ... Q8_0, the K-quants, F16 and BF16 as they are), or
// are dequantized to float32 once at load (kFloat32: the reference, 4 bytes
// a weight; any type GgufFile can dequantize). GGUF llama-family Q/K
// weights come permuted by llama.cpp's converter, so RoPE is interleaved;
// other families' (Gemma's) are not: RoPE is half-split (RopeFromGguf
// follows llama.cpp's rope type per architecture).
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "posenc/attention.h"
#include "posenc/context_extension.h"
#include "posenc/decoder_features.h"
#include "posenc/gguf.h"
#include "posenc/matmul.h"
#include "posenc/rope_spec.h"

namespace posenc {

// The shapes, and the features (DecoderFeatures) the forward pass reads.
struct DecoderHyperparams : DecoderFeatures {
  // general.architecture: the family whose function filled the features
  // (src/model/families/families.h); the forward pass never reads it.
  std::string architecture;
  std::int64_t vocab_size = 0;
  std::int64_t embedding_length = 0;     // d
  std::int64_t feed_forward_length = 0;  // ffn
  std::int64_t block_count = 0;
  std::int64_t head_count = 0;
  std::int64_t head_count_kv = 0;
  std::int64_t head_dim = 0;
  double rms_norm_eps = 1e-5;
  std::int64_t context_length = 0;  // the training length ({arch}.context_length)
  RopeSpec rope;                    // from RopeFromGguf; of the global layers when some are local

  // What multiplies q (after the QK norm) so that the attention's
  // 1 / sqrt(head_dim) scales by 1 / sqrt(query_pre_attn_scalar): 1 unless set.
  double QueryFactor() const {
    return query_pre_attn_scalar > 0 ? std::sqrt(static_cast<double>(head_dim) / query_pre_attn_scalar) : 1.0;
  }
};

// PlanContextExtension for a model of `hp` at `length` tokens: a method
// changes the attention of the global layers (every layer of a Llama; the
// local layers of Gemma 3 keep their window and base). Throws posenc::Error
// for what PlanContextExtension refuses, and for a method other than the
// model's own RoPE on a model without a global layer (every layer local: a
// sliding_window_pattern above the block count), where it would change
// nothing while a study reported it as a method.
ExtensionPlan PlanModelExtension(const ContextExtension& method, const DecoderHyperparams& hp, std::int64_t length);

// Reads the hyperparameters from `{arch}.*` metadata; throws posenc::Error
// naming the key for a missing or inconsistent value, or an architecture
// no family runs (src/model/families/families.h).
DecoderHyperparams ReadDecoderHyperparams(const GgufMetadata& metadata);

// The families the engine runs, from their table, for help texts:
// "llama (Llama 2/3, ...), gemma3 (Gemma 3), ...".
std::string DecoderFamilies();

// Receives logits in blocks of rows, so that [n, vocab] is never held whole:
// rows [row_begin, row_begin + rows) as rows * vocab floats.
using LogitsSink = std::function<void(std::int64_t row_begin, std::int64_t rows, std::span<const float> logits)>;
// Called after each layer (progress bars): layers done, layers in all.
using LayerProgress = std::function<void(std::int64_t done, std::int64_t total)>;

// Receives the logits of chosen rows, in blocks: rows (indices into the
// tokens of the call, increasing) and rows.size() * vocab floats.
using RowLogitsSink = std::function<void(std::span<const std::int64_t> rows, std::span<const float> logits)>;

// What a cache does with the keys it keeps lowered when a later call lowers
// keys differently (a method planned again for a longer sequence).
enum class CachedKeys {
  // Lowered again as the call lowers keys: one method over the whole
  // sequence, as one forward pass computes (the default).
  kRelowered,
  // Each key keeps the rotation of the call that wrote it, as Hugging Face's
  // cache keeps keys rotated when computed. With a method planned again
  // every step for the length so far (dynamic NTK: its
  // _dynamic_frequency_update), a step's query and its cached keys then
  // disagree about the frequencies (transformers#25104, vllm#3488). Only
  // rotations are kept so (NoPE, plain and frequency-scaled RoPE), and once
  // the kept keys differ from a call's lowering, a call takes one token.
  kAsWritten,
};

// The decoding state of one sequence: every layer's keys (before RoPE, so
// any positional method can rotate them at the positions it needs) and
// values for the tokens run so far, at positions 0..tokens()-1. Made empty
// by DecoderModel::NewCache; DecoderModel::Extend appends to it.
//
// For NoPE and the RoPE family (every frequency scaling, ReRoPE, Leaky
// ReRoPE, Self-Extend) it also keeps each key as the method lowers it
// (rotated at its position, and ReRoPE's / Self-Extend's far copy), packed
// for the decode kernel, with a copy of the values: a decode step then
// computes one key and reads the rest. That doubles the cache's bytes
// (RoPE) or multiplies them by 2.5 (ReRoPE, Self-Extend: two lowered keys);
// the keys before RoPE stay so that any method can use the cache.
// Gemma 3's local layers keep only what their sliding window of W keys can
// still see and some before it: at most 3 W + 16 tokens after an Extend
// (during one, also its new tokens), the oldest forgotten every W tokens (a
// rewind by Truncate of up to W tokens stays possible).
class DecoderCache {
 public:
  DecoderCache();
  DecoderCache(DecoderCache&&) noexcept;
  DecoderCache& operator=(DecoderCache&&) noexcept;
  ~DecoderCache();

  std::int64_t tokens() const { return tokens_; }
  CachedKeys cached_keys() const { return cached_keys_; }
  // Forgets tokens [tokens, this->tokens()): a rewind, e.g. after scoring
  // an answer by teacher forcing and before generating from the prompt.
  // Throws posenc::Error (and changes nothing) for a rewind past what a
  // local layer kept: the query at `tokens` would need forgotten keys.
  void Truncate(std::int64_t tokens);
  // Bytes held, every layer's keys and values in every form.
  double Bytes() const;

 private:
  friend class DecoderModel;
  // The local layers' tokens that their windows have passed, forgotten (the
  // rule above) at the end of an Extend: one that throws leaves the cache as
  // it was.
  void ForgetPastWindow();
  CachedKeys cached_keys_ = CachedKeys::kRelowered;
  std::int64_t kv_dim_ = 0;  // kv_heads * head_dim floats per token and layer
  std::int64_t tokens_ = 0;
  // [layer][token * kv_dim] from the layer's first kept token; a single
  // shared layer for Forward's scratch cache (each layer attends only to the
  // call's own tokens).
  std::vector<std::vector<float>> keys_, values_;
  // [layer]: the position of the first kept token, and the sliding window
  // (0: a global layer, which keeps every token).
  std::vector<std::int64_t> first_, window_;
  struct LoweredKeys;                     // per layer, the keys as the method lowers them (src/model/decoder_model.cc)
  std::unique_ptr<LoweredKeys> lowered_;  // null: none kept (Forward's scratch cache)
};

class DecoderModel {
 public:
  // Opens, checks (every tensor present with its expected shape and a type
  // `storage` can keep) and loads; throws posenc::Error naming the tensor or
  // key.
  // `activations`: of the decode products (matmul.h); kInt8 rounds them to
  // int8 as llama.cpp does (faster decode, a small cost in perplexity) and
  // needs the weights kept as stored.
  static DecoderModel Load(const std::string& path, WeightStorage storage = WeightStorage::kAsStored,
                           DotActivations activations = DotActivations::kFloat32);
  static DecoderModel FromGguf(const GgufFile& file, WeightStorage storage = WeightStorage::kAsStored,
                               DotActivations activations = DotActivations::kFloat32);

  DecoderModel(DecoderModel&&) noexcept;
  DecoderModel& operator=(DecoderModel&&) noexcept;
  ~DecoderModel();

  const DecoderHyperparams& hparams() const;

  // The model's own attention: RoPE with its spec, causal (of the global
  // layers for Gemma 3).
  AttentionOptions DefaultAttention() const;

  // What layer `layer` runs when Forward or Extend is given `attention`:
  // `attention` itself, except on Gemma 3's local layers, which keep the
  // model's own local attention (RoPE of base local_rope_theta, causal,
  // window sliding_window) for every method: a context-extension method
  // extends the global layers only, the local ones never see past their
  // window.
  const AttentionOptions& LayerAttention(const AttentionOptions& attention, std::int64_t layer) const;

  // One forward pass over tokens at positions 0..n-1 (batched prefill);
  // logits go to `sink` in blocks of rows, in order. Throws posenc::Error for
  // an empty sequence, a token id outside the vocabulary, or attention
  // options the kernel rejects. Multithreaded; bitwise identical results for
  // any thread count.
  //
  // A corrupt or diverged model is an error, never numbers (here and in
  // Extend): the input embedding or a layer's hidden state holding NaN or
  // infinity (naming the layer, the position and the element), or a logit
  // that is NaN, infinite or of magnitude 2^16 or more, past which a
  // log-softmax measures float32 rounding (a 1e20 embedding gave logits of
  // 5.7e29 and a perplexity of exactly 1; naming the position and the token).
  void Forward(std::span<const std::int32_t> tokens, const AttentionOptions& attention, const LogitsSink& sink,
               const LayerProgress& progress = {}) const;

  // An empty decoding cache for this model.
  DecoderCache NewCache(CachedKeys cached_keys = CachedKeys::kRelowered) const;

  // Runs `tokens` after the cache's tokens (at positions cache.tokens()
  // onwards) and appends their keys and values to the cache: prefill with
  // many tokens, decoding with one. Sends the logits of the rows listed in
  // `logit_rows` (indices into `tokens`, strictly increasing; e.g. only the
  // last row to generate, or an answer's rows to score it) to `sink` — no
  // other row's logits are computed. The results equal a Forward of all the
  // cache's tokens and these to float tolerance, for any attention options
  // (the same options at every call: plan a method for the final length),
  // unless the cache keeps its keys as written (CachedKeys::kAsWritten).
  // Throws posenc::Error (bad tokens or rows, a cache too large for this
  // machine, a call the cache's CachedKeys rule refuses) before changing the
  // cache; one for values out of range (see Forward) leaves the cache as it
  // was.
  void Extend(DecoderCache& cache, std::span<const std::int32_t> tokens, const AttentionOptions& attention,
              std::span<const std::int64_t> logit_rows, const RowLogitsSink& sink,
              const LayerProgress& progress = {}) const;

  // [n, vocab] logits (small n: tests and oracles).
  std::vector<float> Logits(std::span<const std::int32_t> tokens, const AttentionOptions& attention) const;

  // -log p(tokens[i + 1] | tokens[0..i]) for i in [0, n - 1): n - 1 values
  // (natural log, from float32 logits, accumulated in double).
  std::vector<double> NextTokenNll(std::span<const std::int32_t> tokens, const AttentionOptions& attention,
                                   const LayerProgress& progress = {}) const;
  // The same for i in [first, n - 1) only: n - 1 - first values, each
  // bitwise NextTokenNll(tokens)[i]. Only those rows' logits are computed: a
  // sliding perplexity window scores its last tokens, and the output matrix
  // of the rows before them (most of a pass when the vocabulary is large) is
  // skipped. Throws posenc::Error for first outside [0, n - 1).
  std::vector<double> NextTokenNll(std::span<const std::int32_t> tokens, std::int64_t first,
                                   const AttentionOptions& attention, const LayerProgress& progress = {}) const;

  // Floating-point operations (a multiply-add counts 2) of one Forward of n
  // tokens: the linear layers and the logits, plus q.k and p.v over the
  // causal triangle (n(n+1)/2 pairs per head and layer; a local layer of
  // Gemma 3 counts only the keys inside its sliding window, as its kernel
  // computes). A method's mask (window, Λ) is not subtracted. With
  // `logit_rows`, only that many rows' logits (Extend's logit_rows: 1 for a
  // prompt's prefill); without, all n (Forward, a perplexity pass).
  double ForwardFlops(std::int64_t n) const { return ForwardFlops(n, n); }
  double ForwardFlops(std::int64_t n, std::int64_t logit_rows) const;

  // Bytes, for sizing work before doing it: the weights as held (what one
  // decode step reads); the activations of a Forward or Extend of n tokens
  // (the residual stream, q/k/v, attention output, gate/up, a block of
  // logits); the most a decoding cache of n tokens holds (DecoderCache: the
  // keys and values before RoPE, and up to two lowered keys and the values
  // again, for every layer while they come in one Extend; a local layer
  // keeps at most 3 W + 16 after it); the keys and values a decode step
  // after n tokens reads, once (every layer's n, a local layer's last W).
  double WeightBytes() const;
  double ActivationBytes(std::int64_t n) const;
  double CacheBytes(std::int64_t n) const;
  double KeyValueBytes(std::int64_t n) const;

  // Throws unless ActivationBytes(n) fit in this machine's memory: a context too long for the machine is an
  // error before anything is allocated, not a bad_alloc halfway through.
  void RequireActivationsFit(std::int64_t n) const;

  struct Weights;  // opaque: src/model/decoder_weights.h

 private:
  explicit DecoderModel(std::unique_ptr<Weights> weights);
  // Extend's check of a call on a cache keeping its keys as written: throws
  // for keys that are not rotations and for several tokens after kept keys
  // rotated otherwise than this call rotates.
  void RequireKeptAsWritten(const DecoderCache& cache, std::int64_t n, const AttentionOptions& attention) const;
  // What an Extend does with its chosen rows' last hidden states, [rows, d]
  // after the output norm: their logits to a sink (EmitLogits), or their
  // losses (NextTokenNll).
  using HiddenRowsSink = std::function<void(std::span<const float> hidden)>;
  // Extend with the chosen rows' hidden states to `finish`.
  void ExtendRows(DecoderCache& cache, std::span<const std::int32_t> tokens, const AttentionOptions& attention,
                  std::span<const std::int64_t> logit_rows, const HiddenRowsSink& finish,
                  const LayerProgress& progress) const;
  // ExtendRows after the checks, with the cache already grown to hold `tokens`.
  void ExtendCached(DecoderCache& cache, std::span<const std::int32_t> tokens, const AttentionOptions& attention,
                    std::span<const std::int64_t> logit_rows, const HiddenRowsSink& finish,
                    const LayerProgress& progress) const;
  // A forward pass from position 0 through a scratch cache (Forward), the
  // chosen rows' hidden states to `finish` (Extend's rule).
  void ForwardRows(std::span<const std::int32_t> tokens, const AttentionOptions& attention,
                   std::span<const std::int64_t> logit_rows, const HiddenRowsSink& finish,
                   const LayerProgress& progress) const;
  // The logits of `rows` of a call of n tokens from position `start`, from
  // their hidden states [rows, d], to sink a block of rows at a time.
  void EmitLogits(std::span<const float> hidden, std::span<const std::int64_t> rows, std::int64_t start, std::int64_t n,
                  const RowLogitsSink& sink) const;
  std::unique_ptr<Weights> weights_;
};

namespace reference {
// The same model as written: float64 everywhere, weights dequantized from
// the file, reference::Attention. Returns [n, vocab] logits. For tiny models
// (tests): it holds every activation of every layer.
std::vector<double> DecoderLogits(const GgufFile& file, std::span<const std::int32_t> tokens,
                                  const AttentionOptions& attention);
}  // namespace reference

}  // namespace posenc
