// The llama family (Llama 2/3, SmolLM2, TinyLlama, Mistral-style dense
// models): the baseline decoder, no feature switched on. Its RoPE (and
// Llama 3's rope_freqs) and whether its output is tied are read for every
// family (RopeFromGguf, DecoderHyperparamsOf).
#include "model/families/families.h"

namespace posenc::families {

DecoderFeatures LlamaFeatures(const GgufMetadata& /*metadata*/, const DecoderHyperparams& /*shapes*/) { return {}; }

}  // namespace posenc::families
