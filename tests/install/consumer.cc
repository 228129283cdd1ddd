// Rotates one vector through the installed library; exits 0 if it worked.
#include <cmath>
#include <cstdio>

#include "posenc/rope.h"

int main() {
  const posenc::RopeSpec spec{.theta = 10000, .head_dim = 4};
  float x[4] = {1, 0, 0, 0};
  posenc::ApplyRope(spec, posenc::RopeCall{.operands = {posenc::RopeOperand::InPlace(
                                               posenc::TensorView::Contiguous(x, posenc::DType::kF32, {1, 1, 1, 4}))},
                                           .positions = posenc::RopePositions::Offset(1)});
  // Pair (0, 2) turns by 1 radian: (cos 1, sin 1).
  const bool ok = std::abs(x[0] - std::cos(1.0f)) < 1e-6f && std::abs(x[2] - std::sin(1.0f)) < 1e-6f;
  std::printf("consumer: x = [%g %g %g %g] %s\n", x[0], x[1], x[2], x[3], ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
