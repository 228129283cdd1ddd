// Bindings for attention (posenc/attention.h): the tiled kernel and the
// float64 reference on NumPy arrays. python/posenc/attention.py gives them
// their Python signature; the positional encoding arrives here as a small
// tuple that its encoding classes build (see EncodingFromTuple).
//
// Every rule about the arguments is the library's (ValidateAttention), so
// errors are posenc::Error ("[attention] parameter = value: rule") and reach
// Python as ValueError. The checks only a binding can make (ndim, dtype, byte
// strides, the shape of position arrays) use the same format.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "numpy_views.h"
#include "posenc/attention.h"
#include "posenc/error.h"
#include "posenc/rope_frequencies.h"
#include "posenc/rope_spec.h"

namespace py = pybind11;

namespace posenc::python {
namespace {

constexpr const char* kOp = "attention";

using Int64Array = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>;
using DoubleArray = py::array_t<double, py::array::c_style | py::array::forcecast>;

// ---- arrays -----------------------------------------------------------------

std::vector<std::int64_t> ToVector(const Int64Array& a) { return {a.data(), a.data() + a.size()}; }
std::vector<double> ToVector(const DoubleArray& a) { return {a.data(), a.data() + a.size()}; }

// ---- positions ----------------------------------------------------------------

// The positions of one side (`side` is "q" or "k") from the wrapper's three
// spellings, checked with names that say which side is wrong.
//   offset     token s of every row at offset + s
//   offsets    token s of row b at offsets[b] + s, shape (batch,)
//   ids        explicit, shape (batch, seq), (1, seq) or (seq,)
TokenPositions Positions(const std::string& side, std::int64_t batch, std::int64_t seq, std::int64_t offset,
                         const std::optional<Int64Array>& offsets, const std::optional<Int64Array>& ids) {
  if (ids) {
    const std::string name = side + "_positions";
    const py::ssize_t rows = ids->ndim() == 1 ? 1 : ids->shape(0);
    const bool shaped = (ids->ndim() == 1 && ids->shape(0) == seq) ||
                        (ids->ndim() == 2 && ids->shape(1) == seq && (rows == 1 || rows == batch));
    if (!shaped) {
      std::string got = "(";
      for (py::ssize_t axis = 0; axis < ids->ndim(); ++axis) {
        if (axis > 0) got += ", ";
        got += std::to_string(ids->shape(axis));
      }
      got += ids->ndim() == 1 ? ",)" : ")";
      ThrowError(kOp, name + ".shape", got,
                 "must be (batch, " + side + "_len) = (" + std::to_string(batch) + ", " + std::to_string(seq) +
                     "), (1, " + side + "_len) or (" + side + "_len,)");
    }
    std::vector<std::int64_t> all(static_cast<std::size_t>(batch * seq));
    for (std::int64_t b = 0; b < batch; ++b) {
      for (std::int64_t s = 0; s < seq; ++s) {
        const std::int64_t value = ids->data()[(rows == 1 ? 0 : b) * seq + s];
        Require(value >= 0, kOp, name + "[" + std::to_string(b) + ", " + std::to_string(s) + "]", value,
                "must not be negative");
        all[static_cast<std::size_t>(b * seq + s)] = value;
      }
    }
    return TokenPositions::Ids(std::move(all));
  }
  const std::string name = side + "_offset";
  if (offsets) {
    Require(offsets->ndim() == 1 && offsets->shape(0) == batch, kOp, name + ".size", offsets->size(),
            "must equal batch = " + std::to_string(batch) + " (one start per sequence)");
    for (std::int64_t b = 0; b < batch; ++b) {
      Require(offsets->data()[b] >= 0, kOp, name + "[" + std::to_string(b) + "]", offsets->data()[b],
              "must not be negative");
    }
    return TokenPositions::Offsets(ToVector(*offsets));
  }
  Require(offset >= 0, kOp, name, offset, "must not be negative");
  return TokenPositions::Offset(offset);
}

// ---- encodings ------------------------------------------------------------------

RopeFrequencies FrequenciesFor(const RopeSpec& spec, std::int64_t seq_len, std::int64_t call_length) {
  return ComputeRopeFrequencies(spec, seq_len > 0 ? seq_len : call_length);
}

// The tuples python/posenc/attention.py builds (its classes' _core()):
//   ("none",)
//   ("rope", spec, seq_len)                 seq_len 0: the call's length
//   ("rerope", spec, seq_len, window, leak)  leak None: plain ReRoPE
//   ("alibi", slopes, form)
//   ("t5", weights [num_buckets, heads], max_distance, bidirectional)
// `call_length` is the largest position + 1 of the call (frequency tables of
// dynamic NTK and LongRoPE depend on it).
PositionEncoding EncodingFromTuple(const py::tuple& encoding, std::int64_t call_length, std::int64_t q_heads) {
  const auto kind = encoding[0].cast<std::string>();
  if (kind == "none") return NoPositionEncoding{};
  if (kind == "rope") {
    const auto& spec = encoding[1].cast<const RopeSpec&>();
    return RopeEncoding{spec, FrequenciesFor(spec, encoding[2].cast<std::int64_t>(), call_length)};
  }
  if (kind == "rerope") {
    const auto& spec = encoding[1].cast<const RopeSpec&>();
    ReRopeEncoding e{spec, FrequenciesFor(spec, encoding[2].cast<std::int64_t>(), call_length),
                     encoding[3].cast<std::int64_t>(), std::nullopt};
    if (!encoding[4].is_none()) e.leak = encoding[4].cast<double>();
    return e;
  }
  if (kind == "alibi") {
    return AlibiEncoding{ToVector(encoding[1].cast<DoubleArray>()), ParseAlibiForm(encoding[2].cast<std::string>())};
  }
  if (kind == "t5") {
    const auto weights = encoding[1].cast<DoubleArray>();
    Require(weights.ndim() == 2, kOp, "t5.weights.ndim", weights.ndim(), "must be 2 ([num_buckets, q_heads])");
    Require(weights.shape(1) == q_heads, kOp, "t5.weights.shape[1]", weights.shape(1),
            "must equal q_heads = " + std::to_string(q_heads) + " (weights are [num_buckets, q_heads])");
    T5BucketSpec buckets;
    buckets.num_buckets = weights.shape(0);
    buckets.max_distance = encoding[2].cast<std::int64_t>();
    buckets.direction = encoding[3].cast<bool>() ? T5Direction::kBidirectional : T5Direction::kCausal;
    return T5BiasEncoding{buckets, ToVector(weights)};
  }
  if (kind == "shaw") {
    ShawEncoding e;
    e.spec.max_distance = encoding[1].cast<std::int64_t>();
    e.spec.distance = encoding[2].cast<bool>() ? RelativeDistance::kQueryMinusKey : RelativeDistance::kKeyMinusQuery;
    e.spec.key_term = encoding[3].cast<bool>();
    e.spec.query_term = encoding[4].cast<bool>();
    e.spec.value_term = !encoding[6].is_none();
    if (!encoding[5].is_none()) e.rel_k = ToVector(encoding[5].cast<DoubleArray>());
    if (e.spec.value_term) e.rel_v = ToVector(encoding[6].cast<DoubleArray>());
    return e;
  }
  ThrowError(kOp, "encoding", FormatValue(kind), "unknown encoding kind");
}

// ---- the call -------------------------------------------------------------------

py::array AttentionArrays(const py::array& q, const py::array& k, const py::array& v, const py::tuple& encoding,
                          bool causal, std::int64_t window, std::int64_t sinks, std::optional<double> softmax_scale,
                          std::int64_t logn_train_length, const std::optional<DoubleArray>& sink_logits, double softcap,
                          std::optional<std::int64_t> q_offset, const std::optional<Int64Array>& q_offsets,
                          const std::optional<Int64Array>& q_ids, std::int64_t k_offset,
                          const std::optional<Int64Array>& k_offsets, const std::optional<Int64Array>& k_ids,
                          const std::optional<Int64Array>& kv_lengths, bool reference) {
  constexpr const char* kQ = "[batch, q_len, q_heads, head_dim]";
  constexpr const char* kKv = "[batch, kv_len, kv_heads, dim]";
  AttentionInputs in;
  in.q = ArrayView(q, kOp, "q", kQ, false);
  in.k = ArrayView(k, kOp, "k", kKv, false);
  in.v = ArrayView(v, kOp, "v", kKv, false);
  const std::int64_t batch = in.q.shape[0], q_len = in.q.shape[1], q_heads = in.q.shape[2], head_dim = in.q.shape[3];
  const std::int64_t kv_len = in.k.seq();
  // kv_lengths and the batch sizes are checked by ValidateAttention; the
  // positions need batch to agree first.
  Require(in.k.batch() == batch, kOp, "k.batch", in.k.batch(), "must equal q.batch = " + std::to_string(batch));
  if (kv_lengths) {
    Require(kv_lengths->ndim() == 1, kOp, "kv_lengths.ndim", kv_lengths->ndim(), "must be 1 ((batch,))");
    in.kv_lengths = ToVector(*kv_lengths);
  }
  in.k_positions = Positions("k", batch, kv_len, k_offset, k_offsets, k_ids);
  if (q_offset || q_offsets || q_ids) {
    in.q_positions = Positions("q", batch, q_len, q_offset.value_or(0), q_offsets, q_ids);
  }  // else the library's default: the queries are the last q_len tokens of the keys

  const std::int64_t call_length =
      std::max(QueryPositions(in).Length(batch, q_len), in.k_positions.Length(batch, kv_len));
  AttentionOptions options;
  options.encoding = EncodingFromTuple(encoding, call_length, q_heads);
  options.mask = AttentionMask{causal, window, sinks};
  options.softmax_scale = softmax_scale;
  options.logn_train_length = logn_train_length;
  if (sink_logits) {
    Require(sink_logits->ndim() == 1, kOp, "sink_logits.ndim", sink_logits->ndim(), "must be 1 ((q_heads,))");
    options.sink_logits = ToVector(*sink_logits);
  }
  options.softcap = softcap;

  py::array out(q.dtype(), std::vector<py::ssize_t>{batch, q_len, q_heads, in.v.head_dim()});
  in.out = TensorView::Contiguous(out.mutable_data(), in.q.dtype, {batch, q_len, q_heads, in.v.head_dim()});
  {
    py::gil_scoped_release release;  // q, k, v are kept alive by the caller's references
    if (reference) {
      reference::Attention(in, options);
    } else {
      Attention(in, options);
    }
  }
  return out;
}

}  // namespace

void BindAttention(py::module_& m) {
  m.def("attention", &AttentionArrays, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("encoding"), py::arg("causal"),
        py::arg("window"), py::arg("sinks"), py::arg("softmax_scale"), py::arg("logn_train_length"),
        py::arg("sink_logits"), py::arg("softcap"), py::arg("q_offset"), py::arg("q_offsets"), py::arg("q_ids"),
        py::arg("k_offset"), py::arg("k_offsets"), py::arg("k_ids"), py::arg("kv_lengths"), py::arg("reference"),
        "Attention of q [batch, q_len, q_heads, d] over k, v [batch, kv_len, kv_heads, d|v_dim]; "
        "returns out [batch, q_len, q_heads, v_dim] in q's dtype.");
}

}  // namespace posenc::python
