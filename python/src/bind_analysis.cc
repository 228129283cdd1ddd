// posenc.analysis: the encodings' properties computed in C++ (analysis.h) and
// returned as NumPy arrays and dicts.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "bindings.h"
#include "posenc/analysis.h"
#include "posenc/rope_config.h"

namespace py = pybind11;

namespace posenc::python {
namespace {

py::array_t<double> Matrix(const std::vector<double>& values, std::int64_t rows, std::int64_t cols) {
  py::array_t<double> out({rows, cols});
  std::copy(values.begin(), values.end(), out.mutable_data());
  return out;
}

py::dict DimsOf(const RopeDimsMethod& method) {
  std::vector<double> inv_freq, wavelength, rotations;
  for (const RopeDim& d : method.dims) {
    inv_freq.push_back(d.inv_freq);
    wavelength.push_back(d.wavelength);
    rotations.push_back(d.rotations);
  }
  py::dict out;
  out["method"] = method.method;
  out["factor"] = method.factor;
  out["inv_freq"] = py::array_t<double>(static_cast<py::ssize_t>(inv_freq.size()), inv_freq.data());
  out["wavelength"] = py::array_t<double>(static_cast<py::ssize_t>(wavelength.size()), wavelength.data());
  out["rotations"] = py::array_t<double>(static_cast<py::ssize_t>(rotations.size()), rotations.data());
  return out;
}

SinusoidalSpec Sinusoidal(std::int64_t dim, double base) {
  const SinusoidalSpec spec{.dim = dim, .base = base};
  spec.Validate();
  return spec;
}

}  // namespace

void BindAnalysis(py::module_& m) {
  m.def(
      "rope_dims",
      [](const RopeModelConfig& rope, std::int64_t original_length, double comparison_factor,
         const std::vector<double>& longrope_factors) {
        const RopeDims dims = ComputeRopeDims(rope.spec, original_length, comparison_factor, longrope_factors);
        py::dict out;
        out["original_length"] = dims.original_length;
        out["configured"] = DimsOf(dims.configured);
        py::list comparisons;
        for (const auto& c : dims.comparisons) comparisons.append(DimsOf(c));
        out["comparisons"] = comparisons;
        return out;
      },
      py::arg("spec"), py::arg("original_length"), py::arg("comparison_factor") = 0.0,
      py::arg("longrope_factors") = std::vector<double>{});
  m.def(
      "rope_decay",
      [](const RopeModelConfig& rope, std::int64_t max_distance, std::int64_t step, std::int64_t samples,
         std::uint64_t seed, const std::vector<std::int64_t>& distances) {
        const RopeDecay decay = ComputeRopeDecay(
            rope.spec,
            {.max_distance = max_distance, .step = step, .distances = distances, .samples = samples, .seed = seed});
        std::vector<double> distance, bound, ones, random;
        for (const auto& p : decay.points) {
          distance.push_back(static_cast<double>(p.distance));
          bound.push_back(p.bound);
          ones.push_back(p.ones);
          random.push_back(p.random);
        }
        py::dict out;
        for (auto [key, values] : {std::pair{"distance", &distance}, std::pair{"bound", &bound},
                                   std::pair{"ones", &ones}, std::pair{"random", &random}}) {
          out[key] = py::array_t<double>(static_cast<py::ssize_t>(values->size()), values->data());
        }
        return out;
      },
      py::arg("spec"), py::arg("max_distance"), py::arg("step"), py::arg("samples"), py::arg("seed"),
      py::arg("distances") = std::vector<std::int64_t>{});
  m.def("log_spaced_distances", &LogSpacedDistances, py::arg("max_distance"), py::arg("count"));
  m.def(
      "sinusoidal_linear_map",
      [](std::int64_t dim, double base, std::int64_t positions, std::int64_t max_shift) {
        const auto map = ComputeSinusoidalLinearMap(Sinusoidal(dim, base), positions, max_shift);
        py::dict out;
        out["max_error"] = map.max_error;
        out["error_by_shift"] =
            py::array_t<double>(static_cast<py::ssize_t>(map.error_by_shift.size()), map.error_by_shift.data());
        out["max_solved_deviation"] = map.max_solved_deviation;
        out["solved_deviation_by_shift"] = py::array_t<double>(
            static_cast<py::ssize_t>(map.solved_deviation_by_shift.size()), map.solved_deviation_by_shift.data());
        return out;
      },
      py::arg("dim"), py::arg("base"), py::arg("positions"), py::arg("max_shift"));
  m.def(
      "sinusoidal_shift_matrix",
      [](std::int64_t dim, double base, double delta) {
        return Matrix(SinusoidalShiftMatrix(Sinusoidal(dim, base), delta), dim, dim);
      },
      py::arg("dim"), py::arg("base"), py::arg("delta"));
  m.def(
      "sinusoidal_solve_shift_matrix",
      [](std::int64_t dim, double base, double delta, std::int64_t first, std::int64_t count) {
        return Matrix(SolveSinusoidalShiftMatrix(Sinusoidal(dim, base), delta, first, count), dim, dim);
      },
      py::arg("dim"), py::arg("base"), py::arg("delta"), py::arg("first"), py::arg("count"));
  m.def(
      "binary_digits",
      [](std::int64_t positions, std::int64_t bits) { return Matrix(BinaryDigits(positions, bits), positions, bits); },
      py::arg("positions"), py::arg("bits"));
  m.def(
      "rope_invariance",
      [](const RopeModelConfig& rope, std::int64_t max_position, std::int64_t step, std::uint64_t seed) {
        const RopeInvariance r = ComputeRopeInvariance(rope.spec, max_position, step, seed);
        py::dict out;
        out["max_error_f64"] = r.max_error_f64;
        out["max_error_f32"] = r.max_error_f32;
        out["max_abs_score"] = r.max_abs_score;
        return out;
      },
      py::arg("spec"), py::arg("max_position"), py::arg("step"), py::arg("seed"));
  m.def(
      "sinusoidal_dot_matrix",
      [](std::int64_t dim, double base, std::int64_t positions) {
        return Matrix(SinusoidalDotMatrix(Sinusoidal(dim, base), positions), positions, positions);
      },
      py::arg("dim"), py::arg("base"), py::arg("positions"));
  m.def(
      "rope_score_matrix",
      [](const RopeModelConfig& rope, const std::vector<double>& q, const std::vector<double>& k,
         std::int64_t positions) { return Matrix(RopeScoreMatrix(rope.spec, q, k, positions), positions, positions); },
      py::arg("spec"), py::arg("q"), py::arg("k"), py::arg("positions"));
}

}  // namespace posenc::python
