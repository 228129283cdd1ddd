// posenc._posenc.SchemeCore: the tiny trainer's positional schemes
// (src/train/scheme_trainer.h) to Python, for posenc.torch.PositionScheme:
// each scheme's tensors and their initialization, what it computes from them
// (input rows, each layer's input rows, a layer's attention terms, float64)
// and the gradient of its tensors from the gradients of those (the trainer's
// own backward, not a second one); TinyLmLoss with gradients too, so that a
// model written in PyTorch can be held to the trainer's.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "args.h"
#include "bindings.h"
#include "posenc/error.h"
#include "posenc/rope_config.h"
#include "posenc/tiny_lm.h"
#include "train/scheme_trainer.h"
#include "train/tiny_lm_internal.h"

namespace py = pybind11;

namespace posenc::python {
namespace {

constexpr const char* kOp = "scheme";
using Bytes = py::array_t<std::uint8_t, py::array::c_style | py::array::forcecast>;

template <class Array>
auto Span(const Array& a) {
  return std::span(a.data(), static_cast<std::size_t>(a.size()));
}
using tiny_lm::LayerTermGrads;
using tiny_lm::LayerTerms;
using tiny_lm::RelativeTableTerm;

py::array_t<double> Doubles(const std::vector<double>& values) {
  py::array_t<double> out(static_cast<py::ssize_t>(values.size()));
  std::copy(values.begin(), values.end(), out.mutable_data());
  return out;
}

py::array_t<float> Floats(const TinyLmTensor& t) {
  std::vector<py::ssize_t> shape(t.shape.begin(), t.shape.end());
  py::array_t<float> out(shape);
  std::copy(t.values.begin(), t.values.end(), out.mutable_data());
  return out;
}

// The terms' names, in LayerTerms' order; absent terms are left out.
py::dict TableDict(const RelativeTableTerm& t) {
  py::dict d;
  d["values"] = Doubles(t.values);
  d["per_head"] = t.per_head;
  d["rows"] = t.rows;
  py::array_t<std::int64_t> rows(static_cast<py::ssize_t>(t.row_of_distance.size()));
  std::copy(t.row_of_distance.begin(), t.row_of_distance.end(), rows.mutable_data());
  d["row_of_distance"] = rows;
  return d;
}

std::vector<double> ReadTerm(const py::dict& dterms, const char* name, std::size_t size) {
  if (size == 0) return {};
  std::vector<double> out(size, 0.0);
  if (!dterms.contains(name)) return out;
  const DoubleArray a = py::cast<DoubleArray>(ToArray(dterms[name]));
  Require(static_cast<std::size_t>(a.size()) == size, kOp, std::string("dterms[\"") + name + "\"].size", a.size(),
          "must equal the term's size " + std::to_string(size));
  std::copy(a.data(), a.data() + a.size(), out.begin());
  return out;
}

class SchemeCore {
 public:
  SchemeCore(const std::string& scheme, const py::dict& fields, std::int64_t heads, std::int64_t head_dim,
             std::int64_t layers, std::int64_t train_length) {
    config_.scheme = ParsePositionScheme(scheme, kOp, "scheme");
    // Each bounded first, so that heads * head_dim cannot wrap into a valid width.
    for (const auto& [name, value] : {std::pair{"heads", heads}, std::pair{"head_dim", head_dim}}) {
      Require(value >= 1 && value <= tiny_lm::kMaxWidth, kOp, name, value,
              "must be in [1, " + std::to_string(tiny_lm::kMaxWidth) + "]");
    }
    config_.heads = heads;
    config_.d_model = heads * head_dim;
    config_.layers = layers;
    config_.train_length = train_length;
    std::vector<std::string> known;
    VisitSchemeFields(config_.scheme, [&](const ConfigField& field, auto& member) {
      const std::string key(field.key);
      known.push_back(key);
      if (!fields.contains(key)) return;
      if constexpr (std::is_integral_v<std::remove_reference_t<decltype(member)>>) {
        member = ToInt(kOp, key, fields[key.c_str()]);
      } else {
        member = ToFloat(kOp, key, fields[key.c_str()]);
      }
    });
    for (const auto& item : fields) {
      const auto key = py::cast<std::string>(item.first);
      bool ok = false;
      for (const std::string& k : known) ok = ok || k == key;
      std::string list;
      for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
      Require(ok, kOp, key, Verbatim{Repr(item.second)},
              "is not a field of " + scheme + (list.empty() ? " (it has none)" : " (its fields: " + list + ")"));
    }
    ValidateTinyLmConfig(config_);
    trainer_ = tiny_lm::MakeSchemeTrainer(config_);
  }

