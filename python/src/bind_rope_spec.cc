// posenc.RopeSpec, bound as posenc::RopeModelConfig: the library's RopeSpec
// and the max_position_embeddings of the config it was read from (0 if none).
// Built from Hugging Face-style scaling dicts or read from a config; a value
// class (value_class.h) exported by python/posenc/rope.py.
//
// Every rule about a spec is the library's (RopeSpec::Validate and the
// scaling reader), reported as posenc::Error ("[rope] parameter = value:
// rule"), which reaches Python as ValueError.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "args.h"
#include "bindings.h"
#include "posenc/error.h"
#include "posenc/rope_config.h"
#include "posenc/rope_frequencies.h"
#include "posenc/rope_spec.h"
#include "encodings/rope_scaling_json.h"
#include "value_class.h"

namespace py = pybind11;
using namespace pybind11::literals;

namespace posenc::python {
namespace {

constexpr const char* kOp = "rope";

// ---- scaling dicts with Hugging Face spellings ------------------------------

// A scaling dict as the JSON value it stands for, so that the library's one
// reader (RopeScalingFromJson) reads it: None, bool, int, float (NaN and
// infinities kept, for the library to reject by name), str, dicts with str
// keys, and lists, tuples or NumPy arrays of those.
nlohmann::json ToJson(const py::handle& value, const std::string& path) {
  if (value.is_none()) return nullptr;
  if (py::isinstance<py::bool_>(value)) return value.cast<bool>();
  if (py::isinstance<py::int_>(value)) return ToInt(kOp, path, value);
  if (py::isinstance<py::float_>(value)) return value.cast<double>();
  if (py::isinstance<py::str>(value)) return value.cast<std::string>();
  if (py::isinstance<py::dict>(value)) {
    nlohmann::json object = nlohmann::json::object();
    for (const auto& [key, item] : value.cast<py::dict>()) {
      if (!py::isinstance<py::str>(key)) ThrowError(kOp, path, Repr(key), "keys must be strings");
      const auto name = key.cast<std::string>();
      object[name] = ToJson(item, path + "." + name);
    }
    return object;
  }
  if (py::isinstance<py::array>(value)) return ToJson(value.attr("tolist")(), path);
  if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
    nlohmann::json list = nlohmann::json::array();
    for (const py::handle item : value) list.push_back(ToJson(item, path));
    return list;
  }
  if (py::hasattr(value, "item") && py::hasattr(value, "dtype"))
    return ToJson(value.attr("item")(), path);  // NumPy scalar
  ThrowError(kOp, path, Repr(value), "must be a number, a string, a list of numbers or None");
}

RopeScaling ScalingFromDict(const py::dict& dict) {
  return detail::RopeScalingFromJsonValue(ToJson(dict, "scaling"), {}, kOp, "scaling");
}

// The inverse of ScalingFromDict: RopeSpec(scaling=spec.scaling) is the same
// spec. The library's one serialized form (RopeScalingToJson), as a dict.
py::object ScalingToDict(const RopeScaling& scaling) {
  return py::module_::import("json").attr("loads")(RopeScalingToJson(scaling));
}

// RopeSpec(theta, head_dim, rotary_dim, partial_rotary_factor, layout, scaling).
RopeModelConfig MakeSpec(const Float& theta_arg, const Int& head_dim_arg, const std::optional<Int>& rotary_dim_arg,
                         const std::optional<Float>& partial_rotary_factor_arg, const Str& layout_arg,
                         const py::object& scaling_arg) {
  if (!scaling_arg.is_none() && !py::isinstance(scaling_arg, py::module_::import("collections.abc").attr("Mapping"))) {
    ThrowError(kOp, "scaling", Repr(scaling_arg), "must be None or a dict with a rope_type");
  }
  const double theta = ToFloat(kOp, "theta", theta_arg.object);
  const std::int64_t head_dim = ToInt(kOp, "head_dim", head_dim_arg.object);
  const std::optional<std::int64_t> rotary_dim =
      rotary_dim_arg ? std::optional(ToInt(kOp, "rotary_dim", rotary_dim_arg->object)) : std::nullopt;
  const std::optional<double> partial_rotary_factor =
      partial_rotary_factor_arg
          ? std::optional(ToFloat(kOp, "partial_rotary_factor", partial_rotary_factor_arg->object))
          : std::nullopt;
  const auto layout = py::str(layout_arg.object).cast<std::string>();
  const std::optional<py::dict> scaling = scaling_arg.is_none() ? std::nullopt : std::optional(py::dict(scaling_arg));
  RopeSpec spec;
  spec.theta = theta;
  spec.head_dim = head_dim;
  Require(head_dim > 0, kOp, "head_dim", head_dim, "must be > 0");
  if (partial_rotary_factor) {
    const std::int64_t from_factor = RotaryDimFromFactor(head_dim, *partial_rotary_factor);
    Require(!rotary_dim || *rotary_dim == from_factor, kOp, "rotary_dim", rotary_dim.value_or(0),
            "disagrees with partial_rotary_factor (int(head_dim * factor) = " + std::to_string(from_factor) +
                "); give one of them");
    spec.rotary_dim = from_factor;
  } else if (rotary_dim) {
    Require(*rotary_dim > 0, kOp, "rotary_dim", *rotary_dim, "must be > 0 (None means head_dim)");
    spec.rotary_dim = *rotary_dim;
  }
  if (spec.rotary_dim == head_dim) spec.rotary_dim = 0;  // one spelling of "all of head_dim"
  spec.layout = ParseRopeLayout(layout);
  if (scaling) spec.scaling = ScalingFromDict(*scaling);
  spec.Validate();
  return RopeModelConfig{spec, 0};
}

py::array_t<double> ToArray(const std::vector<double>& values) {
  py::array_t<double> out(static_cast<py::ssize_t>(values.size()));
  std::copy(values.begin(), values.end(), out.mutable_data());
  return out;
}

// The config's text for RopeFromHfConfig: a dict (or a transformers config's
// to_dict()) as JSON, or JSON text as given; nullopt for a path.
std::optional<std::string> HfConfigText(py::object config) {
  const py::object mapping = py::module_::import("collections.abc").attr("Mapping");
  if (py::hasattr(config, "to_dict") && !py::isinstance(config, mapping)) config = config.attr("to_dict")();
  if (py::isinstance(config, mapping)) {
    // transformers configs may hold NumPy scalars or torch dtypes: numbers
    // are what matters here, anything else is written as a string.
    const py::cpp_function json_default([](const py::object& value) -> py::object {
      if (py::isinstance(value, py::module_::import("numpy").attr("generic"))) return value.attr("item")();
      return py::str(value);
    });
    return py::module_::import("json").attr("dumps")(py::dict(config), "default"_a = json_default).cast<std::string>();
  }
  const py::object path_like = py::module_::import("os").attr("PathLike");
  if (!py::isinstance<py::str>(config) && !py::isinstance(config, path_like)) {
    ThrowError("hf-config", "config", TypeName(config), "must be a dict, JSON text, a path or a transformers config");
  }
  if (py::isinstance<py::str>(config) && py::str(config).attr("lstrip")().attr("startswith")("{").cast<bool>()) {
    return config.cast<std::string>();
  }
  return std::nullopt;
}

RopeModelConfig FromHfConfig(const py::object& config) {
  if (const std::optional<std::string> text = HfConfigText(config)) return RopeFromHfConfig(*text);
  const py::object path = py::module_::import("os").attr("fspath")(config);
  if (!py::module_::import("os.path").attr("isfile")(path).cast<bool>()) {
    ThrowError("hf-config", "config", Repr(path), "neither a JSON object nor an existing file");
  }
  const py::object text = py::module_::import("pathlib").attr("Path")(path).attr("read_text")("encoding"_a = "utf-8");
  return RopeFromHfConfig(text.cast<std::string>());
}

constexpr const char* kRopeSpecDoc = R"doc(How a model rotates its queries and keys: base, rotary dimension, pair
layout and frequency scaling method.

Args:
    theta: the base (``rope_theta``), > 1.
    head_dim: dimensions per attention head.
    rotary_dim: how many leading dimensions of each head rotate (even);
        the rest pass through unchanged. ``None`` means all of ``head_dim``.
    partial_rotary_factor: alternative to ``rotary_dim`` in Hugging Face's
        spelling: ``rotary_dim = int(head_dim * partial_rotary_factor)``.
    layout: ``"half-split"`` (GPT-NeoX, Hugging Face Llama/Qwen2: pair k is
        ``(k, k + rotary_dim/2)``) or ``"interleaved"`` (GPT-J, RoFormer,
        Meta's Llama checkpoints: pair k is ``(2k, 2k+1)``).
    scaling: ``None`` or a dict in Hugging Face's ``rope_scaling`` spelling,
        with ``"rope_type"`` (or ``"type"``) one of:

        * ``"linear"``: ``factor``
        * ``"ntk"``: ``alpha`` (static NTK-aware base change)
        * ``"dynamic"``: ``factor``, ``original_max_position_embeddings``
        * ``"yarn"``: ``factor``, ``original_max_position_embeddings``,
          optional ``beta_fast`` (32), ``beta_slow`` (1), ``mscale``,
          ``mscale_all_dim`` (DeepSeek-V2), ``attention_factor`` (overrides),
          ``truncate`` (True), ``ext_factor`` (1), ``attn_factor`` (1)
        * ``"llama3"``: ``factor``, ``low_freq_factor``, ``high_freq_factor``,
          ``original_max_position_embeddings``
        * ``"longrope"``: ``short_factor``, ``long_factor`` (lists of
          ``rotary_dim/2``), ``original_max_position_embeddings``, optional
          ``factor`` and ``attention_factor``
        * ``"factors"``: ``factors`` (per-pair divisors, GGUF ``rope_freqs``)

        Unknown keys and rope types raise ValueError.

Raises:
    ValueError: naming the parameter, its value and the rule it breaks,
        e.g. ``[rope] rotary_dim = 63: must be even (dimensions rotate in pairs)``.

Example::

    >>> spec = posenc.RopeSpec(theta=1e6, head_dim=128, scaling={
    ...     "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768})
    >>> inv_freq, attention_factor = spec.frequencies()
    >>> round(attention_factor, 4)
    1.1386
)doc";

constexpr const char* kFromHfConfigDoc = R"doc(Reads the RoPE of a Hugging Face model configuration.

``config`` is a dict, a JSON string, a path to a ``config.json`` file, or
a ``transformers.PretrainedConfig`` (anything with ``to_dict()``). Reads
``rope_theta`` (or GPT-NeoX's ``rotary_emb_base``), ``head_dim`` (or
``hidden_size / num_attention_heads``), ``partial_rotary_factor`` (or
``rotary_pct``, or GPT-J's ``rotary_dim``) and ``rope_scaling`` /
``rope_parameters`` with ``type`` or ``rope_type``. GPT-J models get the
interleaved layout, all others half-split, as Hugging Face applies them.

Example::

    >>> spec = posenc.RopeSpec.from_hf_config({
    ...     "hidden_size": 4096, "num_attention_heads": 32, "rope_theta": 500000.0,
    ...     "max_position_embeddings": 131072,
    ...     "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
    ...                      "high_freq_factor": 4.0,
    ...                      "original_max_position_embeddings": 8192}})
    >>> spec.scaling_type, spec.head_dim
    ('llama3', 128)
)doc";

constexpr const char* kFrequenciesDoc = R"doc(The frequency table for a sequence of ``seq_len`` tokens.

Returns ``(inv_freq, attention_factor)``: ``inv_freq`` is a float64 array
of ``rotary_dim / 2`` (the angle of pair k at position p is
``p * inv_freq[k]``); ``attention_factor`` multiplies the rotated q and k
(YaRN, LongRoPE; 1.0 otherwise). ``seq_len`` matters only for dynamic NTK
and LongRoPE; 0 means "within the original context".
)doc";

// "rotary_dim=24" in repr only for partial rotary.
std::optional<std::string> RotaryDimShown(const py::object& self) {
  const RopeSpec& spec = self.cast<const RopeModelConfig&>().spec;
  if (spec.RotaryDim() == spec.head_dim) return std::nullopt;
  return "rotary_dim=" + std::to_string(spec.RotaryDim());
}

}  // namespace

