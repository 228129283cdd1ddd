// The pieces of the posenc._posenc extension module. Each Bind* function
// lives in its own bind_<name>.cc and adds its classes and functions to the
// module; module.cc calls them in order. Add a family of bindings with one
// declaration here and one call in module.cc (CMake picks up bind_*.cc).
#pragma once

#include <pybind11/pybind11.h>

namespace posenc::python {

// RopeSpec, frequencies, apply_rope (fast and reference), the Q/K weight
// permutation and the thread count (bind_rope.cc).
void BindRope(pybind11::module_& m);

// Sinusoidal and learned absolute encodings, ALiBi, T5 buckets, XLNet/DeBERTa
// position arithmetic and the float64 relative-attention references
// (bind_encodings.cc).
void BindEncodings(pybind11::module_& m);

// posenc.attention and posenc.reference.attention: the tiled kernel and the
// float64 reference with every positional encoding and mask, and the encoding
// classes RopeAttention, ReRopeAttention, SelfExtendAttention, AlibiAttention,
// T5BiasAttention and ShawAttention (bind_attention.cc).
void BindAttention(pybind11::module_& m);

// posenc.GgufFile: GGUF metadata, tensor list and dequantization (bind_gguf.cc).
void BindGguf(pybind11::module_& m);

// posenc.tokenizer.BpeTokenizer: byte-level BPE from GGUF metadata (bind_tokenizer.cc).
void BindTokenizer(pybind11::module_& m);

// posenc.analysis: RoPE dims, decay, invariance, sinusoidal linear map and
// dot matrices (bind_analysis.cc).
void BindAnalysis(pybind11::module_& m);

// posenc.LlamaModel and posenc.perplexity: the Llama-family model from GGUF,
// its logits, next-token losses and greedy generation under a
// context-extension method, windowed perplexity, passkey retrieval prompts and
// trials, and the table of context-extension methods (bind_model.cc).
void BindModel(pybind11::module_& m);

}  // namespace posenc::python
