// Bindings for RoPE: apply_rope on NumPy arrays (fast and reference), the
// Q/K weight permutation and the thread count (the spec is
// bind_rope_spec.cc). apply_rope is bound with its Python signature
// (keyword-only after the tensors) and docstring; python/posenc/rope.py and
// reference.py re-export it, and wrap the rest.
//
// Everything that can be wrong with an argument is reported as posenc::Error
// ("[op] parameter = value: rule"), which pybind11 turns into ValueError. The
// array checks that only the binding can make (ndim, dtype, byte strides,
// writeability) live here and use the same format.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/typing.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "args.h"
#include "bindings.h"
#include "numpy_views.h"
#include "posenc/error.h"
#include "posenc/input_file.h"
#include "posenc/mrope.h"
#include "posenc/parallel.h"
#include "posenc/rope.h"
#include "posenc/rope_config.h"
#include "posenc/rope_frequencies.h"
#include "posenc/rope_permute.h"
#include "posenc/rope_spec.h"

namespace py = pybind11;

namespace posenc::python {
namespace {

constexpr const char* kOp = "rope";
constexpr const char* kLayout = "[batch, seq, heads, head_dim]";

// ---- apply_rope -------------------------------------------------------------

struct FrequenciesName {
  static constexpr auto text = py::detail::const_name("tuple[numpy.ndarray, float]");
};
using Rotated = py::typing::Union<py::array, py::typing::Tuple<py::array, py::ellipsis>>;

constexpr const char* kPositionsRule = "must be an integer type (positions are token indices)";

RopeDirection DirectionOf(const Str& direction) {
  const py::object& name = direction.object;
  if (py::isinstance<py::str>(name)) {
    const auto text = name.cast<std::string>();
    if (text == "forward") return RopeDirection::kForward;
    if (text == "backward") return RopeDirection::kBackward;
    if (text == "inverse") return RopeDirection::kInverse;
  }
  ThrowError(kOp, "direction", Repr(name), "must be \"forward\", \"backward\" or \"inverse\"");
}

std::vector<std::int64_t> ToVector(const Int64Array& a) {
  return std::vector<std::int64_t>(a.data(), a.data() + a.size());
}

// The positions from apply_rope's three spellings (at most one; offset 0 is
// the default). (batch, seq) of the first operand shape position_ids: (seq,)
// and (1, seq) are broadcast to every row. Position values are the library's
// to check.
RopePositions PositionsOf(const Int& offset_arg, const std::optional<ArrayLike>& offsets_arg,
                          const std::optional<ArrayLike>& ids_arg, const py::array& first) {
  const std::int64_t offset = ToInt(kOp, "offset", offset_arg.object);
  std::vector<std::string> given;
  if (offset != 0) given.push_back("offset");
  if (offsets_arg) given.push_back("offsets");
  if (ids_arg) given.push_back("position_ids");
  if (given.size() > 1) {
    ThrowError(kOp, given[1], "given", "give only one of offset, offsets and position_ids (also got " + given[0] + ")");
  }
  const std::int64_t batch = first.ndim() == 4 ? first.shape(0) : 1, seq = first.ndim() == 4 ? first.shape(1) : -1;
  if (offsets_arg) {
    const Int64Array offsets = ToInt64Array(kOp, "offsets", offsets_arg->object, kPositionsRule);
    Require(offsets.ndim() == 1, kOp, "offsets.shape", Verbatim{ShapeOf(offsets)},
            "must be (batch,) = (" + std::to_string(batch) + ",): one start per sequence");
    return RopePositions::Offsets(ToVector(offsets));
  }
  if (!ids_arg) return RopePositions::Offset(offset);
  const Int64Array ids = ToInt64Array(kOp, "position_ids", ids_arg->object, kPositionsRule);
  if (seq < 0) return RopePositions::Ids(ToVector(ids));  // operands[0] is not 4-D: its view says so
  const bool one_row = ids.ndim() == 1 || (ids.ndim() == 2 && ids.shape(0) == 1);
  if (ids.ndim() < 1 || ids.ndim() > 2 || ids.shape(ids.ndim() - 1) != seq || !(one_row || ids.shape(0) == batch)) {
    ThrowError(
        kOp, "position_ids.shape", ids.ndim() == 1 ? "(1, " + std::to_string(ids.shape(0)) + ")" : ShapeOf(ids),
        "must be (batch, seq) = (" + std::to_string(batch) + ", " + std::to_string(seq) + "), (1, seq) or (seq,)");
  }
  std::vector<std::int64_t> all(
      BufferElements(kOp, "position_ids", seq, "the [batch, seq] positions", {batch, seq}, sizeof(std::int64_t)));
  for (std::int64_t b = 0; b < batch; ++b) std::copy_n(ids.data() + (one_row ? 0 : b * seq), seq, all.data() + b * seq);
  return RopePositions::Ids(std::move(all));
}

// frequencies=(inv_freq, attention_factor), as RopeSpec.frequencies() returns them.
RopeFrequencies FrequenciesOf(const py::object& given, const RopeSpec& spec) {
  py::tuple pair;
  try {
    pair = py::tuple(given);
  } catch (py::error_already_set& e) {
    if (!e.matches(PyExc_TypeError)) throw;
  }
  if (!pair || pair.size() != 2) {
    ThrowError(kOp, "frequencies", TypeName(given),
               "must be (inv_freq, attention_factor) as spec.frequencies() returns");
  }
  const DoubleArray inv_freq{py::object(pair[0])};
  const double attention_factor = py::float_(pair[1]);
  // np.ascontiguousarray makes a scalar (inv_freq,): only more axes are wrong here.
  Require(inv_freq.ndim() <= 1, kOp, "frequencies[0].shape", Verbatim{ShapeOf(inv_freq)},
          "must be (rotary_dim / 2,) = (" + std::to_string(spec.Pairs()) + ",)");
  Require(std::isfinite(attention_factor) && attention_factor > 0, kOp, "attention_factor", attention_factor,
          "must be a finite number > 0");
  return RopeFrequencies{{inv_freq.data(), inv_freq.data() + inv_freq.size()}, attention_factor};
}

// Rotates each tensor into a new array (or in place); the arguments are
// converted in the order of the signature.
template <bool kReference>
Rotated ApplyRopeArrays(const SpecArg& spec_arg, const py::args& tensors, const Int& offset,
                        const std::optional<ArrayLike>& offsets, const std::optional<ArrayLike>& position_ids,
                        const Str& direction, bool inplace, const std::optional<Arg<FrequenciesName>>& frequencies) {
  const RopeSpec spec = ToRopeSpec(kOp, spec_arg.object);
  if (tensors.empty()) ThrowError(kOp, "operands", "()", "give at least one [batch, seq, heads, head_dim] array");
  RopeCall call;
  call.direction = DirectionOf(direction);
  std::vector<py::array> inputs, outputs;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    if (inplace && !py::isinstance<py::array>(tensors[i])) {
      ThrowError(kOp, "operands[" + std::to_string(i) + "]", TypeName(tensors[i]), "inplace=True needs NumPy arrays");
    }
    inputs.push_back(python::ToArray(tensors[i]));
  }
  call.positions = PositionsOf(offset, offsets, position_ids, inputs.front());
  const std::optional<RopeFrequencies> given_frequencies =
      frequencies ? std::optional(FrequenciesOf(frequencies->object, spec)) : std::nullopt;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const py::array& in = inputs[i];
    outputs.push_back(inplace ? in
                              : py::array(in.dtype(), std::vector<py::ssize_t>(in.shape(), in.shape() + in.ndim())));
    const std::string name = "operands[" + std::to_string(i) + "]";
    call.operands.push_back({ArrayView(in, kOp, name, kLayout, /*writeable=*/false),
                             ArrayView(outputs[i], kOp, name, kLayout, /*writeable=*/true)});
  }
  {
    const ConstTensorView& first = call.operands.front().in;
    py::gil_scoped_release release;  // the arrays are kept alive by inputs and outputs
    // Without given frequencies, the table for this call's length. Invalid
    // positions (a negative offset) are reported by the apply functions' own
    // checks, so clamp here rather than report them as a negative length.
    const RopeFrequencies table =
        given_frequencies ? *given_frequencies
                          : ComputeRopeFrequencies(
                                spec, std::max<std::int64_t>(0, call.positions.Length(first.batch(), first.seq())));
    if constexpr (kReference) {
      reference::ApplyRope(spec, table, call);
    } else {
      ApplyRope(spec, table, call);
    }
  }
  return py::reinterpret_borrow<Rotated>(outputs.size() == 1 ? py::object(outputs.front())
                                                             : py::tuple(py::cast(outputs)));
}