  // [(name, shape)] of the scheme's tensors: model-wide, then layer by layer.
  py::list Tensors() const {
    py::list out;
    for (std::int64_t layer = tiny_lm::kModelWide; layer < config_.layers; ++layer) {
      for (const auto& t : trainer_->Tensors(layer)) out.append(py::make_tuple(t.name, t.shape));
    }
    return out;
  }

  // name -> float32 array, initialized as the trainer initializes them.
  py::dict Init(std::uint64_t seed) const {
    const TinyLmParams params = InitTinyLm(config_, seed);
    py::dict out;
    for (const TinyLmTensor* t : TinyLmTensorList(config_, params)) out[t->name.c_str()] = Floats(*t);
    return out;
  }

  py::dict Terms(const py::dict& tensors, std::int64_t layer, std::int64_t length) const {
    CheckCall(layer, length);
    const LayerTerms terms = trainer_->Layer(Params(tensors, false), layer, length);
    py::dict d;
    d["scale"] = terms.scale ? py::cast(*terms.scale) : py::none();
    if (!terms.distance_bias.empty()) d["distance_bias"] = Doubles(terms.distance_bias);
    if (!terms.pair_bias.empty()) d["pair_bias"] = Doubles(terms.pair_bias);
    if (!terms.query_table.empty()) d["query_table"] = TableDict(terms.query_table);
    if (!terms.key_table.empty()) d["key_table"] = TableDict(terms.key_table);
    if (!terms.value_table.empty()) d["value_table"] = TableDict(terms.value_table);
    if (!terms.key_bias.empty()) d["key_bias"] = Doubles(terms.key_bias);
    if (!terms.probability_weight.empty()) d["probability_weight"] = Doubles(terms.probability_weight);
    return d;
  }

  // d loss / d the scheme's tensors from d loss / d each term.
  py::dict Backward(const py::dict& tensors, std::int64_t layer, std::int64_t length, const py::dict& dterms) const {
    CheckCall(layer, length);
    const TinyLmParams params = Params(tensors, false);
    const LayerTerms terms = trainer_->Layer(params, layer, length);
    LayerTermGrads g;
    g.distance_bias = ReadTerm(dterms, "distance_bias", terms.distance_bias.size());
    g.pair_bias = ReadTerm(dterms, "pair_bias", terms.pair_bias.size());
    g.query_table = ReadTerm(dterms, "query_table", terms.query_table.values.size());
    g.key_table = ReadTerm(dterms, "key_table", terms.key_table.values.size());
    g.value_table = ReadTerm(dterms, "value_table", terms.value_table.values.size());
    g.key_bias = ReadTerm(dterms, "key_bias", terms.key_bias.size());
    g.probability_weight = ReadTerm(dterms, "probability_weight", terms.probability_weight.size());
    TinyLmParams grads = ZeroTinyLmParams(config_);
    {
      py::gil_scoped_release release;
      trainer_->LayerBackward(params, layer, length, g, grads);
    }
    return SchemeGrads(grads);
  }

  // The input side: what multiplies token_embd's rows, the rows added at
  // each position ([length, d] or None), the scheme's own input rows for
  // `inputs` [n] at `positions` [T] ([n, d] or None: complex order), each
  // layer's rows added to its attention input ([layers][length, d] or []:
  // FLOATER), and the rotation of q and k (a RopeSpec or None: RoPE).
  double EmbeddingScale() const { return trainer_->EmbeddingScale(); }

  py::object InputPositions(const py::dict& tensors, std::int64_t length) const {
    CheckLength(length, false);
    const std::vector<double> rows = trainer_->InputPositions(Params(tensors, false), length);
    return rows.empty() ? py::none() : py::object(Doubles(rows));
  }
  py::dict InputPositionsBackward(const py::dict& tensors, std::int64_t length, const DoubleArray& drows) const {
    CheckLength(length, true);
    RequireSize("drows.size", drows.size(), length * config_.d_model, "length * d_model");
    TinyLmParams grads = ZeroTinyLmParams(config_);
    trainer_->InputPositionsBackward(Params(tensors, false), Span(drows), length, grads);
    return SchemeGrads(grads);
  }

