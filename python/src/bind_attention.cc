// Bindings for attention (posenc/attention.h): posenc.attention and
// posenc.reference.attention (the tiled kernel and the float64 reference) on
// NumPy arrays, and the encoding classes that choose the positional encoding
// (RopeEncoding, ReRopeEncoding, SelfExtendEncoding, AlibiEncoding,
// T5BiasEncoding, ShawEncoding, UrpeEncoding: each the Python class of the
// library struct of the same name, bound by a Py* struct here), with their
// Python signatures and docstrings. python/posenc/attention.py only
// re-exports them under its module docstring.
//
// Arguments are converted here (args.h) and every rule about them is the
// library's (ValidateAttention), so errors are posenc::Error ("[attention]
// parameter = value: rule") and reach Python as ValueError. What only a
// binding can check (types, ndim, dtype, byte strides, the shape of position
// arrays and tables) uses the same format.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "args.h"
#include "bindings.h"
#include "numpy_views.h"
#include "posenc/attention.h"
#include "posenc/error.h"
#include "posenc/input_file.h"
#include "posenc/rope_frequencies.h"
#include "posenc/rope_spec.h"
#include "value_class.h"

namespace py = pybind11;

namespace posenc::python {
namespace {

constexpr const char* kOp = "attention";
constexpr const char* kPositionsRule = "must be an integer type (token positions)";

struct EncodingName {
  static constexpr auto text = py::detail::const_name("posenc.attention.Encoding");
};
using EncodingArg = Arg<EncodingName>;

template <class T>
std::vector<T> ToVector(const py::array_t<T, py::array::c_style | py::array::forcecast>& a) {
  return {a.data(), a.data() + a.size()};
}

// ---- encodings ------------------------------------------------------------------

// The base of the encoding classes: the library's encoding for one call.
// `call_length` is the call's largest position + 1 (the frequency tables of
// dynamic NTK and LongRoPE depend on it).
struct AttentionEncoding {
  virtual ~AttentionEncoding() = default;
  virtual PositionEncoding ForCall(std::int64_t call_length, std::int64_t q_heads) const = 0;
};

std::optional<std::int64_t> SeqLen(const std::optional<Int>& seq_len) {
  if (!seq_len) return std::nullopt;
  const std::int64_t n = ToInt(kOp, "seq_len", seq_len->object);
  Require(n > 0, kOp, "seq_len", n, "must be > 0 (None: the call's largest position + 1)");
  return n;
}

struct PyRopeEncoding : AttentionEncoding {
  PyRopeEncoding(const SpecArg& spec_arg, const std::optional<Int>& seq_len_arg)
      : spec(spec_arg.object), core(ToRopeSpec(kOp, spec)), seq_len(SeqLen(seq_len_arg)) {}
  PositionEncoding ForCall(std::int64_t call_length, std::int64_t) const override {
    return RopeEncoding{core, ComputeRopeFrequencies(core, seq_len.value_or(call_length))};
  }

  py::object spec;  // the posenc.RopeSpec given
  RopeSpec core;
  std::optional<std::int64_t> seq_len;
};

struct PyReRopeEncoding : AttentionEncoding {
  PyReRopeEncoding(const SpecArg& spec_arg, const Int& window_arg, const std::optional<Float>& leak_arg,
                   const std::optional<Int>& seq_len_arg)
      : spec(spec_arg.object), core(ToRopeSpec(kOp, spec)), window(ToInt(kOp, "window", window_arg.object)),
        leak(leak_arg ? std::optional(ToFloat(kOp, "leak", leak_arg->object)) : std::nullopt),
        seq_len(SeqLen(seq_len_arg)) {}
  PositionEncoding ForCall(std::int64_t call_length, std::int64_t) const override {
    return ReRopeEncoding{core, ComputeRopeFrequencies(core, seq_len.value_or(call_length)), window, leak};
  }

  py::object spec;
  RopeSpec core;
  std::int64_t window;
  std::optional<double> leak;  // none: ReRoPE
  std::optional<std::int64_t> seq_len;
};

// Self-Extend's forms by their Python names.
SelfExtendForm ToSelfExtendForm(const py::object& form) {
  if (py::isinstance<py::str>(form)) {
    if (form.cast<std::string>() == "published") return SelfExtendForm::kPublished;
    if (form.cast<std::string>() == "kv-shift") return SelfExtendForm::kKvShift;
  }
  ThrowError(kOp, "form", python::Repr(form), "must be \"published\" or \"kv-shift\"");
}

struct PySelfExtendEncoding : AttentionEncoding {
  PySelfExtendEncoding(const SpecArg& spec_arg, const Int& group_arg, const Int& window_arg,
                       const std::optional<Int>& seq_len_arg, const Str& form_arg)
      : spec(spec_arg.object), core(ToRopeSpec(kOp, spec)), group(ToInt(kOp, "group", group_arg.object)),
        window(ToInt(kOp, "window", window_arg.object)), seq_len(SeqLen(seq_len_arg)),
        form(ToSelfExtendForm(form_arg.object)) {}
  PositionEncoding ForCall(std::int64_t call_length, std::int64_t) const override {
    return SelfExtendEncoding{core, ComputeRopeFrequencies(core, seq_len.value_or(call_length)), group, window, form};
  }
  std::string FormName() const { return form == SelfExtendForm::kKvShift ? "kv-shift" : "published"; }

