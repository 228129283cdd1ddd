// DecoderHyperparams from GGUF metadata ({arch}.* keys, as llama.cpp writes them):
// the shapes, then the features from the family of general.architecture.
#include <cmath>
#include <string>
#include <string_view>

#include "model/families/families.h"
#include "posenc/error.h"
#include "posenc/gguf_metadata.h"
#include "posenc/decoder_model.h"
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

// The family of general.architecture; throws naming the families there are.
const families::DecoderFamily& FamilyOf(const std::string& architecture) {
  std::string known;
  for (const families::DecoderFamily& family : families::kDecoderFamilies) {
    if (family.architecture == architecture) return family;
    known += std::string(known.empty() ? "" : ", ") + "the " + std::string(family.architecture) + " family (" +
             std::string(family.models) + ")";
  }
  ThrowError(kOp, "general.architecture", FormatValue(architecture), "posenc runs " + known);
}

}  // namespace

std::string DecoderFamilies() {
  std::string text;
  for (const families::DecoderFamily& family : families::kDecoderFamilies) {
    text += (text.empty() ? "" : ", ") + std::string(family.architecture) + " (" + std::string(family.models) + ")";
  }
  return text;
}

DecoderHyperparams ReadDecoderHyperparams(const GgufMetadata& meta) {
  DecoderHyperparams hp;
  const std::string& arch_name =
      RequireGgufValue<std::string>(meta, "general.architecture", kOp, "every GGUF model names it");
  const families::DecoderFamily& family = FamilyOf(arch_name);
  hp.architecture = arch_name;
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
  static_cast<DecoderFeatures&>(hp) = family.features(meta, hp);
  return hp;
}

}  // namespace posenc
