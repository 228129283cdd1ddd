// Bindings for the absolute and relative encodings: sinusoidal tables and the
// fused add, learned tables (.npy/safetensors), ALiBi, T5 buckets, the XLNet
// and DeBERTa position arithmetic, and the float64 relative-attention
// references. Thin on purpose: python/posenc/encodings.py gives them their
// Python signatures and docstrings.
//
// Argument errors are posenc::Error ("[op] parameter = value: rule"), which
// pybind11 turns into ValueError; the array checks only a binding can make
// use the same format.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bindings.h"
#include "numpy_views.h"
#include "posenc/alibi.h"
#include "posenc/deberta_relative.h"
#include "posenc/error.h"
#include "posenc/learned_table.h"
#include "posenc/relative_attention.h"
#include "posenc/shaw_relative.h"
#include "posenc/sinusoidal.h"
#include "posenc/t5_bias.h"
#include "posenc/token_positions.h"
#include "posenc/xlnet_relative.h"

namespace py = pybind11;

namespace posenc::python {
namespace {

using DoubleArray = py::array_t<double, py::array::c_style | py::array::forcecast>;
using Int64Array = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>;
using FloatArray = py::array_t<float, py::array::c_style | py::array::forcecast>;
using ByteArray = py::array_t<std::uint8_t, py::array::c_style | py::array::forcecast>;

std::span<const double> Span(const DoubleArray& a) { return {a.data(), static_cast<std::size_t>(a.size())}; }
std::span<const double> Span(const std::optional<DoubleArray>& a) { return a ? Span(*a) : std::span<const double>{}; }

py::array_t<double> Shaped(const std::vector<double>& values, std::vector<py::ssize_t> shape) {
  py::array_t<double> out(shape);
  std::copy(values.begin(), values.end(), out.mutable_data());
  return out;
}

template <class T>
py::array_t<T> Shaped(const std::vector<T>& values, std::vector<py::ssize_t> shape) {
  py::array_t<T> out(shape);
  std::copy(values.begin(), values.end(), out.mutable_data());
  return out;
}

// ---- embedding arrays ---------------------------------------------------------

TokenPositions MakePositions(std::int64_t offset, const std::optional<Int64Array>& offsets,
                             const std::optional<Int64Array>& position_ids) {
  if (position_ids) return TokenPositions::Ids({position_ids->data(), position_ids->data() + position_ids->size()});
  if (offsets) return TokenPositions::Offsets({offsets->data(), offsets->data() + offsets->size()});
  return TokenPositions::Offset(offset);
}

EmbeddingAddCall MakeCall(std::string_view op, const py::array& in, const py::array& out, std::int64_t offset,
                          const std::optional<Int64Array>& offsets, const std::optional<Int64Array>& position_ids,
                          double input_scale) {
  return EmbeddingAddCall{ArrayView(in, op, "x", "[batch, seq, rows, dim]", false),
                          ArrayView(out, op, "out", "[batch, seq, rows, dim]", true),
                          MakePositions(offset, offsets, position_ids), input_scale};
}

SinusoidalSpec MakeSinusoidal(std::int64_t dim, const std::string& order, const std::string& spacing, double base) {
  const SinusoidalSpec spec{
      .dim = dim, .base = base, .order = ParseSinusoidalOrder(order), .spacing = ParseSinusoidalSpacing(spacing)};
  spec.Validate();
  return spec;
}

LearnedTableSpec MakeTableSpec(std::int64_t row_offset, const std::string& out_of_range, double alpha) {
  const LearnedTableSpec spec{
      .row_offset = row_offset, .out_of_range = ParseOutOfRangePolicy(out_of_range), .alpha = alpha};
  spec.Validate();
  return spec;
}

T5BucketSpec MakeT5(std::int64_t num_buckets, std::int64_t max_distance, bool bidirectional) {
  const T5BucketSpec spec{.num_buckets = num_buckets,
                          .max_distance = max_distance,
                          .direction = bidirectional ? T5Direction::kBidirectional : T5Direction::kCausal};
  spec.Validate();
  return spec;
}

// ---- attention ----------------------------------------------------------------

// The q, k, v arrays [batch, heads, len, dim] (float64) and the options every
// reference form shares.
struct AttentionArgs {
  DoubleArray q, k, v;
  std::optional<double> scale;
  bool causal = false;
  std::optional<std::int64_t> query_offset;
  std::optional<ByteArray> key_padding;