  py::object spec;
  RopeSpec core;
  std::int64_t group;
  std::int64_t window;
  std::optional<std::int64_t> seq_len;
  SelfExtendForm form;
};

struct PyAlibiEncoding : AttentionEncoding {
  PyAlibiEncoding(const ArrayLike& slopes_arg, const Str& form_arg) {
    const py::object& form = form_arg.object;
    const DoubleArray slopes(slopes_arg.object);
    Require(slopes.ndim() == 1, kOp, "slopes.shape", Verbatim{ShapeOf(slopes)},
            "must be (q_heads,): one slope per query head");
    if (!py::isinstance<py::str>(form) ||
        (form.cast<std::string>() != "distance" && form.cast<std::string>() != "key-position")) {
      ThrowError(kOp, "form", python::Repr(form), "must be \"distance\" or \"key-position\"");
    }
    encoding = AlibiEncoding{ToVector(slopes), ParseAlibiForm(form.cast<std::string>())};
  }
  PositionEncoding ForCall(std::int64_t, std::int64_t) const override { return encoding; }
  py::tuple Slopes() const { return py::tuple(py::cast(encoding.slopes)); }
  std::string Form() const { return std::string(AlibiFormName(encoding.form)); }

  AlibiEncoding encoding;
};

// The buckets of a [num_buckets, q_heads] table (T5's bias, URPE's two
// tables, HF's relative_attention_bias.weight layout) for a call with
// q_heads query heads.
T5BucketSpec TableBuckets(const DoubleArray& table, const std::string& name, std::int64_t max_distance,
                          bool bidirectional, std::int64_t q_heads) {
  Require(table.shape(1) == q_heads, kOp, name + ".shape[1]", table.shape(1),
          "must equal q_heads = " + std::to_string(q_heads) + " (tables are [num_buckets, q_heads])");
  return {table.shape(0), max_distance, bidirectional ? T5Direction::kBidirectional : T5Direction::kCausal};
}

struct PyT5BiasEncoding : AttentionEncoding {
  PyT5BiasEncoding(const ArrayLike& weights_arg, const Int& max_distance_arg, const Bool& bidirectional_arg)
      : weights(ReadOnlyCopy(weights_arg.object)) {
    Require(weights.ndim() == 2, kOp, "weights.shape", Verbatim{ShapeOf(weights)}, "must be (num_buckets, q_heads)");
    bidirectional = ToBool(kOp, "bidirectional", bidirectional_arg.object);
    max_distance = ToInt(kOp, "max_distance", max_distance_arg.object);
  }
  PositionEncoding ForCall(std::int64_t, std::int64_t q_heads) const override {
    return T5BiasEncoding{TableBuckets(weights, "t5.weights", max_distance, bidirectional, q_heads), ToVector(weights)};
  }

  DoubleArray weights;  // [num_buckets, q_heads], read-only
  std::int64_t max_distance = 0;
  bool bidirectional = true;
};

struct PyUrpeEncoding : AttentionEncoding {
  PyUrpeEncoding(const ArrayLike& bias_arg, const ArrayLike& scale_arg, const Int& max_distance_arg,
                 const Bool& bidirectional_arg)
      : bias(ReadOnlyCopy(bias_arg.object)), scale(ReadOnlyCopy(scale_arg.object)) {
    Require(bias.ndim() == 2, kOp, "bias.shape", Verbatim{ShapeOf(bias)}, "must be (num_buckets, q_heads)");
    if (scale.ndim() != 2 || scale.shape(0) != bias.shape(0) || scale.shape(1) != bias.shape(1)) {
      ThrowError(kOp, "scale.shape", ShapeOf(scale), "must equal bias.shape = " + ShapeOf(bias));
    }
    bidirectional = ToBool(kOp, "bidirectional", bidirectional_arg.object);
    max_distance = ToInt(kOp, "max_distance", max_distance_arg.object);
  }
  PositionEncoding ForCall(std::int64_t, std::int64_t q_heads) const override {
    return UrpeEncoding{TableBuckets(bias, "urpe.bias", max_distance, bidirectional, q_heads), ToVector(bias),
                        ToVector(scale)};
  }

