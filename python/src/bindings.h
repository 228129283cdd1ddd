// The pieces of the posenc._posenc extension module. Each Bind* function
// lives in its own bind_<name>.cc and adds its classes and functions to the
// module; module.cc calls them in order. Add a family of bindings with one
// declaration here and one call in module.cc (CMake picks up bind_*.cc).
//
// One binding style for the package's value classes (RopeSpec, the attention
// encodings, PasskeyPrompt): each is a C++ class bound here, with its Python
// signature, docstring and attributes, its arguments converted by args.h (the
// package's one checker, posenc._args), and repr, ==, hash and pickling made
// from its fields by value_class.h; python/posenc/*.py only re-export them.
// Why C++ and not Python classes: the kernels' bindings read these objects in
// C++ (apply_rope and attention take a RopeSpec or an encoding), so a bound
// class is the object itself, while a Python class would hold a C++ core and
// forward every attribute to it, one class written twice. The resources
// (DecoderModel, GgufFile, BpeTokenizer, LearnedTable: a file or a large table,
// neither compared nor pickled) are Python classes over a C++ core, where
// their Python conveniences (paths, NumPy conversions) live.
#pragma once

#include <pybind11/pybind11.h>

namespace posenc::python {

// posenc.RopeSpec: a model's RoPE, its frequency table, Hugging Face configs
// (bind_rope_spec.cc).
void BindRopeSpec(pybind11::module_& m);

// apply_rope (fast and reference), the Q/K weight permutation and the thread
// count (bind_rope.cc).
void BindRope(pybind11::module_& m);

// Sinusoidal and learned absolute encodings, ALiBi, T5 buckets, XLNet/DeBERTa
// position arithmetic and the float64 relative-attention references
// (bind_encodings.cc).
void BindEncodings(pybind11::module_& m);

// posenc.attention and posenc.reference.attention: the tiled kernel and the
// float64 reference with every positional encoding and mask, and the encoding
// classes RopeEncoding, ReRopeEncoding, SelfExtendEncoding, AlibiEncoding,
// T5BiasEncoding, ShawEncoding and UrpeEncoding, named as the library's
// structs (bind_attention.cc).
void BindAttention(pybind11::module_& m);

// posenc.GgufFile: GGUF metadata, tensor list and dequantization (bind_gguf.cc).
void BindGguf(pybind11::module_& m);

// posenc.tokenizer.BpeTokenizer: byte-level BPE from GGUF metadata (bind_tokenizer.cc).
void BindTokenizer(pybind11::module_& m);

// posenc.analysis: RoPE dims, decay, invariance, sinusoidal linear map and
// dot matrices (bind_analysis.cc).
void BindAnalysis(pybind11::module_& m);

// posenc.DecoderModel and posenc.perplexity: the Llama-family model from GGUF,
// its logits, next-token losses and greedy generation under a
// context-extension method, windowed perplexity, passkey retrieval prompts and
// trials, and the table of context-extension methods (bind_model.cc).
void BindModel(pybind11::module_& m);

// posenc._posenc.SchemeCore: the tiny trainer's positional schemes (their
// tensors, attention terms and the terms' backward) and its loss with
// gradients, for posenc.torch.PositionScheme (bind_schemes.cc).
void BindSchemes(pybind11::module_& m);

}  // namespace posenc::python
