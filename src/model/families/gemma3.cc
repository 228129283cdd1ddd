// Gemma 3 (Gemma 3 technical report; Hugging Face transformers'
// models/gemma3/modeling_gemma3.py; llama.cpp's gemma3 graph): embeddings
// scaled by sqrt(d), QK norm, four norms a layer, GeGLU, and five local
// layers of a sliding window to one global.
#include <cmath>
#include <string>

#include "model/families/families.h"
#include "posenc/error.h"

namespace posenc::families {
namespace {

constexpr const char* kOp = "llama";

// Queries are scaled by 1/sqrt(query_pre_attn_scalar), which GGUF files do
// not carry: head_dim for the 270M ... 12B models, d / heads for the 27B one
// (62 blocks; its config's 168 = 5376 / 32), as llama.cpp decides by block
// count.
constexpr std::int64_t kGemma3_27bBlocks = 62;

}  // namespace

DecoderFeatures Gemma3Features(const GgufMetadata& meta, const DecoderHyperparams& shapes) {
  const std::string p = "gemma3.";
  DecoderFeatures f;
  // Hugging Face scales by sqrt(d) cast to the activations' type (float32).
  f.embedding_scale = static_cast<float>(std::sqrt(static_cast<double>(shapes.embedding_length)));
  f.qk_norm = true;
  f.post_norms = true;
  f.activation = GateActivation::kGeluTanh;
  if (shapes.block_count == kGemma3_27bBlocks) {
    f.query_pre_attn_scalar = static_cast<double>(shapes.embedding_length) / static_cast<double>(shapes.head_count);
  }
  // The window counts the query's own key, as AttentionMask::window does:
  // Hugging Face masks key j for query p when p - j >= sliding_window, and
  // llama.cpp's LLAMA_SWA_TYPE_STANDARD when p - j >= n_swa.
  f.sliding_window = GgufCount(meta, p + "attention.sliding_window", kOp).value_or(0);
  // Five local layers to one global (Gemma 3 technical report), unless the
  // file says otherwise (llama.cpp's sliding_window_pattern).
  f.sliding_window_pattern = GgufCount(meta, p + "attention.sliding_window_pattern", kOp).value_or(6);
  // Local layers rotate with Hugging Face's rope_local_base_freq, which GGUF
  // files do not carry: 10,000 (DecoderFeatures' default), as in llama.cpp.
  // Gemma 2 capped logits; Gemma 3 does not, and neither does posenc's engine.
  for (const char* key : {"attn_logit_softcapping", "final_logit_softcapping"}) {
    const double cap = GgufNumber(meta, p + key, kOp).value_or(0.0);
    Require(cap == 0, kOp, p + key, cap, "must be 0 or absent: posenc's engine runs Gemma 3 without softcapping");
  }
  return f;
}

}  // namespace posenc::families