  DoubleArray bias;   // B [num_buckets, q_heads], read-only
  DoubleArray scale;  // C, the same shape
  std::int64_t max_distance = 0;
  bool bidirectional = true;
};

struct PyShawEncoding : AttentionEncoding {
  PyShawEncoding(const std::optional<ArrayLike>& rel_k_arg, const std::optional<ArrayLike>& rel_v_arg,
                 const Int& max_distance_arg, bool query_minus_key, bool key_term, bool query_term) {
    spec.max_distance = ToInt(kOp, "max_distance", max_distance_arg.object);
    spec.distance = query_minus_key ? RelativeDistance::kQueryMinusKey : RelativeDistance::kKeyMinusQuery;
    spec.key_term = key_term;
    spec.query_term = query_term;
    spec.value_term = rel_v_arg.has_value();
    rel_k = Table("rel_k", rel_k_arg);
    rel_v = Table("rel_v", rel_v_arg);
    if ((key_term || query_term) && rel_k.is_none())
      ThrowError(kOp, "rel_k", "None", "is needed for the key or query term");
  }
  // A table [2K+1, dim] as a read-only copy, or None.
  py::object Table(const std::string& name, const std::optional<ArrayLike>& table) const {
    if (!table) return py::none();
    const DoubleArray array = ReadOnlyCopy(table->object);
    const std::int64_t k = spec.max_distance;
    if (array.ndim() != 2 || array.shape(0) % 2 == 0 || (array.shape(0) - 1) / 2 != k) {
      const py::object rows = py::int_(k) * py::int_(2) + py::int_(1);  // 2K+1 without overflow
      ThrowError(kOp, name + ".shape", ShapeOf(array), "must be (2K+1 = " + python::Repr(rows) + ", dim)");
    }
    return array;
  }
  PositionEncoding ForCall(std::int64_t, std::int64_t) const override {
    ShawEncoding e{spec, {}, {}};
    if (!rel_k.is_none()) e.rel_k = ToVector(rel_k.cast<DoubleArray>());
    if (!rel_v.is_none()) e.rel_v = ToVector(rel_v.cast<DoubleArray>());
    return e;
  }