  RelativeAttentionInputs Inputs(std::string_view op) const {
    for (const auto& [a, name] : {std::pair{&q, "q"}, std::pair{&k, "k"}, std::pair{&v, "v"}}) {
      Require(a->ndim() == 4, op, std::string(name) + ".ndim", a->ndim(), "must be 4 ([batch, heads, len, dim])");
    }
    RelativeAttentionInputs in;
    in.shape = {.batch = q.shape(0),
                .heads = q.shape(1),
                .q_len = q.shape(2),
                .k_len = k.shape(2),
                .head_dim = q.shape(3),
                .value_dim = v.shape(3)};
    Require(k.shape(0) == q.shape(0) && k.shape(1) == q.shape(1) && k.shape(3) == q.shape(3), op, "k.shape",
            Verbatim{"differs"}, "must be [batch, heads, k_len, head_dim] with q's batch, heads and head_dim");
    Require(v.shape(0) == q.shape(0) && v.shape(1) == q.shape(1) && v.shape(2) == k.shape(2), op, "v.shape",
            Verbatim{"differs"}, "must be [batch, heads, k_len, value_dim] with k's batch, heads and k_len");
    in.q = Span(q);
    in.k = Span(k);
    in.v = Span(v);
    in.scale = scale;
    in.mask = causal ? RelativeAttentionMask::kCausal : RelativeAttentionMask::kNone;
    in.query_offset = query_offset;
    if (key_padding) in.key_padding = {key_padding->data(), static_cast<std::size_t>(key_padding->size())};
    return in;
  }
};

py::tuple Result(const RelativeAttentionResult& r, const RelativeAttentionInputs& in) {
  const auto& s = in.shape;
  return py::make_tuple(Shaped(r.scores, {s.batch, s.heads, s.q_len, s.k_len}),
                        Shaped(r.probs, {s.batch, s.heads, s.q_len, s.k_len}),
                        Shaped(r.output, {s.batch, s.heads, s.q_len, s.ValueDim()}));
}

template <class F>
py::tuple RunAttention(const AttentionArgs& args, std::string_view op, F&& run) {
  const RelativeAttentionInputs in = args.Inputs(op);
  RelativeAttentionResult r;
  {
    py::gil_scoped_release release;
    r = run(in);
  }
  return Result(r, in);
}

#define POSENC_ATTENTION_ARGS                                                                         \
  py::arg("q"), py::arg("k"), py::arg("v"), py::arg("scale") = py::none(), py::arg("causal") = false, \
                                            py::arg("query_offset") = py::none(), py::arg("key_padding") = py::none()

AttentionArgs Args(DoubleArray q, DoubleArray k, DoubleArray v, std::optional<double> scale, bool causal,
                   std::optional<std::int64_t> query_offset, std::optional<ByteArray> key_padding) {
  return {std::move(q), std::move(k), std::move(v), scale, causal, query_offset, std::move(key_padding)};
}

}  // namespace

void BindEncodings(py::module_& m) {
  // ---- sinusoidal
  m.def(
      "sinusoidal_inv_freq",
      [](std::int64_t dim, const std::string& order, const std::string& spacing, double base) {
        const auto w = SinusoidalInvFreq(MakeSinusoidal(dim, order, spacing, base));
        return Shaped(w, {static_cast<py::ssize_t>(w.size())});
      },
      py::arg("dim"), py::arg("order"), py::arg("spacing"), py::arg("base"));
  m.def(
      "sinusoidal_table",
      [](std::int64_t dim, const std::string& order, const std::string& spacing, double base,
         const DoubleArray& positions) {
        const auto table = SinusoidalTable(MakeSinusoidal(dim, order, spacing, base), Span(positions));
        return Shaped(table, {static_cast<py::ssize_t>(positions.size()), dim});
      },
      py::arg("dim"), py::arg("order"), py::arg("spacing"), py::arg("base"), py::arg("positions"));
  m.def(
      "add_sinusoidal",
      [](std::int64_t dim, const std::string& order, const std::string& spacing, double base, const py::array& x,
         const py::array& out, std::int64_t offset, const std::optional<Int64Array>& offsets,
         const std::optional<Int64Array>& position_ids, double input_scale, bool reference) {
        const SinusoidalSpec spec = MakeSinusoidal(dim, order, spacing, base);
        const EmbeddingAddCall call = MakeCall("sinusoidal", x, out, offset, offsets, position_ids, input_scale);
        py::gil_scoped_release release;
        reference ? reference::AddSinusoidal(spec, call) : AddSinusoidal(spec, call);
      },
      py::arg("dim"), py::arg("order"), py::arg("spacing"), py::arg("base"), py::arg("x"), py::arg("out"),
      py::arg("offset"), py::arg("offsets"), py::arg("position_ids"), py::arg("input_scale"), py::arg("reference"));

  // ---- learned tables
  py::class_<LearnedTable>(m, "LearnedTable", "posenc::LearnedTable (wrapped by posenc.LearnedTable)")
      .def(py::init([](const FloatArray& values) {
             Require(values.ndim() == 2, "learned_table", "values.ndim", values.ndim(), "must be 2 ([positions, dim])");
             return LearnedTable(values.shape(0), values.shape(1),
                                 std::vector<float>(values.data(), values.data() + values.size()));
           }),
           py::arg("values"))
      .def_static("load", &LearnedTable::Load, py::arg("path"), py::arg("tensor") = "")
      .def_static(
          "from_bytes",
          [](const py::bytes& data, const std::string& format, const std::string& tensor) {
            const std::string_view view(data);
            const std::span<const std::uint8_t> bytes(reinterpret_cast<const std::uint8_t*>(view.data()), view.size());
            if (format == "npy") return LearnedTable::FromNpy(bytes);
            if (format == "safetensors") return LearnedTable::FromSafetensors(bytes, tensor);
            ThrowError("learned_table", "format", FormatValue(format), "must be \"npy\" or \"safetensors\"");
          },
          py::arg("data"), py::arg("format"), py::arg("tensor") = "")
      .def_property_readonly("rows", &LearnedTable::rows)
      .def_property_readonly("dim", &LearnedTable::dim)
      .def_property_readonly("source_dtype", &LearnedTable::source_dtype)
      .def_property_readonly(
          "values",
          [](const LearnedTable& t) {
            return Shaped(std::vector<float>(t.values().begin(), t.values().end()), {t.rows(), t.dim()});
          })
      .def(
          "capacity",
          [](const LearnedTable& t, std::int64_t row_offset, const std::string& policy, double alpha) {
            return t.Capacity(MakeTableSpec(row_offset, policy, alpha));
          },
          py::arg("row_offset"), py::arg("out_of_range"), py::arg("alpha"))
      .def(
          "lookup",
          [](const LearnedTable& t, const Int64Array& positions, std::int64_t row_offset, const std::string& policy,
             double alpha) {
            const auto rows = t.Gather(MakeTableSpec(row_offset, policy, alpha),
                                       {positions.data(), static_cast<std::size_t>(positions.size())});
            return Shaped(rows, {static_cast<py::ssize_t>(positions.size()), t.dim()});
          },
          py::arg("positions"), py::arg("row_offset"), py::arg("out_of_range"), py::arg("alpha"))
      .def(
          "add",
          [](const LearnedTable& t, const py::array& x, const py::array& out, std::int64_t offset,
             const std::optional<Int64Array>& offsets, const std::optional<Int64Array>& position_ids,
             double input_scale, std::int64_t row_offset, const std::string& policy, double alpha, bool reference) {
            const LearnedTableSpec spec = MakeTableSpec(row_offset, policy, alpha);
            const EmbeddingAddCall call = MakeCall("learned_table", x, out, offset, offsets, position_ids, input_scale);
            py::gil_scoped_release release;
            reference ? reference::AddLearnedTable(t, spec, call) : AddLearnedTable(t, spec, call);
          },
          py::arg("x"), py::arg("out"), py::arg("offset"), py::arg("offsets"), py::arg("position_ids"),
          py::arg("input_scale"), py::arg("row_offset"), py::arg("out_of_range"), py::arg("alpha"),
          py::arg("reference"));
  m.def(
      "position_ids_from_mask",
      [](const ByteArray& mask, std::int64_t pad_position) {
        Require(mask.ndim() == 2, "positions", "mask.ndim", mask.ndim(), "must be 2 ([batch, seq])");
        const auto ids = PositionIdsFromMask({mask.data(), static_cast<std::size_t>(mask.size())}, mask.shape(0),
                                             mask.shape(1), pad_position);
        return Shaped(ids, {mask.shape(0), mask.shape(1)});
      },
      py::arg("mask"), py::arg("pad_position"));

  // ---- ALiBi
  const auto alibi = [](std::int64_t heads, double max_bias, const std::string& form) {
    const AlibiSpec spec{.heads = heads, .max_bias = max_bias, .form = ParseAlibiForm(form)};
    spec.Validate();
    return spec;
  };
  m.def(
      "alibi_slopes",
      [alibi](std::int64_t heads, double max_bias, std::int64_t head_begin, std::optional<std::int64_t> head_count) {
        const AlibiSpec spec = alibi(heads, max_bias, "distance");
        const auto s = AlibiSlopes(spec, head_begin, head_count.value_or(heads - head_begin));
        return Shaped(s, {static_cast<py::ssize_t>(s.size())});
      },
      py::arg("heads"), py::arg("max_bias"), py::arg("head_begin"), py::arg("head_count"));
  m.def(
      "alibi_bias",
      [alibi](std::int64_t heads, double max_bias, const std::string& form, std::int64_t q_len, std::int64_t k_len,
              std::int64_t query_offset) {
        return Shaped(AlibiBias(alibi(heads, max_bias, form), q_len, k_len, query_offset), {heads, q_len, k_len});
      },
      py::arg("heads"), py::arg("max_bias"), py::arg("form"), py::arg("q_len"), py::arg("k_len"),
      py::arg("query_offset"));
  m.def(
      "alibi_key_bias_from_mask",
      [alibi](std::int64_t heads, double max_bias, const ByteArray& mask) {
        Require(mask.ndim() == 2, "alibi", "mask.ndim", mask.ndim(), "must be 2 ([batch, k_len])");
        const auto b =
            AlibiKeyBiasFromMask(alibi(heads, max_bias, "key-position"),
                                 {mask.data(), static_cast<std::size_t>(mask.size())}, mask.shape(0), mask.shape(1));
        return Shaped(b, {mask.shape(0), heads, mask.shape(1)});
      },
      py::arg("heads"), py::arg("max_bias"), py::arg("mask"));

  // ---- T5
  m.def(
      "t5_relative_bucket",
      [](const Int64Array& relative, std::int64_t num_buckets, std::int64_t max_distance, bool bidirectional) {
        const T5BucketSpec spec = MakeT5(num_buckets, max_distance, bidirectional);
        py::array_t<std::int64_t> out(std::vector<py::ssize_t>(relative.shape(), relative.shape() + relative.ndim()));
        for (py::ssize_t i = 0; i < relative.size(); ++i)
          out.mutable_data()[i] = T5RelativeBucket(spec, relative.data()[i]);
        return out;
      },
      py::arg("relative_position"), py::arg("num_buckets"), py::arg("max_distance"), py::arg("bidirectional"));
  m.def(
      "t5_bias",
      [](const DoubleArray& weights, std::int64_t num_buckets, std::int64_t max_distance, bool bidirectional,
         std::int64_t q_len, std::int64_t k_len, std::int64_t query_offset) {
        Require(weights.ndim() == 2, "t5_bias", "weights.ndim", weights.ndim(), "must be 2 ([num_buckets, heads])");
        const std::int64_t heads = weights.shape(1);
        return Shaped(
            T5Bias(MakeT5(num_buckets, max_distance, bidirectional), Span(weights), heads, q_len, k_len, query_offset),
            {heads, q_len, k_len});
      },
      py::arg("weights"), py::arg("num_buckets"), py::arg("max_distance"), py::arg("bidirectional"), py::arg("q_len"),
      py::arg("k_len"), py::arg("query_offset"));

  // ---- XLNet, DeBERTa position arithmetic
  const auto xlnet_type = [](const std::string& t) {
    if (t == "bi") return XLNetAttnType::kBidirectional;
    if (t == "uni") return XLNetAttnType::kUnidirectional;
    ThrowError("xlnet", "attn_type", FormatValue(t), "must be \"bi\" or \"uni\"");
  };
  m.def(
      "xlnet_relative_encoding",
      [xlnet_type](std::int64_t d_model, std::int64_t q_len, std::int64_t k_len, const std::string& attn_type,
                   std::int64_t clamp_len) {
        const auto e = XLNetRelativeEncoding(d_model, q_len, k_len, xlnet_type(attn_type), clamp_len);
        return Shaped(e, {static_cast<py::ssize_t>(e.size() / d_model), d_model});
      },
      py::arg("d_model"), py::arg("q_len"), py::arg("k_len"), py::arg("attn_type"), py::arg("clamp_len"));
  m.def(
      "deberta_log_bucket",
      [](const Int64Array& relative, std::int64_t bucket_size, std::int64_t max_position) {
        py::array_t<std::int64_t> out(std::vector<py::ssize_t>(relative.shape(), relative.shape() + relative.ndim()));
        for (py::ssize_t i = 0; i < relative.size(); ++i) {
          out.mutable_data()[i] = DebertaLogBucket(relative.data()[i], bucket_size, max_position);
        }
        return out;
      },
      py::arg("relative_position"), py::arg("bucket_size"), py::arg("max_position"));
  m.def(
      "deberta_relative_positions",
      [](std::int64_t position_buckets, std::int64_t max_relative_positions, std::int64_t q_len, std::int64_t k_len) {
        const DebertaRelativeSpec spec{.position_buckets = position_buckets,
                                       .max_relative_positions = max_relative_positions};
        return Shaped(DebertaRelativePositions(spec, q_len, k_len), {q_len, k_len});
      },
      py::arg("position_buckets"), py::arg("max_relative_positions"), py::arg("q_len"), py::arg("k_len"));

  // ---- float64 attention references: each returns (scores, probs, output)
  m.def(
      "plain_attention",
      [](DoubleArray q, DoubleArray k, DoubleArray v, std::optional<double> scale, bool causal,
         std::optional<std::int64_t> query_offset, std::optional<ByteArray> key_padding) {
        return RunAttention(Args(q, k, v, scale, causal, query_offset, key_padding), "attention",
                            [](const RelativeAttentionInputs& in) { return reference::PlainAttention(in); });
      },
      POSENC_ATTENTION_ARGS);
  m.def(
      "biased_attention",
      [](DoubleArray q, DoubleArray k, DoubleArray v, std::optional<double> scale, bool causal,
         std::optional<std::int64_t> query_offset, std::optional<ByteArray> key_padding, DoubleArray bias) {
        return RunAttention(
            Args(q, k, v, scale, causal, query_offset, key_padding), "attention",
            [&](const RelativeAttentionInputs& in) { return reference::BiasedAttention(in, Span(bias)); });
      },
      POSENC_ATTENTION_ARGS, py::arg("bias"));
  m.def(
      "alibi_attention",
      [alibi](DoubleArray q, DoubleArray k, DoubleArray v, std::optional<double> scale, bool causal,
              std::optional<std::int64_t> query_offset, std::optional<ByteArray> key_padding, double max_bias,
              const std::string& form) {
        const AlibiSpec spec = alibi(q.ndim() == 4 ? q.shape(1) : 0, max_bias, form);
        return RunAttention(Args(q, k, v, scale, causal, query_offset, key_padding), "alibi",
                            [&](const RelativeAttentionInputs& in) { return reference::AlibiAttention(in, spec); });
      },
      POSENC_ATTENTION_ARGS, py::arg("max_bias"), py::arg("form"));
  m.def(
      "t5_attention",
      [](DoubleArray q, DoubleArray k, DoubleArray v, std::optional<double> scale, bool causal,
         std::optional<std::int64_t> query_offset, std::optional<ByteArray> key_padding, DoubleArray weights,
         std::int64_t num_buckets, std::int64_t max_distance, bool bidirectional) {
        const T5BucketSpec spec = MakeT5(num_buckets, max_distance, bidirectional);
        return RunAttention(
            Args(q, k, v, scale, causal, query_offset, key_padding), "t5_bias",
            [&](const RelativeAttentionInputs& in) { return reference::T5Attention(in, spec, Span(weights)); });
      },
      POSENC_ATTENTION_ARGS, py::arg("weights"), py::arg("num_buckets"), py::arg("max_distance"),
      py::arg("bidirectional"));
  m.def(
      "shaw_attention",
      [](DoubleArray q, DoubleArray k, DoubleArray v, std::optional<double> scale, bool causal,
         std::optional<std::int64_t> query_offset, std::optional<ByteArray> key_padding,
         std::optional<DoubleArray> rel_k, std::optional<DoubleArray> rel_v, std::int64_t max_distance,
         const std::string& distance, bool key_term, bool query_term) {
        RelativeDistance d;
        if (distance == "key-minus-query") {
          d = RelativeDistance::kKeyMinusQuery;
        } else if (distance == "query-minus-key") {
          d = RelativeDistance::kQueryMinusKey;
        } else {
          ThrowError("shaw", "distance", FormatValue(distance), "must be \"key-minus-query\" or \"query-minus-key\"");
        }
        const ShawRelativeSpec spec{.max_distance = max_distance,
                                    .distance = d,
                                    .key_term = key_term,
                                    .query_term = query_term,
                                    .value_term = rel_v.has_value()};
        return RunAttention(Args(q, k, v, scale, causal, query_offset, key_padding), "shaw",
                            [&](const RelativeAttentionInputs& in) {
                              return reference::ShawAttention(in, spec, Span(rel_k), Span(rel_v));
                            });
      },
      POSENC_ATTENTION_ARGS, py::arg("rel_k"), py::arg("rel_v"), py::arg("max_distance"), py::arg("distance"),
      py::arg("key_term"), py::arg("query_term"));
  m.def(
      "xlnet_attention",
      [](DoubleArray q, DoubleArray k, DoubleArray v, std::optional<double> scale, bool causal,
         std::optional<std::int64_t> query_offset, std::optional<ByteArray> key_padding, DoubleArray rel_k,
         DoubleArray r_w_bias, DoubleArray r_r_bias, std::optional<DoubleArray> r_s_bias,
         std::optional<DoubleArray> seg_embed, std::optional<ByteArray> segment_differs) {
        XLNetRelativeInputs rel{.rel_k = Span(rel_k),
                                .r_w_bias = Span(r_w_bias),
                                .r_r_bias = Span(r_r_bias),
                                .r_s_bias = Span(r_s_bias),
                                .seg_embed = Span(seg_embed)};
        if (segment_differs) {
          rel.segment_differs = {segment_differs->data(), static_cast<std::size_t>(segment_differs->size())};
        }
        return RunAttention(Args(q, k, v, scale, causal, query_offset, key_padding), "xlnet",
                            [&](const RelativeAttentionInputs& in) { return reference::XLNetAttention(in, rel); });
      },
      POSENC_ATTENTION_ARGS, py::arg("rel_k"), py::arg("r_w_bias"), py::arg("r_r_bias"), py::arg("r_s_bias"),
      py::arg("seg_embed"), py::arg("segment_differs"));
  m.def(
      "deberta_attention",
      [](DoubleArray q, DoubleArray k, DoubleArray v, std::optional<double> scale, bool causal,
         std::optional<std::int64_t> query_offset, std::optional<ByteArray> key_padding,
         std::optional<DoubleArray> pos_key, std::optional<DoubleArray> pos_query, std::int64_t position_buckets,
         std::int64_t max_relative_positions) {
        const DebertaRelativeSpec spec{.position_buckets = position_buckets,
                                       .max_relative_positions = max_relative_positions,
                                       .c2p = pos_key.has_value(),
                                       .p2c = pos_query.has_value()};
        return RunAttention(Args(q, k, v, scale, causal, query_offset, key_padding), "deberta",
                            [&](const RelativeAttentionInputs& in) {
                              return reference::DebertaAttention(in, spec, Span(pos_key), Span(pos_query));
                            });
      },
      POSENC_ATTENTION_ARGS, py::arg("pos_key"), py::arg("pos_query"), py::arg("position_buckets"),
      py::arg("max_relative_positions"));
}

}  // namespace posenc::python
