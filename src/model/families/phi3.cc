// Phi-3 and Phi-3.5, Phi-4 (Hugging Face transformers' models/phi3/modeling_phi3.py;
// llama.cpp's phi3 graph and its converter's Phi3MiniModel): the llama
// baseline with q, k, v fused into attn_qkv (read from the tensors,
// DecoderFeatures::fused_qkv) and gate and up fused into ffn_up [2 ffn, d],
// rows gate | up, as Hugging Face's gate_up_proj.chunk(2) splits them.
// The 128k models' LongRoPE comes as tensors (rope_factors_short,
// rope_factors_long) with rope.scaling.original_context_length and
// rope.scaling.attn_factor, read as for every family (DecoderHyperparamsOf);
// the RoPE is half-split (llama.cpp's rope type for phi3: NEOX).
#include "model/families/families.h"

namespace posenc::families {

// The file's attention.sliding_window (Phi-3-mini-4k's config says 2047, the
// 128k models' 262,144; 0 for Phi-4) is not read: llama.cpp runs every
// layer with full causal attention ("Phi SWA is currently disabled"), and
// posenc runs the GGUF as llama.cpp does.
DecoderFeatures Phi3Features(const GgufMetadata& /*metadata*/, const DecoderHyperparams& /*shapes*/) {
  DecoderFeatures f;
  f.fused_gate_up = true;
  return f;
}

}  // namespace posenc::families