  py::object InputEmbedding(const py::dict& tensors, const Bytes& inputs, const Int64Array& positions) const {
    CheckEmbeddingCall(inputs, positions);
    const std::vector<double> rows = trainer_->InputEmbedding(Params(tensors, false), Span(inputs), Span(positions));
    return rows.empty() ? py::none() : py::object(Doubles(rows));
  }
  py::dict InputEmbeddingBackward(const py::dict& tensors, const Bytes& inputs, const Int64Array& positions,
                                  const DoubleArray& dx) const {
    CheckEmbeddingCall(inputs, positions);
    RequireSize("dx.size", dx.size(), inputs.size() * config_.d_model, "inputs.size * d_model");
    TinyLmParams grads = ZeroTinyLmParams(config_);
    trainer_->InputEmbeddingBackward(Params(tensors, false), Span(inputs), Span(positions), Span(dx), grads);
    return SchemeGrads(grads);
  }

  py::list LayerInputPositions(const py::dict& tensors, std::int64_t length) const {
    CheckLength(length, false);
    py::list out;
    for (const auto& rows : trainer_->LayerInputPositions(Params(tensors, false), length)) out.append(Doubles(rows));
    return out;
  }
  py::dict LayerInputPositionsBackward(const py::dict& tensors, std::int64_t length, const py::list& drows) const {
    CheckLength(length, true);
    RequireSize("len(drows)", static_cast<py::ssize_t>(drows.size()), config_.layers, "layers");
    std::vector<std::vector<double>> d;
    for (const auto& item : drows) {
      const auto a = py::cast<DoubleArray>(ToArray(item));
      RequireSize("drows[" + std::to_string(d.size()) + "].size", a.size(), length * config_.d_model,
                  "length * d_model");
      d.emplace_back(a.data(), a.data() + a.size());
    }
    TinyLmParams grads = ZeroTinyLmParams(config_);
    trainer_->LayerInputPositionsBackward(Params(tensors, false), length, d, grads);
    return SchemeGrads(grads);
  }

  py::object Rotation() const {
    const std::optional<RopeSpec> spec = trainer_->Rotation();
    return spec ? py::cast(RopeModelConfig{*spec, 0}) : py::none();
  }

  // TinyLmLoss of a whole model (every tensor given) on `tokens` [batch,
  // length + 1]: (mean loss, name -> gradient).
  py::tuple Loss(const py::dict& tensors, const py::array_t<std::uint8_t, py::array::c_style>& tokens,
                 std::int64_t batch, std::int64_t length) const {
    const TinyLmParams params = Params(tensors, true);
    TinyLmParams grads = ZeroTinyLmParams(config_);
    const std::span<const std::uint8_t> bytes(tokens.data(), static_cast<std::size_t>(tokens.size()));
    TinyLmLossResult r;
    {
      py::gil_scoped_release release;
      r = TinyLmLoss(config_, params, bytes, batch, length, &grads);
    }
    py::dict out;
    for (const TinyLmTensor* t : TinyLmTensorList(config_, grads)) out[t->name.c_str()] = Floats(*t);
    return py::make_tuple(r.loss, out);
  }

 private:
  void CheckCall(std::int64_t layer, std::int64_t length) const {
    Require(layer >= 0 && layer < config_.layers, kOp, "layer", layer,
            "must be in [0, layers = " + std::to_string(config_.layers) + ")");
    CheckLength(length, true);
  }

  // A pass's length as the trainer bounds it (ValidateLossCall), then the
  // scheme's own limit (a learned table's rows).
  void CheckLength(std::int64_t length, bool gradients) const {
    Require(length >= 1 && length <= tiny_lm::kMaxLength, kOp, "length", length,
            "must be in [1, " + std::to_string(tiny_lm::kMaxLength) + "]");
    trainer_->CheckLength(length, gradients);
  }

  // The trainer reads these spans by the sizes the other arguments imply.
  static void RequireSize(const std::string& name, py::ssize_t size, std::int64_t expected, const char* as) {
    Require(size == expected, kOp, name, size, "must equal " + std::string(as) + " = " + std::to_string(expected));
  }

