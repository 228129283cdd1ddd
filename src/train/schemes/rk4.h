// The classical fourth-order Runge-Kutta step of dy/dt = f(t, y), and its
// exact discrete backward (reverse mode through the four stages: the
// gradients of the unrolled steps, not the adjoint ODE). FLOATER integrates
// its position dynamics with it.
//
//   k1 = f(t, y1),         y1 = y
//   k2 = f(t + h/2, y2),   y2 = y + h/2 k1
//   k3 = f(t + h/2, y3),   y3 = y + h/2 k2
//   k4 = f(t + h, y4),     y4 = y + h k3
//   y' = y + h/6 (k1 + 2 k2 + 2 k3 + k4)
#pragma once

#include <array>
#include <cstddef>
#include <vector>

namespace posenc::tiny_lm {

// The four stage inputs of one step, kept for the backward.
using Rk4Stages = std::array<std::vector<double>, 4>;

// field(t, y, out) writes f(t, y) into out (same size as y). y advances by
// one step of size h; stages (if non-null) receives y1..y4.
template <class Field>
void Rk4Step(const Field& field, double t, double h, std::vector<double>& y, Rk4Stages* stages) {
  const std::size_t n = y.size();
  const double times[4] = {t, t + h / 2, t + h / 2, t + h};
  const double into[4] = {0.0, h / 2, h / 2, h};  // stage s reads y + into[s] k_{s-1}
  const double weights[4] = {h / 6, h / 3, h / 3, h / 6};
  std::vector<double> input = y, k(n), sum(n, 0.0);
  for (int s = 0; s < 4; ++s) {
    if (s > 0) {
      for (std::size_t e = 0; e < n; ++e) input[e] = y[e] + into[s] * k[e];
    }
    if (stages) (*stages)[s] = input;
    field(times[s], input, k);
    for (std::size_t e = 0; e < n; ++e) sum[e] += weights[s] * k[e];
  }
  for (std::size_t e = 0; e < n; ++e) y[e] += sum[e];
}

// a = dL/dy' on entry, dL/dy on return. vjp(t, y_s, g, gy) writes
// gy = (df/dy at (t, y_s))^T g and adds g's share to the field's parameter
// gradients.
template <class Vjp>
void Rk4StepBackward(const Vjp& vjp, double t, double h, const Rk4Stages& stages, std::vector<double>& a) {
  const std::size_t n = a.size();
  const double times[4] = {t, t + h / 2, t + h / 2, t + h};
  const double into[4] = {0.0, h / 2, h / 2, h};
  const double weights[4] = {h / 6, h / 3, h / 3, h / 6};
  const std::vector<double> out = a;  // dL/dy'
  std::vector<double> g(n), gy(n, 0.0);
  for (int s = 3; s >= 0; --s) {
    // dL/dk_s: its weight in y', and through y_{s+1} = y + into[s+1] k_s.
    for (std::size_t e = 0; e < n; ++e) g[e] = weights[s] * out[e] + (s < 3 ? into[s + 1] * gy[e] : 0.0);
    vjp(times[s], stages[static_cast<std::size_t>(s)], g, gy);
    for (std::size_t e = 0; e < n; ++e) a[e] += gy[e];  // y_s = y + ...: dL/dy gains dL/dy_s
  }
}

}  // namespace posenc::tiny_lm
