// Bindings for the Llama-family model, perplexity, greedy generation and
// passkey retrieval (posenc/decoder_model.h, posenc/context_extension.h,
// posenc/perplexity.h, posenc/generation.h, posenc/passkey.h):
// posenc.DecoderModel, posenc.perplexity and posenc.passkey wrap these
// (python/posenc/model.py, python/posenc/passkey.py).
//
// Tokens cross as a C-contiguous int32 NumPy array (model.py converts any
// integer array-like and rejects values outside int32); ids outside the
// vocabulary, an empty sequence and every bad extension or perplexity
// parameter are posenc::Error from the library, which pybind11 turns into
// ValueError. A context-extension method crosses in its text form
// ("yarn:factor=2,logn") and is planned here against the model's own RoPE
// and training length: for generation, for the prompt plus the tokens to
// generate (as posenc generate does). The GIL is released around loading and
// every forward pass; logits are written straight into the NumPy array they
// are returned in. Generated text that is not UTF-8 (a token can end inside
// a character) reaches Python with U+FFFD, as BpeTokenizer.decode gives it.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "args.h"
#include "bindings.h"
#include "posenc/context_extension.h"
#include "posenc/error.h"
#include "posenc/generation.h"
#include "posenc/decoder_model.h"
#include "posenc/passkey.h"
#include "posenc/perplexity.h"
#include "posenc/rope_config.h"
#include "posenc/tokenizer.h"
#include "value_class.h"

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
AttentionOptions PlanAttention(const DecoderModel& model, const std::string& method,
                               std::optional<std::int64_t> target_length, std::int64_t n) {
  const std::int64_t target = target_length.value_or(n);
  Require(target >= 1, kOp, "target_length", target, "must be >= 1 (tokens)");
  const DecoderHyperparams& hp = model.hparams();
  return PlanModelExtension(ParseContextExtension(method), hp, target).attention;
}

py::dict Hyperparams(const DecoderModel& model) {
  const DecoderHyperparams& hp = model.hparams();
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
  d["rope"] = py::cast(RopeModelConfig{hp.rope, hp.context_length});  // a posenc.RopeSpec (bind_rope_spec.cc)
  d["tied_output"] = hp.tied_output;
  d["sliding_window"] = hp.sliding_window;  // Gemma 3's local layers; 0: none
  d["sliding_window_pattern"] = hp.sliding_window_pattern;
  d["local_rope_theta"] = hp.local_rope_theta;
  // Gemma 3: queries scaled by 1/sqrt(this) (head_dim, or d / heads for the 27B model).
  d["query_pre_attn_scalar"] =
      hp.query_pre_attn_scalar > 0 ? hp.query_pre_attn_scalar : static_cast<double>(hp.head_dim);
  return d;
}