constexpr const char* kApplyRopeDoc = R"doc(Rotates q, k (and any further tensors) by their token positions.

Args:
    spec: the :class:`RopeSpec`.
    *tensors: ``[batch, seq, heads, head_dim]`` arrays of one dtype
        (float32, float16 or ``ml_dtypes.bfloat16``) with the same batch and
        seq; head counts may differ (GQA: 8 query heads, 2 key heads). Any
        strides, but the last axis must be contiguous.
    offset: token s of every sequence is at position ``offset + s``.
    offsets: one start per sequence: token s of row b is at ``offsets[b] + s``
        (batched decode with ragged caches).
    position_ids: explicit positions, shape ``(batch, seq)``, ``(1, seq)`` or
        ``(seq,)`` (packed sequences, left padding, speculative decoding).
        Give at most one of offset, offsets and position_ids.
    direction: ``"forward"`` (y = a R(p) x), ``"backward"`` (the gradient,
        a R(p)^T dy) or ``"inverse"`` (undoes forward), with a the attention
        factor.
    inplace: overwrite the input arrays instead of returning new ones (they
        must be writeable, must share no element with one another, and no
        two elements of one may share memory, as in a broadcast view).
    frequencies: ``(inv_freq, attention_factor)`` from :meth:`RopeSpec.frequencies`
        to reuse; by default they are computed for this call's length
        (largest position + 1), which is what dynamic NTK and LongRoPE need.