  ShawRelativeSpec spec;
  py::object rel_k, rel_v;  // [2K+1, head_dim] and [2K+1, v_dim], read-only, or None
};

// The encoding argument: None (NoPE), an encoding object, or a RopeSpec as
// shorthand for RopeEncoding(spec). None or an AttentionEncoding comes back.
py::object CheckEncoding(const py::object& encoding) {
  if (encoding.is_none() || py::isinstance<AttentionEncoding>(encoding)) return encoding;
  if (py::isinstance(encoding, py::module_::import("posenc.rope").attr("RopeSpec"))) {
    return py::cast(PyRopeEncoding(SpecArg{encoding}, std::nullopt));
  }
  ThrowError(kOp, "encoding", TypeName(encoding),
             "must be None, a RopeSpec, RopeEncoding, ReRopeEncoding, SelfExtendEncoding, AlibiEncoding, "
             "T5BiasEncoding, ShawEncoding or UrpeEncoding");
}

// ---- positions ----------------------------------------------------------------

// One side's positions ("q" or "k") as given: an offset (an int, or one per
// row) or explicit positions, converted here; checked against the arrays'
// shapes by Positions.
struct SidePositions {
  bool given = false;
  std::int64_t offset = 0;
  std::optional<Int64Array> offsets, ids;
};

SidePositions ConvertSide(const std::string& side, const std::optional<ArrayLike>& offset,
                          const std::optional<ArrayLike>& positions) {
  if (offset && positions) {
    ThrowError(kOp, side + "_positions", "given", "give " + side + "_offset or " + side + "_positions, not both");
  }
  SidePositions out;
  out.given = offset || positions;
  if (positions) {
    out.ids = ToInt64Array(kOp, side + "_positions", positions->object, kPositionsRule);
  } else if (offset && ToArray(offset->object).ndim() == 0) {
    out.offset = ToInt(kOp, side + "_offset", offset->object);
  } else if (offset) {
    out.offsets = ToInt64Array(kOp, side + "_offset", offset->object, kPositionsRule);
    Require(out.offsets->ndim() == 1, kOp, side + "_offset.shape", Verbatim{ShapeOf(*out.offsets)},
            "must be an integer or (batch,): one start per row");
  }
  return out;
}

// The library's positions of one side of `seq` tokens per row:
//   offset     token s of every row at offset + s
//   offsets    token s of row b at offsets[b] + s, shape (batch,)
//   ids        explicit, shape (batch, seq), (1, seq) or (seq,)
TokenPositions Positions(const std::string& side, std::int64_t batch, std::int64_t seq, const SidePositions& given) {
  if (given.ids) {
    const Int64Array& ids = *given.ids;
    const std::string name = side + "_positions";
    const bool shaped = (ids.ndim() == 1 && ids.shape(0) == seq) ||
                        (ids.ndim() == 2 && ids.shape(1) == seq && (ids.shape(0) == 1 || ids.shape(0) == batch));
    if (!shaped) {
      ThrowError(kOp, name + ".shape", ShapeOf(ids),
                 "must be (batch, " + side + "_len) = (" + std::to_string(batch) + ", " + std::to_string(seq) +
                     "), (1, " + side + "_len) or (" + side + "_len,)");
    }
    const py::ssize_t rows = ids.ndim() == 1 ? 1 : ids.shape(0);
    std::vector<std::int64_t> all(
        BufferElements(kOp, name, seq, "the [batch, seq] positions", {batch, seq}, sizeof(std::int64_t)));
    for (std::int64_t b = 0; b < batch; ++b) {
      for (std::int64_t s = 0; s < seq; ++s) {
        const std::int64_t value = ids.data()[(rows == 1 ? 0 : b) * seq + s];
        Require(value >= 0, kOp, name + "[" + std::to_string(b) + ", " + std::to_string(s) + "]", value,
                "must not be negative");
        all[static_cast<std::size_t>(b * seq + s)] = value;
      }
    }
    return TokenPositions::Ids(std::move(all));
  }
  const std::string name = side + "_offset";
  if (given.offsets) {
    const Int64Array& offsets = *given.offsets;
    Require(offsets.shape(0) == batch, kOp, name + ".size", offsets.size(),
            "must equal batch = " + std::to_string(batch) + " (one start per sequence)");
    for (std::int64_t b = 0; b < batch; ++b) {
      Require(offsets.data()[b] >= 0, kOp, name + "[" + std::to_string(b) + "]", offsets.data()[b],
              "must not be negative");
    }
    return TokenPositions::Offsets(ToVector(offsets));
  }
  Require(given.offset >= 0, kOp, name, given.offset, "must not be negative");
  return TokenPositions::Offset(given.offset);
}

// ---- the call -------------------------------------------------------------------

// What a call runs after converting and checking its arguments.
enum class Run {
  kKernel,     // posenc.attention: the tiled kernel
  kReference,  // posenc.reference.attention: the float64 reference
  kCheck,      // posenc.torch's torch path: the library's checks only (the
               // arrays may be zero-stride proxies of tensors on another device)
};

template <Run kRun>
py::object AttentionArrays(const ArrayLike& q_arg, const ArrayLike& k_arg, const ArrayLike& v_arg,
                           const EncodingArg& encoding_arg, const Bool& causal, const Int& window, const Int& sinks,
                           const std::optional<Float>& softmax_scale, const Int& logn_train_length,
                           const std::optional<ArrayLike>& sink_logits, const Float& softcap,
                           const std::optional<ArrayLike>& q_offset, const std::optional<ArrayLike>& q_positions,
                           const std::optional<ArrayLike>& k_offset, const std::optional<ArrayLike>& k_positions,
                           const std::optional<ArrayLike>& kv_lengths) {
  // The arguments, converted in the order of the signature.
  const py::object encoding = CheckEncoding(encoding_arg.object);
  AttentionOptions options;
  options.mask.causal = ToBool(kOp, "causal", causal.object);
  const SidePositions q_side = ConvertSide("q", q_offset, q_positions);
  const SidePositions k_side = ConvertSide("k", k_offset, k_positions);
  AttentionInputs in;
  if (kv_lengths) {
    const Int64Array lengths = ToInt64Array(kOp, "kv_lengths", kv_lengths->object, kPositionsRule);
    Require(lengths.ndim() == 1, kOp, "kv_lengths.ndim", lengths.ndim(), "must be 1 ((batch,))");
    in.kv_lengths = ToVector(lengths);
  }
  if (softmax_scale) options.softmax_scale = ToFloat(kOp, "softmax_scale", softmax_scale->object);
  options.mask.window = ToInt(kOp, "window", window.object);
  options.mask.sinks = ToInt(kOp, "sinks", sinks.object);
  options.logn_train_length = ToInt(kOp, "logn_train_length", logn_train_length.object);
  if (sink_logits) {
    const py::array logits = ToArray(sink_logits->object);
    const char kind = logits.dtype().kind();
    if (kind != 'i' && kind != 'u' && kind != 'f') {
      ThrowError(kOp, "sink_logits.dtype", py::str(logits.dtype()).cast<std::string>(), "must be numbers");
    }
    const DoubleArray values(logits);
    Require(values.ndim() == 1, kOp, "sink_logits.ndim", values.ndim(), "must be 1 ((q_heads,))");
    options.sink_logits = ToVector(values);
  }
  options.softcap = ToFloat(kOp, "softcap", softcap.object);

  // The arrays and positions.
  constexpr const char* kQ = "[batch, q_len, q_heads, head_dim]";
  constexpr const char* kKv = "[batch, kv_len, kv_heads, dim]";
  const py::array q = ToArray(q_arg.object), k = ToArray(k_arg.object), v = ToArray(v_arg.object);
  in.q = ArrayView(q, kOp, "q", kQ, false);
  in.k = ArrayView(k, kOp, "k", kKv, false);
  in.v = ArrayView(v, kOp, "v", kKv, false);
  const std::int64_t batch = in.q.shape[0], q_len = in.q.shape[1], q_heads = in.q.shape[2];
  const std::int64_t kv_len = in.k.seq();
  // The rest of the shapes are checked by ValidateAttention; the positions
  // need batch to agree first.
  Require(in.k.batch() == batch, kOp, "k.batch", in.k.batch(), "must equal q.batch = " + std::to_string(batch));
  in.k_positions = Positions("k", batch, kv_len, k_side);
  if (q_side.given) in.q_positions = Positions("q", batch, q_len, q_side);
  // else the library's default: the queries are the last q_len tokens of the keys

  const std::int64_t call_length =
      std::max(QueryPositions(in).Length(batch, q_len), in.k_positions.Length(batch, kv_len));
  if (!encoding.is_none()) options.encoding = encoding.cast<const AttentionEncoding&>().ForCall(call_length, q_heads);

  if constexpr (kRun == Run::kCheck) {
    // No output is allocated: a view of one row repeated stands for it.
    std::vector<char> row(static_cast<std::size_t>(std::max<std::int64_t>(in.v.head_dim(), 1)) * 4);
    in.out = {row.data(), in.q.dtype, {batch, q_len, q_heads, in.v.head_dim()}, {0, 0, 0, 1}};
    ValidateAttention(in, options);
    return py::none();
  }
  py::array out(q.dtype(), std::vector<py::ssize_t>{batch, q_len, q_heads, in.v.head_dim()});
  in.out = TensorView::Contiguous(out.mutable_data(), in.q.dtype, {batch, q_len, q_heads, in.v.head_dim()});
  {
    py::gil_scoped_release release;  // q, k, v are kept alive by the references above
    if constexpr (kRun == Run::kReference) {
      reference::Attention(in, options);
    } else {
      Attention(in, options);
    }
  }
  return out;
}

constexpr const char* kAttentionDoc = R"doc(Attention of q over k and v with a positional encoding and a mask.

Args:
    q, k, v: ``[batch, q_len, q_heads, head_dim]``,
        ``[batch, kv_len, kv_heads, head_dim]``, ``[batch, kv_len, kv_heads, v_dim]``
        of one dtype (float32, float16, ``ml_dtypes.bfloat16``).
    encoding: ``None`` (NoPE), a :class:`RopeSpec` (shorthand for
        ``RopeEncoding(spec)``), :class:`RopeEncoding`,
        :class:`ReRopeEncoding`, :class:`SelfExtendEncoding`,
        :class:`AlibiEncoding`, :class:`T5BiasEncoding`,
        :class:`ShawEncoding` or :class:`UrpeEncoding`.
    causal: a query at position p sees keys at positions j <= p.
    window: if > 0, a query sees only keys with ``p - j < window``
        (``|p - j|`` when not causal): exactly ``window`` keys up to and
        including its own position. Hugging Face's ``sliding_window`` is
        this number (Mistral, Gemma 2); flash-attention's
        ``window_size=(left, right)`` on causal rows is ``left + 1``.
    sinks: with a window, keys at positions ``j < sinks`` stay visible
        too: the Λ-shaped mask of LM-Infinite / StreamingLLM.
    softmax_scale: multiplies q.k; default ``1 / sqrt(head_dim)``.
    logn_train_length: if > 0, a query at position p is scaled by
        ``max(1, log(p + 1) / log(logn_train_length))`` (log-n scaling).
    sink_logits: learned per-head sink logits (gpt-oss), shape
        ``(q_heads,)``: a virtual key with this logit and a zero value in
        every softmax. Not StreamingLLM's sinks (see ``sinks``).
    softcap: if > 0, each logit s becomes ``softcap * tanh(s / softcap)``
        (Gemma 2's ``attn_logit_softcapping``), after scale and bias.
    q_offset: query s of every row is at ``q_offset + s``; a sequence
        gives one start per row. Default: the queries are the last
        ``q_len`` of each row's keys (``kv_len - q_len``, or
        ``kv_lengths[b] - q_len``).
    q_positions: explicit query positions, ``(batch, q_len)``,
        ``(1, q_len)`` or ``(q_len,)``; instead of ``q_offset``.
    k_offset, k_positions: the same for the keys (default offset 0).
    kv_lengths: valid keys per row, ``(batch,)``; keys past it are never
        seen (a batch of caches of different lengths).

Returns:
    ``out`` ``[batch, q_len, q_heads, v_dim]`` in q's dtype. A query that
    sees no key gets zeros.

Raises:
    ValueError: ``[attention] parameter = value: rule``, e.g.
        ``[attention] mask.window = -1: must be >= 0 (0: no window)``.
)doc";

constexpr const char* kReferenceDoc = R"doc(:func:`posenc.attention` on the float64 reference: every score row
materialized, each encoding by its own definition (ReRoPE as two score
matrices selected by ``p - j < window``, Self-Extend likewise as LongLM
writes it), one rounding to the output
dtype at the end. Single-threaded and slow; same arguments and rules.
)doc";

