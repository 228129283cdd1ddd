// Bindings for RoPE: the spec (built from Hugging Face-style scaling dicts),
// its frequency table, apply_rope on NumPy arrays (fast and reference), the
// Q/K weight permutation and the thread count.
//
// Everything that can be wrong with an argument is reported as posenc::Error
// ("[op] parameter = value: rule"), which pybind11 turns into ValueError. The
// array checks that only the binding can make (ndim, dtype, byte strides,
// writeability) live here and use the same format.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "numpy_views.h"
#include "posenc/error.h"
#include "posenc/parallel.h"
#include "posenc/rope.h"
#include "posenc/rope_config.h"
#include "posenc/rope_frequencies.h"
#include "posenc/rope_permute.h"
#include "rope_scaling_json.h"
#include "posenc/rope_spec.h"

namespace py = pybind11;

namespace posenc::python {
namespace {

constexpr const char* kOp = "rope";
constexpr const char* kLayout = "[batch, seq, heads, head_dim]";

std::string Repr(const py::handle& value) { return py::repr(value).cast<std::string>(); }

// ---- scaling dicts with Hugging Face spellings ------------------------------

// A scaling dict as the JSON value it stands for, so that the library's one
// reader (RopeScalingFromJson) reads it: None, bool, int, float (NaN and
// infinities kept, for the library to reject by name), str, dicts with str
// keys, and lists, tuples or NumPy arrays of those.
nlohmann::json ToJson(const py::handle& value, const std::string& path) {
  if (value.is_none()) return nullptr;
  if (py::isinstance<py::bool_>(value)) return value.cast<bool>();
  if (py::isinstance<py::int_>(value)) {
    try {
      return value.cast<std::int64_t>();
    } catch (const py::cast_error&) {
      ThrowError(kOp, path, Repr(value), "must fit in a signed 64-bit integer");
    }
  }
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

RopeSpec MakeSpec(double theta, std::int64_t head_dim, std::optional<std::int64_t> rotary_dim,
                  std::optional<double> partial_rotary_factor, const std::string& layout,
                  const std::optional<py::dict>& scaling) {
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
  return spec;
}

py::array_t<double> ToArray(const std::vector<double>& values) {
  py::array_t<double> out(static_cast<py::ssize_t>(values.size()));
  std::copy(values.begin(), values.end(), out.mutable_data());
  return out;
}

// ---- arrays -----------------------------------------------------------------

RopeDirection ParseDirection(const std::string& name) {
  if (name == "forward") return RopeDirection::kForward;
  if (name == "backward") return RopeDirection::kBackward;
  if (name == "inverse") return RopeDirection::kInverse;
  ThrowError(kOp, "direction", FormatValue(name), "must be \"forward\", \"backward\" or \"inverse\"");
}

using Int64Array = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>;
using DoubleArray = py::array_t<double, py::array::c_style | py::array::forcecast>;

std::vector<std::int64_t> ToVector(const Int64Array& a) {
  return std::vector<std::int64_t>(a.data(), a.data() + a.size());
}

// outputs[i] receives the rotation of inputs[i] (the same array for in place).
void ApplyRopeArrays(const RopeSpec& spec, const std::vector<py::array>& inputs, const std::vector<py::array>& outputs,
                     std::int64_t offset, const std::optional<Int64Array>& offsets,
                     const std::optional<Int64Array>& position_ids, const std::string& direction,
                     const std::optional<DoubleArray>& inv_freq, double attention_factor, bool reference) {
  Require(!inputs.empty(), kOp, "operands", 0, "give at least one tensor to rotate");
  Require(outputs.size() == inputs.size(), kOp, "outputs", outputs.size(),
          "must be one per input tensor (" + std::to_string(inputs.size()) + ")");
  RopeCall call;
  call.direction = ParseDirection(direction);
  if (position_ids) {
    call.positions = RopePositions::Ids(ToVector(*position_ids));
  } else if (offsets) {
    call.positions = RopePositions::Offsets(ToVector(*offsets));
  } else {
    call.positions = RopePositions::Offset(offset);
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::string name = "operands[" + std::to_string(i) + "]";
    const TensorView in = ArrayView(inputs[i], kOp, name, kLayout, /*writeable=*/false);
    const TensorView out = ArrayView(outputs[i], kOp, name, kLayout, /*writeable=*/true);
    call.operands.push_back({in, out});
  }
  const ConstTensorView& first = call.operands.front().in;

  RopeFrequencies frequencies;
  if (inv_freq) {
    frequencies.inv_freq.assign(inv_freq->data(), inv_freq->data() + inv_freq->size());
    Require(std::isfinite(attention_factor) && attention_factor > 0, kOp, "attention_factor", attention_factor,
            "must be a finite number > 0");
    frequencies.attention_factor = attention_factor;
  }
  py::gil_scoped_release release;  // the arrays are kept alive by the caller's references
  if (!inv_freq) {
    // The table for this call's length. Invalid positions (a negative offset)
    // are reported by the apply functions' own checks, so clamp here rather
    // than report them as a negative sequence length.
    const std::int64_t length = std::max<std::int64_t>(0, call.positions.Length(first.batch(), first.seq()));
    frequencies = ComputeRopeFrequencies(spec, length);
  }
  if (reference) {
    reference::ApplyRope(spec, frequencies, call);
  } else {
    ApplyRope(spec, frequencies, call);
  }
}

void PermuteRows(const py::array& weight, std::int64_t heads, std::int64_t head_dim, std::int64_t rotary_dim,
                 const std::string& to) {
  constexpr const char* kPermute = "permute";
  Require(weight.ndim() >= 1, kPermute, "w.ndim", weight.ndim(), "must be >= 1 (rows [heads * head_dim, ...])");
  Require(weight.shape(0) == heads * head_dim, kPermute, "w.shape[0]", weight.shape(0),
          "must equal heads * head_dim = " + std::to_string(heads) + " * " + std::to_string(head_dim));
  if ((weight.flags() & py::array::c_style) == 0 || !weight.writeable()) {
    ThrowError(kPermute, "w", "read-only or not C-contiguous",
               "must be a writeable C-contiguous array (posenc.permute_qk_weights passes a copy)");
  }
  PermuteDirection direction;
  if (to == "half-split") {
    direction = PermuteDirection::kInterleavedToHalfSplit;
  } else if (to == "interleaved") {
    direction = PermuteDirection::kHalfSplitToInterleaved;
  } else {
    ThrowError(kPermute, "to", FormatValue(to), "must be \"half-split\" or \"interleaved\"");
  }
  std::size_t row_bytes = static_cast<std::size_t>(weight.itemsize());
  for (py::ssize_t axis = 1; axis < weight.ndim(); ++axis) row_bytes *= static_cast<std::size_t>(weight.shape(axis));
  void* data = const_cast<void*>(weight.data());
  py::gil_scoped_release release;
  PermuteQkRows(data, row_bytes, heads, head_dim, rotary_dim == 0 ? head_dim : rotary_dim, direction);
}

}  // namespace

void BindRope(py::module_& m) {
  py::class_<RopeSpec>(m, "RopeSpec", "posenc::RopeSpec (wrapped by posenc.RopeSpec)")
      .def(py::init(&MakeSpec), py::arg("theta"), py::arg("head_dim"), py::arg("rotary_dim"),
           py::arg("partial_rotary_factor"), py::arg("layout"), py::arg("scaling"))
      .def_readonly("theta", &RopeSpec::theta)
      .def_readonly("head_dim", &RopeSpec::head_dim)
      .def_property_readonly("rotary_dim", &RopeSpec::RotaryDim)
      .def_property_readonly("pairs", &RopeSpec::Pairs)
      .def_property_readonly("layout", [](const RopeSpec& s) { return std::string(RopeLayoutName(s.layout)); })
      .def_property_readonly("scaling_type", [](const RopeSpec& s) { return std::string(RopeScalingName(s.scaling)); })
      .def_property_readonly("scaling", [](const RopeSpec& s) { return ScalingToDict(s.scaling); })
      .def_property_readonly("original_context_length", &OriginalContextLength)
      .def(
          "frequencies",
          [](const RopeSpec& s, std::int64_t seq_len) {
            const RopeFrequencies f = ComputeRopeFrequencies(s, seq_len);
            return py::make_tuple(ToArray(f.inv_freq), f.attention_factor);
          },
          py::arg("seq_len"))
      .def("yarn_extrapolation_weights", [](const RopeSpec& s) { return ToArray(YarnExtrapolationWeights(s)); })
      .def(
          "to_hf_config",
          [](const RopeSpec& s, std::int64_t max_position_embeddings) {
            return RopeToHfConfig(RopeModelConfig{s, max_position_embeddings});
          },
          py::arg("max_position_embeddings"));

  m.def(
      "rope_from_hf_config",
      [](const std::string& json) {
        RopeModelConfig config = RopeFromHfConfig(json);
        return py::make_tuple(config.spec, config.max_position_embeddings);
      },
      py::arg("config_json"), "(RopeSpec, max_position_embeddings) from a config.json text");

  m.def("apply_rope", &ApplyRopeArrays, py::arg("spec"), py::arg("inputs"), py::arg("outputs"), py::arg("offset"),
        py::arg("offsets"), py::arg("position_ids"), py::arg("direction"), py::arg("inv_freq"),
        py::arg("attention_factor"), py::arg("reference"),
        "Rotates inputs[i] into outputs[i] (arrays [batch, seq, heads, head_dim]).");

  m.def("permute_qk_rows", &PermuteRows, py::arg("w"), py::arg("heads"), py::arg("head_dim"), py::arg("rotary_dim"),
        py::arg("to"), "Permutes the rows of a C-contiguous weight in place.");

  // int64 here so that any count posenc.set_num_threads lets through gets a
  // library message, not a failed conversion to int: beyond int, SetNumThreads'
  // own rules (at least 1, at most kMaxThreads) are reported here.
  m.def(
      "set_num_threads",
      [](std::int64_t n) {
        Require(n >= std::numeric_limits<int>::min(), "threads", "n", n, "must be at least 1");
        Require(n <= std::numeric_limits<int>::max(), "threads", "n", n,
                "must be at most " + std::to_string(kMaxThreads) + " (far more than any machine's cores)");
        SetNumThreads(static_cast<int>(n));
      },
      py::arg("n"));
  m.def("num_threads", &NumThreads);
}

}  // namespace posenc::python