Returns:
    The rotated array, or a tuple of them (one per input). With
    ``inplace=True`` these are the input arrays themselves.

Raises:
    ValueError: naming the tensor by position, e.g.
        ``[rope] operands[1].batch = 3: must equal operands[0].batch = 2``.

Example::

    >>> spec = posenc.RopeSpec(head_dim=64)
    >>> q = np.ones((2, 4, 8, 64), np.float32); k = np.ones((2, 4, 2, 64), np.float32)
    >>> q_rot, k_rot = posenc.apply_rope(spec, q, k, offsets=[0, 17])
    >>> back = posenc.apply_rope(spec, q_rot, offsets=[0, 17], direction="inverse", layout="bshd")
    >>> bool(np.allclose(back, q, atol=1e-5))
    True
)doc";

// apply_mrope(spec, *tensors, positions): Qwen2-VL's multimodal RoPE with
// the spec's mrope_section; positions (3, seq) or (3, batch, seq): temporal,
// height, width per token.
template <bool kReference>
Rotated ApplyMropeArrays(const py::object& spec_object, const py::args& tensors, const ArrayLike& positions_arg) {
  if (!py::isinstance<RopeModelConfig>(spec_object)) {
    ThrowError(kOp, "spec", TypeName(spec_object), "must be a posenc.RopeSpec");
  }
  const RopeModelConfig config = spec_object.cast<const RopeModelConfig&>();
  Require(!config.mrope_section.empty(), kOp, "spec.mrope_section", Verbatim{"[]"},
          "must be set (a config whose rope_scaling is {\"type\": \"mrope\", \"mrope_section\": [t, h, w]})");
  if (tensors.empty()) ThrowError(kOp, "operands", "()", "give at least one [batch, seq, heads, head_dim] array");
  std::vector<py::array> inputs, outputs;
  for (const py::handle tensor : tensors) inputs.push_back(python::ToArray(py::reinterpret_borrow<py::object>(tensor)));
  const py::array& first = inputs.front();
  Require(first.ndim() == 4, kOp, "operands[0].ndim", first.ndim(), "must be 4: " + std::string(kLayout));
  const std::int64_t batch = first.shape(0), seq = first.shape(1);
  const Int64Array positions = ToInt64Array(kOp, "positions", positions_arg.object, kPositionsRule);
  const bool one_row = positions.ndim() == 2;
  Require((one_row || positions.ndim() == 3) && positions.shape(0) == 3 &&
              positions.shape(positions.ndim() - 1) == seq && (one_row || positions.shape(1) == batch),
          kOp, "positions.shape", Verbatim{ShapeOf(positions)},
          "must be (3, seq) or (3, batch, seq) = (3, " + std::to_string(batch) + ", " + std::to_string(seq) +
              "): temporal, height and width positions per token");
  MultimodalRopeCall call;
  call.section = config.mrope_section;
  for (std::int64_t axis = 0; axis < 3; ++axis) {
    std::vector<std::int64_t> ids(static_cast<std::size_t>(batch * seq));
    for (std::int64_t b = 0; b < batch; ++b) {
      const std::int64_t* row = positions.data() + (one_row ? axis * seq : (axis * batch + b) * seq);
      std::copy_n(row, seq, ids.data() + b * seq);
    }
    call.positions[static_cast<std::size_t>(axis)] = TokenPositions::Ids(std::move(ids));
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const py::array& in = inputs[i];
    outputs.push_back(py::array(in.dtype(), std::vector<py::ssize_t>(in.shape(), in.shape() + in.ndim())));
    const std::string name = "operands[" + std::to_string(i) + "]";
    call.operands.push_back({ArrayView(in, kOp, name, kLayout, /*writeable=*/false),
                             ArrayView(outputs[i], kOp, name, kLayout, /*writeable=*/true)});
  }
  {
    py::gil_scoped_release release;
    std::int64_t longest = 0;
    for (std::int64_t i = 0; i < positions.size(); ++i) longest = std::max(longest, positions.data()[i] + 1);
    const RopeFrequencies table = ComputeRopeFrequencies(config.spec, longest);
    if constexpr (kReference) {
      reference::ApplyMultimodalRope(config.spec, table, call);
    } else {
      ApplyMultimodalRope(config.spec, table, call);
    }
  }
  return py::reinterpret_borrow<Rotated>(outputs.size() == 1 ? py::object(outputs.front())
                                                             : py::tuple(py::cast(outputs)));
}