constexpr const char* kCheckDoc = R"doc(:func:`posenc.attention`'s conversions and checks, without computing: the
same arguments and errors, returns None. posenc.torch checks a call it runs
as torch operations with it (q, k and v may then be zero-stride proxies of
the tensors' shapes, read by no one).
)doc";

template <Run kRun>
void DefAttention(py::module_& m, const char* name, const char* module_name, const char* doc) {
  m.def(name, &AttentionArrays<kRun>, py::arg("q"), py::arg("k"), py::arg("v"), py::kw_only(),
        py::arg("encoding") = py::none(), py::arg("causal") = true, py::arg("window") = 0, py::arg("sinks") = 0,
        py::arg("softmax_scale") = py::none(), py::arg("logn_train_length") = 0, py::arg("sink_logits") = py::none(),
        py::arg("softcap") = 0.0, py::arg("q_offset") = py::none(), py::arg("q_positions") = py::none(),
        py::arg("k_offset") = py::none(), py::arg("k_positions") = py::none(), py::arg("kv_lengths") = py::none(), doc);
  m.attr(name).attr("__module__") = module_name;
}

// The encoding classes live in posenc.attention (where attention.py
// re-exports them): their reprs, pickles and doctests say so.
template <class T>
py::class_<T, AttentionEncoding> EncodingClass(py::module_& m, const char* name, std::vector<Field> fields,
                                               const char* doc) {
  return ValueClass<T, AttentionEncoding>(m, "posenc.attention", name, std::move(fields), doc);
}