  // inputs [n] byte ids at positions [T] (input b T + t at positions[t]).
  static void CheckEmbeddingCall(const Bytes& inputs, const Int64Array& positions) {
    const py::ssize_t n = inputs.size(), length = positions.size();
    Require(length >= 1 && length <= tiny_lm::kMaxLength, kOp, "positions.size", length,
            "must be in [1, " + std::to_string(tiny_lm::kMaxLength) + "]");
    Require(n % length == 0, kOp, "inputs.size", n,
            "must be a multiple of positions.size = " + std::to_string(length) + " (batch * T)");
    for (py::ssize_t t = 0; t < length; ++t) {
      const std::int64_t p = positions.data()[t];
      Require(p >= 0 && p < tiny_lm::kMaxLength, kOp, "positions[" + std::to_string(t) + "]", p,
              "must be in [0, " + std::to_string(tiny_lm::kMaxLength - 1) + "]");
    }
  }

  // The tensors given by name into a model's parameters (the others zero,
  // unless `all` requires every one).
  TinyLmParams Params(const py::dict& tensors, bool all) const {
    TinyLmParams params = ZeroTinyLmParams(config_);
    for (TinyLmTensor* t : TinyLmTensorList(config_, params)) {
      if (!tensors.contains(t->name)) {
        Require(!all, kOp, "tensors[\"" + t->name + "\"]", "missing", "every tensor of the model must be given");
        continue;
      }
      const auto a =
          py::cast<py::array_t<float, py::array::c_style | py::array::forcecast>>(ToArray(tensors[t->name.c_str()]));
      Require(static_cast<std::size_t>(a.size()) == t->values.size(), kOp, "tensors[\"" + t->name + "\"].size",
              a.size(), "must equal " + std::to_string(t->values.size()));
      std::copy(a.data(), a.data() + a.size(), t->values.begin());
    }
    return params;
  }

  py::dict SchemeGrads(const TinyLmParams& grads) const {
    py::dict out;
    for (const TinyLmTensor& t : grads.scheme) out[t.name.c_str()] = Floats(t);
    for (const TinyLmBlock& block : grads.blocks) {
      for (const TinyLmTensor& t : block.scheme) out[t.name.c_str()] = Floats(t);
    }
    return out;
  }

  TinyLmConfig config_;
  std::unique_ptr<tiny_lm::SchemeTrainer> trainer_;
};

}  // namespace

void BindSchemes(py::module_& m) {
  py::class_<SchemeCore>(m, "SchemeCore", "The tiny trainer's positional scheme (posenc.torch.PositionScheme's core).")
      .def(py::init<const std::string&, const py::dict&, std::int64_t, std::int64_t, std::int64_t, std::int64_t>(),
           py::arg("scheme"), py::arg("fields"), py::arg("heads"), py::arg("head_dim"), py::arg("layers"),
           py::arg("train_length"))
      .def("tensors", &SchemeCore::Tensors)
      .def("init", &SchemeCore::Init, py::arg("seed"))
      .def("terms", &SchemeCore::Terms, py::arg("tensors"), py::arg("layer"), py::arg("length"))
      .def("backward", &SchemeCore::Backward, py::arg("tensors"), py::arg("layer"), py::arg("length"),
           py::arg("dterms"))
      .def("embedding_scale", &SchemeCore::EmbeddingScale)
      .def("input_positions", &SchemeCore::InputPositions, py::arg("tensors"), py::arg("length"))
      .def("input_positions_backward", &SchemeCore::InputPositionsBackward, py::arg("tensors"), py::arg("length"),
           py::arg("drows"))
      .def("input_embedding", &SchemeCore::InputEmbedding, py::arg("tensors"), py::arg("inputs"), py::arg("positions"))
      .def("input_embedding_backward", &SchemeCore::InputEmbeddingBackward, py::arg("tensors"), py::arg("inputs"),
           py::arg("positions"), py::arg("dx"))
      .def("layer_input_positions", &SchemeCore::LayerInputPositions, py::arg("tensors"), py::arg("length"))
      .def("layer_input_positions_backward", &SchemeCore::LayerInputPositionsBackward, py::arg("tensors"),
           py::arg("length"), py::arg("drows"))
      .def("rotation", &SchemeCore::Rotation)
      .def("loss", &SchemeCore::Loss, py::arg("tensors"), py::arg("tokens"), py::arg("batch"), py::arg("length"));
}

}  // namespace posenc::python
