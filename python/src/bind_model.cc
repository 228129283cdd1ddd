// Bindings for the Llama-family model and perplexity (posenc/llama_model.h,
// posenc/context_extension.h, posenc/perplexity.h): posenc.LlamaModel and
// posenc.perplexity wrap these (python/posenc/model.py).
//
// Tokens cross as a C-contiguous int32 NumPy array (model.py converts any
// integer array-like and rejects values outside int32); ids outside the
// vocabulary, an empty sequence and every bad extension or perplexity
// parameter are posenc::Error from the library, which pybind11 turns into
// ValueError. A context-extension method crosses in its text form
// ("yarn:factor=2,logn") and is planned here against the model's own RoPE
// and training length. The GIL is released around loading and every forward
// pass; logits are written straight into the NumPy array they are returned in.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bindings.h"
#include "posenc/context_extension.h"
#include "posenc/error.h"
#include "posenc/llama_model.h"
#include "posenc/perplexity.h"

namespace py = pybind11;

namespace posenc::python {
namespace {

constexpr const char* kOp = "model";

using TokenArray = py::array_t<std::int32_t, py::array::c_style | py::array::forcecast>;

std::span<const std::int32_t> TokenSpan(const TokenArray& tokens) {
  Require(tokens.ndim() == 1, kOp, "tokens.ndim", tokens.ndim(), "must be 1 (a sequence of token ids)");
  Require(tokens.size() >= 1, kOp, "tokens", Verbatim{"[]"}, "must hold at least one token id");
  return {tokens.data(), static_cast<std::size_t>(tokens.size())};
}

// The attention that runs `method` on `model` for sequences up to
// `target_length` tokens (default: the sequence's own length).
AttentionOptions PlanAttention(const LlamaModel& model, const std::string& method,
                               std::optional<std::int64_t> target_length, std::int64_t n) {
  const std::int64_t target = target_length.value_or(n);
  Require(target >= 1, kOp, "target_length", target, "must be >= 1 (tokens)");
  const LlamaHyperparams& hp = model.hparams();
  return PlanContextExtension(ParseContextExtension(method), hp.rope, hp.context_length, target).attention;
}

py::dict Hyperparams(const LlamaModel& model) {
  const LlamaHyperparams& hp = model.hparams();
  py::dict d;
  d["architecture"] = hp.architecture;
  d["vocab_size"] = hp.vocab_size;
  d["embedding_length"] = hp.embedding_length;
  d["feed_forward_length"] = hp.feed_forward_length;
  d["block_count"] = hp.block_count;
  d["head_count"] = hp.head_count;
  d["head_count_kv"] = hp.head_count_kv;
  d["head_dim"] = hp.head_dim;
  d["rms_norm_eps"] = hp.rms_norm_eps;
  d["context_length"] = hp.context_length;
  d["rope"] = py::cast(hp.rope);  // _posenc.RopeSpec (bind_rope.cc); model.py wraps it in posenc.RopeSpec
  d["tied_output"] = hp.tied_output;
  return d;
}

py::array_t<float> Logits(const LlamaModel& model, const TokenArray& tokens, const std::string& method,
                          std::optional<std::int64_t> target_length) {
  const auto ids = TokenSpan(tokens);
  const AttentionOptions attention = PlanAttention(model, method, target_length, static_cast<std::int64_t>(ids.size()));
  const std::int64_t vocab = model.hparams().vocab_size;
  py::array_t<float> out({static_cast<py::ssize_t>(ids.size()), static_cast<py::ssize_t>(vocab)});
  float* data = out.mutable_data();
  {
    py::gil_scoped_release release;  // `tokens` and `out` are kept alive by this frame
    model.Forward(ids, attention, [&](std::int64_t row_begin, std::int64_t rows, std::span<const float> logits) {
      std::copy_n(logits.data(), rows * vocab, data + row_begin * vocab);
    });
  }
  return out;
}

py::array_t<double> NextTokenNll(const LlamaModel& model, const TokenArray& tokens, const std::string& method,
                                 std::optional<std::int64_t> target_length) {
  const auto ids = TokenSpan(tokens);
  const AttentionOptions attention = PlanAttention(model, method, target_length, static_cast<std::int64_t>(ids.size()));
  std::vector<double> nll;
  {
    py::gil_scoped_release release;
    nll = model.NextTokenNll(ids, attention);
  }
  py::array_t<double> out(static_cast<py::ssize_t>(nll.size()));
  std::copy(nll.begin(), nll.end(), out.mutable_data());
  return out;
}

py::dict Perplexity(const LlamaModel& model, const TokenArray& tokens, std::int64_t context, std::int64_t stride,
                    const std::string& method, std::int64_t max_windows) {
  const auto ids = TokenSpan(tokens);
  Require(max_windows >= 0, "perplexity", "max_windows", max_windows, "must be >= 0 (0: every whole window)");
  PerplexityOptions options;
  options.context = context;
  options.stride = stride;
  options.extension = ParseContextExtension(method);
  options.max_windows = max_windows;
  PerplexityResult r;
  {
    py::gil_scoped_release release;
    r = EvaluatePerplexity(model, ids, options);
  }
  py::dict d;
  d["ppl"] = r.ppl;
  d["mean_nll"] = r.mean_nll;
  d["scored"] = r.scored;
  d["processed"] = r.processed;
  d["windows"] = r.windows;
  d["seconds"] = r.seconds;
  d["tokens_per_s"] = r.tokens_per_s;
  d["method"] = FormatContextExtension(r.method);
  return d;
}

}  // namespace

void BindModel(py::module_& m) {
  py::class_<LlamaModel>(m, "LlamaModel",
                         "posenc::LlamaModel: a Llama-family decoder from a GGUF file, float32 "
                         "(wrapped by posenc.LlamaModel)")
      .def(py::init([](const std::string& path) {
             py::gil_scoped_release release;
             return LlamaModel::Load(path);
           }),
           py::arg("path"), "Loads, checks and dequantizes a llama GGUF model file.")
      .def("hparams", &Hyperparams, "The hyperparameters read from the file, as a dict.")
      .def("logits", &Logits, py::arg("tokens"), py::arg("method"), py::arg("target_length"),
           "[n, vocab] float32 logits of one forward pass over int32 `tokens` at positions 0..n-1.")
      .def("next_token_nll", &NextTokenNll, py::arg("tokens"), py::arg("method"), py::arg("target_length"),
           "n - 1 float64 values -log p(tokens[i + 1] | tokens[:i + 1]).")
      .def(
          "forward_flops", [](const LlamaModel& model, std::int64_t n) { return model.ForwardFlops(n); }, py::arg("n"),
          "Floating-point operations of one forward pass over n tokens.");

  m.def("perplexity", &Perplexity, py::arg("model"), py::arg("tokens"), py::arg("context"), py::arg("stride"),
        py::arg("method"), py::arg("max_windows"),
        "posenc::EvaluatePerplexity as a dict (ppl, mean_nll, scored, processed, windows, seconds, "
        "tokens_per_s, method).");

  m.def(
      "plan_context_extension",
      [](const std::string& method, const RopeSpec& rope, std::int64_t train_length, std::int64_t target_length) {
        Require(target_length >= 1, kOp, "target_length", target_length, "must be >= 1 (tokens)");
        return FormatContextExtension(
            PlanContextExtension(ParseContextExtension(method), rope, train_length, target_length).resolved);
      },
      py::arg("method"), py::arg("rope"), py::arg("train_length"), py::arg("target_length"),
      "The text form of `method` with every default filled in for this model and length.");
}

}  // namespace posenc::python