py::array_t<float> Logits(const DecoderModel& model, const TokenArray& tokens, const std::string& method,
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

py::array_t<double> NextTokenNll(const DecoderModel& model, const TokenArray& tokens, const std::string& method,
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

py::dict Perplexity(const DecoderModel& model, const TokenArray& tokens, std::int64_t context, std::int64_t stride,
                    const std::string& method, std::int64_t max_windows, std::optional<std::int32_t> bos, bool decode,
                    bool keys_as_written) {
  const auto ids = TokenSpan(tokens);
  Require(max_windows >= 0, "perplexity", "max_windows", max_windows, "must be >= 0 (0: every whole window)");
  PerplexityOptions options;
  options.context = context;
  options.stride = stride;
  options.extension = ParseContextExtension(method);
  options.max_windows = max_windows;
  options.bos = bos;
  options.pass = decode ? PerplexityPass::kDecode : PerplexityPass::kPrefill;
  options.cached_keys = keys_as_written ? CachedKeys::kAsWritten : CachedKeys::kRelowered;
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
  py::array_t<double> position_nll(static_cast<py::ssize_t>(r.position_nll.size()));
  std::copy(r.position_nll.begin(), r.position_nll.end(), position_nll.mutable_data());
  d["position_nll"] = position_nll;
  return d;
}

// `n` tokens and `more` after them as one length, for planning a method:
// an error naming `name` (in `op`'s messages) when the sum leaves int64.
std::int64_t LengthWith(const char* op, const char* name, std::int64_t n, std::int64_t more) {
  Require(more <= std::numeric_limits<std::int64_t>::max() - n, op, name, more,
          "must be at most 2^63 - 1 - " + std::to_string(n) + " (the prompt's tokens)");
  return n + more;
}

// Bytes as a str, with U+FFFD for what is not UTF-8.
py::str Utf8Replace(const std::string& bytes) {
  return py::reinterpret_steal<py::str>(
      PyUnicode_DecodeUTF8(bytes.data(), static_cast<py::ssize_t>(bytes.size()), "replace"));
}

// Greedy generation, as posenc generate: the method planned for the prompt
// plus max_tokens, prefill then one token at a time through the cache.
py::dict GenerateTokens(const DecoderModel& model, const TokenArray& tokens, std::int64_t max_tokens,
                        const std::string& method, const std::vector<std::int32_t>& stop_tokens) {
  constexpr const char* kGenerate = "generate";
  const auto ids = TokenSpan(tokens);
  Require(max_tokens >= 1, kGenerate, "max_tokens", max_tokens, "must be >= 1");
  const std::int64_t n = static_cast<std::int64_t>(ids.size());
  const std::int64_t length = LengthWith(kGenerate, "max_tokens", n, max_tokens);
  const DecoderHyperparams& hp = model.hparams();
  const ExtensionPlan plan = PlanModelExtension(ParseContextExtension(method), hp, length);
  GenerateOptions options;
  options.max_tokens = max_tokens;
  options.stop_tokens = stop_tokens;
  GenerateResult r;
  {
    py::gil_scoped_release release;
    r = Generate(model, ids, plan.attention, options);
  }
  py::dict d;
  d["tokens"] = r.tokens;
  d["prompt_tokens"] = r.prompt_tokens;
  d["prefill_tokens_per_s"] = r.PrefillTokensPerSecond();
  d["decode_tokens_per_s"] = r.DecodeTokensPerSecond();
  d["prefill_seconds"] = r.prefill_seconds;
  d["decode_seconds"] = r.decode_seconds;
  d["method"] = FormatContextExtension(plan.resolved);
  return d;
}

// One passkey trial. The method is planned for `target_length`, by default
// the longest sequence the trial runs: the prompt plus the longer of the
// answer (teacher forcing) and the generated tokens.
py::dict ScorePasskeyTrial(const DecoderModel& model, const BpeTokenizer& tokenizer, const PasskeyPrompt& prompt,
                           const std::string& method, std::int64_t max_new_tokens,
                           std::optional<std::int64_t> target_length) {
  constexpr const char* kPasskey = "passkey";
  const auto n = static_cast<std::int64_t>(prompt.prompt.size());
  const auto answer = static_cast<std::int64_t>(prompt.answer.size());
  const std::int64_t target =
      target_length.value_or(LengthWith(kPasskey, "max_new_tokens", n, std::max(answer, max_new_tokens)));
  Require(target >= 1, kPasskey, "target_length", target, "must be >= 1 (tokens)");
  const DecoderHyperparams& hp = model.hparams();
  const ExtensionPlan plan = PlanModelExtension(ParseContextExtension(method), hp, target);
  PasskeyScore score;
  {
    py::gil_scoped_release release;
    score = ScorePasskey(model, tokenizer, prompt, plan.attention, max_new_tokens);
  }
  py::dict d;
  d["generated_has_key"] = score.generated_has_key;
  d["answer_exact"] = score.answer_exact;
  d["answer_nll"] = score.answer_nll;
  d["generated"] = Utf8Replace(score.generated);
  d["seconds"] = score.seconds;
  d["prompt_tokens"] = n;
  d["method"] = FormatContextExtension(plan.resolved);
  return d;
}

// What `method` is as posenc.attention's keyword arguments: the encoding as
// its Python class (frequencies for target_length, as the plan's), the mask
// and the log-n length. Every method is RoPE-based, so only the three RoPE
// encodings can come out of a plan.
py::dict ExtensionAttention(const std::string& method, const RopeModelConfig& rope, std::int64_t train_length,
                            std::int64_t target_length) {
  Require(target_length >= 1, kOp, "target_length", target_length, "must be >= 1 (tokens)");
  const ExtensionPlan plan =
      PlanContextExtension(ParseContextExtension(method), rope.spec, train_length, target_length);
  const py::module_ classes = py::module_::import("posenc.attention");
  const auto spec_of = [](const RopeSpec& spec) { return py::cast(RopeModelConfig{spec, 0}); };
  py::object encoding;
  if (const auto* e = std::get_if<RopeEncoding>(&plan.attention.encoding)) {
    encoding = classes.attr("RopeEncoding")(spec_of(e->spec), target_length);
  } else if (const auto* e = std::get_if<ReRopeEncoding>(&plan.attention.encoding)) {
    encoding = classes.attr("ReRopeEncoding")(spec_of(e->spec), e->window, e->leak ? py::cast(*e->leak) : py::none(),
                                              target_length);
  } else if (const auto* e = std::get_if<SelfExtendEncoding>(&plan.attention.encoding)) {
    encoding = classes.attr("SelfExtendEncoding")(spec_of(e->spec), e->group, e->window, target_length,
                                                  e->form == SelfExtendForm::kKvShift ? "kv-shift" : "published");
  } else {
    ThrowError(kOp, "method", method, "planned an encoding that is not RoPE-based (no context-extension method does)");
  }
  py::dict kwargs;
  kwargs["encoding"] = encoding;
  kwargs["window"] = plan.attention.mask.window;
  kwargs["sinks"] = plan.attention.mask.sinks;
  kwargs["logn_train_length"] = plan.attention.logn_train_length;
  return kwargs;
}

}  // namespace

void BindModel(py::module_& m) {
  py::class_<DecoderModel>(m, "DecoderModel",
                           "posenc::DecoderModel: a Llama-family decoder from a GGUF file, float32 "
                           "(wrapped by posenc.DecoderModel)")
      .def(py::init([](const std::string& path, const std::string& weights, const std::string& activations) {
             Require(weights == "stored" || weights == "f32", "llama", "weights", weights,
                     "must be \"stored\" (as the file stores them) or \"f32\" (dequantized to float32)");
             Require(activations == "f32" || activations == "int8", "llama", "activations", activations,
                     "must be \"f32\" (as they are) or \"int8\" (rounded for integer dot products)");
             py::gil_scoped_release release;
             return DecoderModel::Load(path, weights == "f32" ? WeightStorage::kFloat32 : WeightStorage::kAsStored,
                                       activations == "int8" ? DotActivations::kInt8 : DotActivations::kFloat32);
           }),
           py::arg("path"), py::arg("weights") = "stored", py::arg("activations") = "f32",
           "Loads and checks a llama GGUF model file; weights kept as stored or as float32; the decode products' "
           "activations as they are or rounded to int8.")
      .def("hparams", &Hyperparams, "The hyperparameters read from the file, as a dict.")
      .def("logits", &Logits, py::arg("tokens"), py::arg("method"), py::arg("target_length"),
           "[n, vocab] float32 logits of one forward pass over int32 `tokens` at positions 0..n-1.")
      .def("next_token_nll", &NextTokenNll, py::arg("tokens"), py::arg("method"), py::arg("target_length"),
           "n - 1 float64 values -log p(tokens[i + 1] | tokens[:i + 1]).")
      .def(
          "forward_flops", [](const DecoderModel& model, std::int64_t n) { return model.ForwardFlops(n); },
          py::arg("n"), "Floating-point operations of one forward pass over n tokens.")
      .def("generate", &GenerateTokens, py::arg("tokens"), py::arg("max_tokens"), py::arg("method"),
           py::arg("stop_tokens"),
           "Greedy generation after int32 `tokens` as a dict (tokens, prompt_tokens, prefill_tokens_per_s, "
           "decode_tokens_per_s, prefill_seconds, decode_seconds, method).")
      .def("score_passkey", &ScorePasskeyTrial, py::arg("tokenizer"), py::arg("prompt"), py::arg("method"),
           py::arg("max_new_tokens"), py::arg("target_length"),
           "posenc::ScorePasskey as a dict (generated_has_key, answer_exact, answer_nll, generated, seconds, "
           "prompt_tokens, method).");

  m.def("perplexity", &Perplexity, py::arg("model"), py::arg("tokens"), py::arg("context"), py::arg("stride"),
        py::arg("method"), py::arg("max_windows"), py::arg("bos"), py::arg("decode"), py::arg("keys_as_written"),
        "posenc::EvaluatePerplexity as a dict (ppl, mean_nll, scored, processed, windows, seconds, "
        "tokens_per_s, method, position_nll).");

  m.def(
      "plan_context_extension",
      [](const std::string& method, const RopeModelConfig& rope, std::int64_t train_length,
         std::int64_t target_length) {
        Require(target_length >= 1, kOp, "target_length", target_length, "must be >= 1 (tokens)");
        return FormatContextExtension(
            PlanContextExtension(ParseContextExtension(method), rope.spec, train_length, target_length).resolved);
      },
      py::arg("method"), py::arg("rope"), py::arg("train_length"), py::arg("target_length"),
      "The text form of `method` with every default filled in for this model and length.");

  m.def("extension_attention", &ExtensionAttention, py::arg("method"), py::arg("rope"), py::arg("train_length"),
        py::arg("target_length"),
        "posenc.attention's keyword arguments (encoding, window, sinks, logn_train_length) that run `method`.");

  m.def("extension_methods_synopsis", &ExtensionMethodsSynopsis,
        "The context-extension methods' text form in one line (posenc::ExtensionMethodsSynopsis).");
  m.def(
      "extension_method_table",
      [] {
        py::list table;
        for (const ExtensionMethodInfo& info : ExtensionMethodTable()) {
          py::list parameters;
          for (const std::string_view key : info.parameters) parameters.append(std::string(key));
          table.append(py::make_tuple(std::string(info.name), py::tuple(parameters), std::string(info.summary)));
        }
        return table;
      },
      "The context-extension methods (posenc::ExtensionMethodTable): (name, parameters, summary) tuples.");

  ValueClass<PasskeyPrompt>(m, "posenc.passkey", "PasskeyPrompt",
                            {Keyword("key"),
                             Shown("prompt", FieldRole::kArgument,
                                   [](const py::object& self) {
                                     return "prompt=<" + std::to_string(py::len(self.attr("prompt"))) + " tokens>";
                                   }),
                             Keyword("answer"), Keyword("key_position"), Keyword("depth")},
                            R"doc(A passkey retrieval prompt (made by :func:`posenc.passkey_prompt`).

Attributes:
    key: the five-digit key, a str.
    prompt: the prompt's token ids (a list; no BOS).
    answer: the token ids of ``" " + key`` as they follow the prompt.
    key_position: the index of the first token of the key line.
    depth: the requested share of the filler before the key line.
)doc")
      .def(py::init([](std::string key, std::vector<std::int32_t> prompt, std::vector<std::int32_t> answer,
                       std::int64_t key_position, double depth) {
             return PasskeyPrompt{std::move(key), std::move(prompt), std::move(answer), key_position, depth};
           }),
           py::arg("key"), py::arg("prompt"), py::arg("answer"), py::arg("key_position"), py::arg("depth"))
      .def_readonly("key", &PasskeyPrompt::key)
      .def_readonly("prompt", &PasskeyPrompt::prompt)
      .def_readonly("answer", &PasskeyPrompt::answer)
      .def_readonly("key_position", &PasskeyPrompt::key_position)
      .def_readonly("depth", &PasskeyPrompt::depth);
  m.def("passkey_key", &PasskeyKey, py::arg("seed"), py::arg("trial"),
        "The five-digit key of trial `trial` from `seed` (posenc::PasskeyKey).");
  m.def(
      "passkey_prompt",
      [](const BpeTokenizer& tokenizer, std::int64_t length, double depth, const std::string& key,
         std::int64_t reserve) {
        py::gil_scoped_release release;
        return MakePasskeyPrompt(tokenizer, length, depth, key, reserve);
      },
      py::arg("tokenizer"), py::arg("length"), py::arg("depth"), py::arg("key"), py::arg("reserve"),
      "posenc::MakePasskeyPrompt.");
}

}  // namespace posenc::python
