// Qwen2 and Qwen2.5 (Hugging Face transformers' models/qwen2/modeling_qwen2.py;
// llama.cpp's qwen2 graph): the llama baseline with biases on q, k and v.
// Its RoPE is read as every family's (RopeFromGguf): half-split, as
// llama.cpp's rope type for qwen2 (NEOX: the converter does not permute Q/K),
// and YaRN where the file says rope.scaling.type = yarn (Qwen2.5's long-context
// config, written by llama.cpp's converter with its factor and
// original_context_length).
#include "model/families/families.h"

namespace posenc::families {

DecoderFeatures Qwen2Features(const GgufMetadata& /*metadata*/, const DecoderHyperparams& /*shapes*/) {
  DecoderFeatures f;
  // Every Qwen2 layer has them (llama.cpp's loader requires attn_q.bias,
  // attn_k.bias, attn_v.bias): a file without them is refused, not run as
  // another model.
  f.qkv_bias = true;
  return f;
}

}  // namespace posenc::families
