// LlamaHyperparams from GGUF metadata ({arch}.* keys, as llama.cpp writes them).
#include <cmath>
#include <string>
#include <string_view>

#include "posenc/error.h"
#include "posenc/gguf_metadata.h"
#include "posenc/llama_model.h"
#include "posenc/rope_config.h"

namespace posenc {
namespace {

constexpr const char* kOp = "llama";

// A count >= 1 that must be there (or equal `fallback` when given).
std::int64_t Count(const GgufMetadata& meta, const std::string& key, std::optional<std::int64_t> fallback = {}) {
  if (const auto value = GgufCount(meta, key, kOp)) return *value;
  if (fallback) return *fallback;
  ThrowError(kOp, key, "missing", "the file's architecture needs it");
}

// Gemma 3's layer kinds, and the features posenc does not run. The window
// counts the query's own key, as AttentionMask::window does: Hugging Face
// masks key j for query p when p - j >= sliding_window, and llama.cpp's
// LLAMA_SWA_TYPE_STANDARD when p - j >= n_swa. Queries are scaled by
// 1/sqrt(query_pre_attn_scalar), which GGUF files do not carry: head_dim
// for the 270M ... 12B models, d / heads for the 27B one (62 blocks; its
// config's 168 = 5376 / 32), as llama.cpp decides by block count.
constexpr std::int64_t kGemma3_27bBlocks = 62;

void ReadGemma3Attention(const GgufMetadata& meta, const std::string& p, LlamaHyperparams& hp) {
  if (hp.block_count == kGemma3_27bBlocks) {
    hp.query_pre_attn_scalar = static_cast<double>(hp.embedding_length) / static_cast<double>(hp.head_count);
  }
  hp.sliding_window = GgufCount(meta, p + "attention.sliding_window", kOp).value_or(0);
  // Five local layers to one global (Gemma 3 technical report).
  hp.sliding_window_pattern = Count(meta, p + "attention.sliding_window_pattern", 6);
  // Gemma 2 capped logits; Gemma 3 does not, and neither does posenc's engine.
  for (const char* key : {"attn_logit_softcapping", "final_logit_softcapping"}) {
    const double cap = GgufNumber(meta, p + key, kOp).value_or(0.0);
    Require(cap == 0, kOp, p + key, cap, "must be 0 or absent: posenc's engine runs Gemma 3 without softcapping");
  }
}

}  // namespace

std::string_view LlamaArchitectureName(LlamaArchitecture architecture) {
  return architecture == LlamaArchitecture::kGemma3 ? "gemma3" : "llama";
}

LlamaHyperparams ReadLlamaHyperparams(const GgufMetadata& meta) {
  LlamaHyperparams hp;
  const std::string& arch_name =
      RequireGgufValue<std::string>(meta, "general.architecture", kOp, "every GGUF model names it");
  Require(arch_name == "llama" || arch_name == "gemma3", kOp, "general.architecture", arch_name,
          "posenc runs the llama family (Llama 2/3, SmolLM, TinyLlama, Mistral-style dense models) and gemma3");
  hp.architecture = arch_name == "gemma3" ? LlamaArchitecture::kGemma3 : LlamaArchitecture::kLlama;
  const std::string p = arch_name + ".";
  hp.embedding_length = Count(meta, p + "embedding_length");
  hp.feed_forward_length = Count(meta, p + "feed_forward_length");
  hp.block_count = Count(meta, p + "block_count");
  hp.head_count = Count(meta, p + "attention.head_count");
  hp.head_count_kv = Count(meta, p + "attention.head_count_kv", hp.head_count);
  Require(hp.head_count % hp.head_count_kv == 0, kOp, p + "attention.head_count_kv", hp.head_count_kv,
          "must divide attention.head_count = " + std::to_string(hp.head_count));
  Require(hp.embedding_length % hp.head_count == 0 || meta.contains(p + "attention.key_length"), kOp,
          p + "embedding_length", hp.embedding_length,
          "must be a multiple of attention.head_count when attention.key_length is absent");
  hp.head_dim = Count(meta, p + "attention.key_length", hp.embedding_length / hp.head_count);
  const std::int64_t value_length = Count(meta, p + "attention.value_length", hp.head_dim);
  Require(value_length == hp.head_dim, kOp, p + "attention.value_length", value_length,
          "must equal attention.key_length = " + std::to_string(hp.head_dim));
  hp.context_length = Count(meta, p + "context_length");
  hp.rms_norm_eps = GgufNumber(meta, p + "attention.layer_norm_rms_epsilon", kOp).value_or(1e-5);
  Require(std::isfinite(hp.rms_norm_eps) && hp.rms_norm_eps > 0, kOp, p + "attention.layer_norm_rms_epsilon",
          hp.rms_norm_eps, "must be > 0");
  if (const auto vocab = GgufCount(meta, p + "vocab_size", kOp)) {
    hp.vocab_size = *vocab;
  } else if (const auto* tokens = GgufFind<std::vector<std::string>>(meta, "tokenizer.ggml.tokens", kOp)) {
    Require(!tokens->empty(), kOp, "tokenizer.ggml.tokens", Verbatim{"empty"}, "must list the vocabulary");
    hp.vocab_size = static_cast<std::int64_t>(tokens->size());
  }  // else: the token_embd tensor's rows (the loader fills it in)
  hp.rope = RopeFromGguf(meta).spec;
  if (hp.architecture == LlamaArchitecture::kGemma3) ReadGemma3Attention(meta, p, hp);
  return hp;
}

}  // namespace posenc