constexpr const char* kApplyMropeDoc = R"doc(Qwen2-VL's multimodal RoPE (M-RoPE): rotates q, k (and any further
[batch, seq, heads, head_dim] arrays) with three positions per token.

``spec`` is a :class:`RopeSpec` read from a config whose ``rope_scaling``
is ``{"type": "mrope", "mrope_section": [t, h, w]}``; ``positions`` is
(3, seq) or (3, batch, seq): the temporal, height and width position of
each token. Pair k rotates by the position of the axis whose section holds
it (the first t pairs temporal, the next h height, the last w width), as
transformers' ``apply_multimodal_rotary_pos_emb`` does.
)doc";

constexpr const char* kReferenceApplyRopeDoc = R"doc(:func:`posenc.apply_rope` on the scalar float64 reference kernel
(single-threaded, slow). Same arguments, same results to within one
rounding of the output dtype.
)doc";

// apply_rope(spec, *tensors, offset=0, offsets=None, position_ids=None,
// direction="forward", inplace=False, frequencies=None): keyword-only after
// the tensors.
template <bool kReference>
void DefApplyRope(py::module_& m, const char* module_name, const char* doc) {
  m.def("apply_rope", &ApplyRopeArrays<kReference>, py::arg("spec"), py::arg("offset") = 0,
        py::arg("offsets") = py::none(), py::arg("position_ids") = py::none(), py::arg("direction") = "forward",
        py::arg("inplace") = false, py::arg("frequencies") = py::none(), doc);
  m.attr("apply_rope").attr("__module__") = module_name;
  m.def("apply_mrope", &ApplyMropeArrays<kReference>, py::arg("spec"), py::kw_only(), py::arg("positions"),
        kReference ? "apply_mrope on the float64 reference kernel." : kApplyMropeDoc);
  m.attr("apply_mrope").attr("__module__") = module_name;
}

void PermuteRows(const py::array& weight, std::int64_t heads, std::int64_t head_dim, std::int64_t rotary_dim,
                 const std::string& to) {
  constexpr const char* kPermute = "permute";
  Require(weight.ndim() >= 1, kPermute, "w.ndim", weight.ndim(), "must be >= 1 (rows [heads * head_dim, ...])");
  // Checked: a wrapped heads * head_dim could match a short array.
  Require(weight.shape(0) == CheckedProduct({heads, head_dim}), kPermute, "w.shape[0]", weight.shape(0),
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
  DefApplyRope<false>(m, "posenc.rope", kApplyRopeDoc);
  py::module_ reference = m.def_submodule("reference", "The float64 reference kernels (posenc.reference).");
  DefApplyRope<true>(reference, "posenc.reference", kReferenceApplyRopeDoc);

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