// A [num_buckets, q_heads] table in repr: "<32 buckets x 8 heads>".
std::string TableShown(const DoubleArray& table) {
  return "<" + std::to_string(table.shape(0)) + " buckets x " + std::to_string(table.shape(1)) + " heads>";
}

// T5BiasEncoding's weights in repr: "weights=<32 buckets x 8 heads>".
std::optional<std::string> T5WeightsShown(const py::object& self) {
  return "weights=" + TableShown(self.cast<const PyT5BiasEncoding&>().weights);
}

// UrpeEncoding's two tables in repr: "bias=<...>, scale=<...>".
std::optional<std::string> UrpeTablesShown(const py::object& self) {
  const auto& urpe = self.cast<const PyUrpeEncoding&>();
  return "bias=" + TableShown(urpe.bias) + ", scale=" + TableShown(urpe.scale);
}

}  // namespace

void BindAttention(py::module_& m) {
  py::class_<AttentionEncoding>(m, "AttentionEncoding", "The base of posenc.attention's encoding classes.");

  EncodingClass<PyRopeEncoding>(m, "RopeEncoding", {Positional("spec"), KeywordUnlessNone("seq_len")},
                                R"doc(RoPE inside attention: q at position p and k at position j are rotated
by ``spec``'s frequencies (any scaling method, either pair layout, partial
rotary), so the score depends on ``p - j`` only. YaRN's and LongRoPE's
attention factor scales q and k (logits by its square), as in Hugging Face.

Args:
    spec: the :class:`RopeSpec`.
    seq_len: the length the frequency table is built for (it matters for
        dynamic NTK and LongRoPE only). ``None``: the call's largest
        position + 1, which is what Hugging Face does for a forward pass.
)doc")
      .def(py::init<const SpecArg&, const std::optional<Int>&>(), py::arg("spec"), py::arg("seq_len") = py::none())
      .def_readonly("spec", &PyRopeEncoding::spec)
      .def_readonly("seq_len", &PyRopeEncoding::seq_len);

  EncodingClass<PyReRopeEncoding>(
      m, "ReRopeEncoding",
      {Positional("spec"), Keyword("window"), KeywordUnlessNone("leak"), KeywordUnlessNone("seq_len")},
      R"doc(ReRoPE and Leaky ReRoPE (Su Jianlin 2023, "Rectified Rotary Position
Embeddings", github.com/bojone/rerope): relative distances ``d = p - j``
below ``window`` use RoPE as usual; beyond it the distance reads as
``window`` (ReRoPE) or grows by ``1/leak`` (Leaky ReRoPE:
``window + (d - window) / leak``). Causal attention only. ReRoPE is
Self-Extend with an infinite group size and neighbour window ``window``.

Args:
    spec: the :class:`RopeSpec`.
    window: the distance below which RoPE is exact, > 0 (Su used 512 for
        a 4096-token model).
    leak: ``None`` for ReRoPE, or k > 1 for Leaky ReRoPE.
    seq_len: as in :class:`RopeEncoding`.
)doc")
      .def(py::init<const SpecArg&, const Int&, const std::optional<Float>&, const std::optional<Int>&>(),
           py::arg("spec"), py::arg("window"), py::arg("leak") = py::none(), py::arg("seq_len") = py::none())
      .def_readonly("spec", &PyReRopeEncoding::spec)
      .def_readonly("window", &PyReRopeEncoding::window)
      .def_readonly("leak", &PyReRopeEncoding::leak)
      .def_readonly("seq_len", &PyReRopeEncoding::seq_len);

  EncodingClass<PySelfExtendEncoding>(
      m, "SelfExtendEncoding",
      {Positional("spec"), Keyword("group"), Keyword("window"), KeywordUnlessNone("seq_len"),
       Shown("form", FieldRole::kArgument,
             [](const py::object& self) -> std::optional<std::string> {
               const std::string form = self.attr("form").cast<std::string>();
               if (form == "published") return std::nullopt;  // the default
               return "form=" + python::Repr(self.attr("form"));
             })},
      R"doc(Self-Extend (Jin et al. 2024, "LLM Maybe LongLM: Self-Extend LLM Context
Window Without Tuning", github.com/datamllab/LongLM): a query at position
p and a key at position j closer than ``window`` (``p - j < window``, the
neighbour attention) use RoPE at their true positions; farther keys use
grouped positions, the query at ``p // group + window - window // group``
and the key at ``j // group`` (LongLM's ``group_size_1`` is ``group``, its
``group_size_2`` is ``window``): a distance ``d >= window`` reads as
about ``window + (d - window) / group``, so the two parts meet at
``window``. Causal attention only. ``group=1`` is plain RoPE; ReRoPE is
the limit of an infinite group.