void BindRopeSpec(py::module_& m) {
  ValueClass<RopeModelConfig>(
      m, "posenc.rope", "RopeSpec",
      {Keyword("theta"), Keyword("head_dim"), Shown("rotary_dim", FieldRole::kArgument, RotaryDimShown),
       Keyword("layout"), KeywordUnlessNone("scaling"), Hidden("max_position_embeddings", FieldRole::kAttribute)},
      kRopeSpecDoc)
      .def(py::init(&MakeSpec), py::arg("theta") = 10000.0, py::arg("head_dim") = 0, py::arg("rotary_dim") = py::none(),
           py::arg("partial_rotary_factor") = py::none(), py::arg("layout") = "half-split",
           py::arg("scaling") = py::none())
      .def_static("from_hf_config", &FromHfConfig, py::arg("config"), kFromHfConfigDoc)
      .def(
          "to_hf_config",
          [](const RopeModelConfig& config, const std::optional<Int>& max_position_embeddings) {
            RopeModelConfig written = config;
            if (max_position_embeddings) {
              written.max_position_embeddings = ToInt(kOp, "max_position_embeddings", max_position_embeddings->object);
            }
            return py::module_::import("json").attr("loads")(RopeToHfConfig(written));
          },
          py::arg("max_position_embeddings") = py::none(),
          "A config.json fragment (dict) that :meth:`from_hf_config` reads back to the same spec.\n"
          "``max_position_embeddings`` defaults to the one read by :meth:`from_hf_config` (omitted if 0).")
      .def_property_readonly(
          "theta", [](const RopeModelConfig& c) { return c.spec.theta; }, "The RoPE base.")
      .def_property_readonly("head_dim", [](const RopeModelConfig& c) { return c.spec.head_dim; })
      .def_property_readonly(
          "rotary_dim", [](const RopeModelConfig& c) { return c.spec.RotaryDim(); },
          "Rotated dimensions per head (== head_dim unless partial rotary).")
      .def_property_readonly("partial_rotary_factor",
                             [](const RopeModelConfig& c) {
                               return static_cast<double>(c.spec.RotaryDim()) / static_cast<double>(c.spec.head_dim);
                             })
      .def_property_readonly(
          "pairs", [](const RopeModelConfig& c) { return c.spec.Pairs(); },
          "rotary_dim / 2: the length of the frequency table.")
      .def_property_readonly(
          "layout", [](const RopeModelConfig& c) { return std::string(RopeLayoutName(c.spec.layout)); },
          "``\"half-split\"`` or ``\"interleaved\"``.")
      .def_property_readonly(
          "scaling_type", [](const RopeModelConfig& c) { return std::string(RopeScalingName(c.spec.scaling)); },
          "``\"none\"``, ``\"linear\"``, ``\"ntk\"``, ``\"dynamic\"``, ``\"yarn\"``, ``\"llama3\"``, "
          "``\"longrope\"`` or ``\"factors\"``.")
      .def_property_readonly(
          "scaling", [](const RopeModelConfig& c) { return ScalingToDict(c.spec.scaling); },
          "The scaling method as a dict (``RopeSpec(..., scaling=spec.scaling)`` gives the same spec), or None.")
      .def_property_readonly(
          "original_context_length", [](const RopeModelConfig& c) { return OriginalContextLength(c.spec); },
          "The training context length the scaling refers to (0 if none).")
      .def_readwrite("max_position_embeddings", &RopeModelConfig::max_position_embeddings,
                     "max_position_embeddings of the config this spec was read from (0 if none).")
      .def_property_readonly(
          "effective_context_length", [](const RopeModelConfig& c) { return EffectiveContextLength(c.spec); },
          "The length the scaled model stands for: original x factor for llama3, yarn and longrope (0 "
          "otherwise); extensions on top of the scaling count from it.")
      .def_property_readonly(
          "mrope_section", [](const RopeModelConfig& c) { return c.mrope_section; },
          "Qwen2-VL's multimodal RoPE sections [temporal, height, width] in pairs (posenc.rope.apply_mrope); "
          "[] for one position per token.")
      .def_property_readonly(
          "softmax_scale", [](const RopeModelConfig& c) { return c.softmax_scale; },
          "The scale of q.k the config sets (DeepSeek-V2/V3: (qk_nope_head_dim + qk_rope_head_dim)^-1/2 "
          "times mscale^2), or None for 1/sqrt(head_dim).")
      .def_property_readonly(
          "layer_positions",
          [](const RopeModelConfig& c) {
            std::vector<std::string> kinds;
            for (const LayerPosition p : c.layer_positions)
              kinds.emplace_back(p == LayerPosition::kRope ? "rope" : "nope");
            return kinds;
          },
          "Per layer \"rope\" or \"nope\" (Llama 4's and SmolLM3's no_rope_layers); [] for every layer RoPE.")
      .def(
          "frequencies",
          [](const RopeModelConfig& c, const Int& seq_len) {
            const RopeFrequencies f = ComputeRopeFrequencies(c.spec, ToInt(kOp, "seq_len", seq_len.object));
            return py::make_tuple(ToArray(f.inv_freq), f.attention_factor);
          },
          py::arg("seq_len") = 0, kFrequenciesDoc)
      .def(
          "yarn_extrapolation_weights",
          [](const RopeModelConfig& c) { return ToArray(YarnExtrapolationWeights(c.spec)); },
          "YaRN only: per pair, the weight of the unscaled frequency (1 for fast dimensions, 0 for fully "
          "interpolated ones); empty for other methods.");
}

}  // namespace posenc::python
