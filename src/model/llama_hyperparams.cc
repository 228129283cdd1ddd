// LlamaHyperparams from GGUF metadata ({arch}.* keys, as llama.cpp writes them).
#include <cmath>
#include <string>

#include "posenc/error.h"
#include "posenc/llama_model.h"
#include "posenc/rope_config.h"

namespace posenc {
namespace {

constexpr const char* kOp = "llama";

const GgufValue* Find(const GgufMetadata& meta, const std::string& key) {
  const auto it = meta.find(key);
  return it == meta.end() ? nullptr : &it->second;
}

std::optional<double> Number(const GgufMetadata& meta, const std::string& key) {
  const GgufValue* value = Find(meta, key);
  if (!value) return std::nullopt;
  if (const auto* i = std::get_if<std::int64_t>(value)) return static_cast<double>(*i);
  if (const auto* d = std::get_if<double>(value)) return *d;
  ThrowError(kOp, key, "non-numeric", "must be a number");
}

// A count > 0 that must be there (or equal `fallback` when given).
std::int64_t Count(const GgufMetadata& meta, const std::string& key, std::optional<std::int64_t> fallback = {}) {
  const auto value = Number(meta, key);
  if (!value) {
    if (fallback) return *fallback;
    ThrowError(kOp, key, "missing", "a llama GGUF must have it");
  }
  Require(*value >= 1 && *value == std::floor(*value) && *value < 1e12, kOp, key, *value,
          "must be a whole number >= 1");
  return static_cast<std::int64_t>(*value);
}

}  // namespace

LlamaHyperparams ReadLlamaHyperparams(const GgufMetadata& meta) {
  LlamaHyperparams hp;
  const GgufValue* arch = Find(meta, "general.architecture");
  Require(arch != nullptr, kOp, "general.architecture", Verbatim{"missing"}, "every GGUF model names it");
  const auto* arch_name = std::get_if<std::string>(arch);
  Require(arch_name != nullptr, kOp, "general.architecture", Verbatim{"non-string"}, "must be a string");
  Require(*arch_name == "llama", kOp, "general.architecture", *arch_name,
          "posenc runs the llama family (Llama 2/3, SmolLM, TinyLlama, Mistral-style dense models)");
  hp.architecture = *arch_name;
  const std::string p = hp.architecture + ".";
  hp.embedding_length = Count(meta, p + "embedding_length");
  hp.feed_forward_length = Count(meta, p + "feed_forward_length");
  hp.block_count = Count(meta, p + "block_count");
  hp.head_count = Count(meta, p + "attention.head_count");
  hp.head_count_kv = Count(meta, p + "attention.head_count_kv", hp.head_count);
  Require(hp.head_count % hp.head_count_kv == 0, kOp, p + "attention.head_count_kv", hp.head_count_kv,
          "must divide attention.head_count = " + std::to_string(hp.head_count));
  Require(hp.embedding_length % hp.head_count == 0 || Find(meta, p + "attention.key_length"), kOp,
          p + "embedding_length", hp.embedding_length,
          "must be a multiple of attention.head_count when attention.key_length is absent");
  hp.head_dim = Count(meta, p + "attention.key_length", hp.embedding_length / hp.head_count);
  const std::int64_t value_length = Count(meta, p + "attention.value_length", hp.head_dim);
  Require(value_length == hp.head_dim, kOp, p + "attention.value_length", value_length,
          "must equal attention.key_length = " + std::to_string(hp.head_dim));
  hp.context_length = Count(meta, p + "context_length");
  hp.rms_norm_eps = Number(meta, p + "attention.layer_norm_rms_epsilon").value_or(1e-5);
  Require(std::isfinite(hp.rms_norm_eps) && hp.rms_norm_eps > 0, kOp, p + "attention.layer_norm_rms_epsilon",
          hp.rms_norm_eps, "must be > 0");
  if (const auto vocab = Number(meta, p + "vocab_size")) {
    hp.vocab_size = Count(meta, p + "vocab_size");
  } else if (const GgufValue* tokens = Find(meta, "tokenizer.ggml.tokens")) {
    const auto* list = std::get_if<std::vector<std::string>>(tokens);
    Require(list != nullptr && !list->empty(), kOp, "tokenizer.ggml.tokens", Verbatim{"not a string list"},
            "must list the vocabulary");
    hp.vocab_size = static_cast<std::int64_t>(list->size());
  }  // else: the token_embd tensor's rows (the loader fills it in)
  hp.rope = RopeFromGguf(meta).spec;
  return hp;
}

}  // namespace posenc