``form="kv-shift"`` is Self-Extend as llama.cpp runs it (``--grp-attn-n
G --grp-attn-w W``): it shifts and divides the positions of its KV cache
every ``window`` tokens instead of recomputing RoPE, so a query at p with
``c = p // window`` compressions behind it sits at
``p - c * (window - window // group)``, the keys before its own block of
``window`` positions (``j < c * window``) at ``j // group``, and only the
keys of its block keep their true distances (1 to ``window`` of them).
``window`` must then be a multiple of ``group``, as llama.cpp asserts.

Args:
    spec: the :class:`RopeSpec`.
    group: the group size G >= 1 (LongLM used 2 to 64).
    window: the neighbour window W >= 1 (LongLM used 512 to 2048 for
        Llama-2 models trained on 4096 tokens).
    seq_len: as in :class:`RopeEncoding`.
    form: ``"published"`` (Jin et al.) or ``"kv-shift"`` (llama.cpp).

Example:
    >>> import numpy as np, posenc
    >>> spec = posenc.RopeSpec(head_dim=8)
    >>> q = k = v = np.ones((1, 6, 2, 8), np.float32)
    >>> posenc.attention(q, k, v, encoding=posenc.SelfExtendEncoding(spec, group=2, window=4), layout="bshd").shape
    (1, 6, 2, 8)
)doc")
      .def(py::init<const SpecArg&, const Int&, const Int&, const std::optional<Int>&, const Str&>(), py::arg("spec"),
           py::arg("group"), py::arg("window"), py::arg("seq_len") = py::none(), py::arg("form") = "published")
      .def_readonly("spec", &PySelfExtendEncoding::spec)
      .def_readonly("group", &PySelfExtendEncoding::group)
      .def_readonly("window", &PySelfExtendEncoding::window)
      .def_readonly("seq_len", &PySelfExtendEncoding::seq_len)
      .def_property_readonly("form", &PySelfExtendEncoding::FormName);

  EncodingClass<PyAlibiEncoding>(
      m, "AlibiEncoding",
      {Shown("slopes", FieldRole::kArgument,
             [](const py::object& self) { return "slopes=" + python::Repr(py::list(self.attr("slopes"))); }),
       Keyword("form")},
      R"doc(ALiBi (Press et al. 2021): head h adds a linear bias to its logits
(after the softmax scale), by ``form``:

* ``"distance"``: ``-slopes[h] * |p - j|``, the paper's symmetric form
  (also right for encoders, ``causal=False``);
* ``"key-position"``: ``+slopes[h] * j``, BLOOM's ``build_alibi_tensor``.
  On causal rows it differs from "distance" by a constant per row, so the
  attention is the same.

Args:
    slopes: one slope per query head, in head order (never sorted), e.g.
        ``2 ** (-8 * (h + 1) / heads)`` for a power-of-two head count.
    form: ``"distance"`` or ``"key-position"``.
)doc")
      .def(py::init<const ArrayLike&, const Str&>(), py::arg("slopes"), py::arg("form") = "distance")
      .def_property_readonly("slopes", &PyAlibiEncoding::Slopes)
      .def_property_readonly("form", &PyAlibiEncoding::Form);

  EncodingClass<PyT5BiasEncoding>(
      m, "T5BiasEncoding",
      {Shown("weights", FieldRole::kArgument, T5WeightsShown), Keyword("max_distance"), Keyword("bidirectional")},
      R"doc(T5's relative position bias (Raffel et al. 2020): a learned scalar per
(bucket, head) added to the logits, the bucket of ``j - p`` as Hugging
Face's ``T5Attention._relative_position_bucket``. T5 does not scale its
logits: pass ``softmax_scale=1.0`` for T5 models.

Args:
    weights: ``[num_buckets, q_heads]``, laid out as Hugging Face's
        ``relative_attention_bias.weight``.
    max_distance: distances from ``num_buckets/2`` (per side) up to this
        share buckets logarithmically (T5: 128).
    bidirectional: True for the encoder (half the buckets per sign),
        False for decoder self-attention (future keys map to bucket 0).
)doc")
      .def(py::init<const ArrayLike&, const Int&, const Bool&>(), py::arg("weights"), py::arg("max_distance") = 128,
           py::arg("bidirectional") = true)
      .def_readonly("weights", &PyT5BiasEncoding::weights)
      .def_readonly("max_distance", &PyT5BiasEncoding::max_distance)
      .def_readonly("bidirectional", &PyT5BiasEncoding::bidirectional)
      .def_property_readonly("num_buckets", [](const PyT5BiasEncoding& t5) { return t5.weights.shape(0); });

  EncodingClass<PyUrpeEncoding>(m, "UrpeEncoding",
                                {Shown("bias", FieldRole::kArgument, UrpeTablesShown), Hidden("scale"),
                                 Keyword("max_distance"), Keyword("bidirectional")},
                                R"doc(URPE (Luo et al., NeurIPS 2022, "Your Transformer May Not be as Powerful
as You Expect"): a relative bias B inside the softmax and a Toeplitz
weight C on each probability, on the value side, per head::

    out_i = sum_j softmax_j(s_ij + B_h(j - i)) * C_h(j - i) * v_j

The rows are not renormalized after C (the paper's point: the weights no
longer sum to 1). B and C are read by T5's buckets of ``j - i``, as
:class:`T5BiasEncoding` reads its weights (the paper's exact distances are
the buckets below ``num_buckets / 2``, or ``/ 4`` per side when
bidirectional); ``scale`` of ones is T5's bias exactly.

Args:
    bias: B, ``[num_buckets, q_heads]`` (HF's ``relative_attention_bias``
        layout).
    scale: C, the same shape (URPE starts it at ones).
    max_distance: as in :class:`T5BiasEncoding`.
    bidirectional: True for encoders (half the buckets per sign), False
        for causal decoders.
)doc")
      .def(py::init<const ArrayLike&, const ArrayLike&, const Int&, const Bool&>(), py::arg("bias"), py::arg("scale"),
           py::arg("max_distance") = 128, py::arg("bidirectional") = true)
      .def_readonly("bias", &PyUrpeEncoding::bias)
      .def_readonly("scale", &PyUrpeEncoding::scale)
      .def_readonly("max_distance", &PyUrpeEncoding::max_distance)
      .def_readonly("bidirectional", &PyUrpeEncoding::bidirectional)
      .def_property_readonly("num_buckets", [](const PyUrpeEncoding& u) { return u.bias.shape(0); });

  EncodingClass<PyShawEncoding>(
      m, "ShawEncoding",
      {Hidden("rel_k"), Hidden("rel_v"), Keyword("max_distance"), Keyword("query_minus_key"), Keyword("key_term"),
       Keyword("query_term"), Keyword("value_term", FieldRole::kDerived)},
      R"doc(Shaw et al. (2018) relative position representations, and BERT's
``relative_key`` / ``relative_key_query``: learned vectors per relative
distance clipped to ``[-K, K]``, shared by all heads.

Args:
    rel_k: ``[2K+1, head_dim]`` added to the keys inside the score
        (``q . a^K``), or None when only values are used.
    rel_v: ``[2K+1, v_dim]`` added to the values in the output, or None.
    max_distance: K.
    query_minus_key: BERT's distance ``i - j`` instead of Shaw's ``j - i``.
    key_term: the ``q . a^K`` term (Shaw; BERT relative_key and
        relative_key_query).
    query_term: the ``k . a^K`` term (BERT relative_key_query).

Example:
    >>> import numpy as np, posenc
    >>> q = k = v = np.ones((1, 4, 2, 8), np.float32)
    >>> enc = posenc.ShawEncoding(np.zeros((5, 8)), None, max_distance=2)
    >>> posenc.attention(q, k, v, encoding=enc, causal=False, layout="bshd").shape
    (1, 4, 2, 8)
)doc")
      .def(py::init<const std::optional<ArrayLike>&, const std::optional<ArrayLike>&, const Int&, bool, bool, bool>(),
           py::arg("rel_k"), py::arg("rel_v") = py::none(), py::kw_only(), py::arg("max_distance"),
           py::arg("query_minus_key") = false, py::arg("key_term") = true, py::arg("query_term") = false)
      .def_readonly("rel_k", &PyShawEncoding::rel_k)
      .def_readonly("rel_v", &PyShawEncoding::rel_v)
      .def_property_readonly("max_distance", [](const PyShawEncoding& s) { return s.spec.max_distance; })
      .def_property_readonly(
          "query_minus_key",
          [](const PyShawEncoding& s) { return s.spec.distance == RelativeDistance::kQueryMinusKey; })
      .def_property_readonly("key_term", [](const PyShawEncoding& s) { return s.spec.key_term; })
      .def_property_readonly("query_term", [](const PyShawEncoding& s) { return s.spec.query_term; })
      .def_property_readonly("value_term", [](const PyShawEncoding& s) { return s.spec.value_term; });

  DefAttention<Run::kKernel>(m, "attention", "posenc.attention", kAttentionDoc);
  DefAttention<Run::kCheck>(m, "check_attention", "posenc._posenc", kCheckDoc);
  py::module_ reference = m.def_submodule("reference", "The float64 reference kernels (posenc.reference).");
  DefAttention<Run::kReference>(reference, "attention", "posenc.reference", kReferenceDoc);
}

}  // namespace posenc::python
