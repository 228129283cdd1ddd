// Positions and the argument checks shared by both RoPE implementations.
#include <cmath>
#include <cstddef>
#include <string>
#include <utility>

#include "posenc/error.h"
#include "posenc/rope.h"
#include "util/tensor_overlap.h"

namespace posenc {
namespace {

// Each element is rotated once: an output is its input or separate memory
// and holds each element once, and no operand writes memory another reads
// or writes. Slices of one fused qkv tensor interleave in memory without
// sharing an element, so the test is on elements, not byte ranges
// (tensor_overlap.h).
void RequireNoAliasing(const RopeCall& call) {
  for (std::size_t i = 0; i < call.operands.size(); ++i) {
    const RopeOperand& op = call.operands[i];
    const std::string name = "operands[" + std::to_string(i) + "]";
    RequireSeparateOutput("rope", name + ".out", op.in, op.out);
    for (std::size_t j = 0; j < i; ++j) {
      const RopeOperand& other = call.operands[j];
      Overlap shared = Overlap::kNone;
      for (const auto& [x, y] :
           {std::pair<ConstTensorView, ConstTensorView>{op.out, other.out}, {op.out, other.in}, {op.in, other.out}}) {
        if (shared == Overlap::kNone) shared = SharedMemory(x, y);
      }
      Require(
          shared == Overlap::kNone, "rope", name,
          Verbatim{std::string(shared == Overlap::kShared ? "memory shared with" : "memory that may be shared with") +
                   " operands[" + std::to_string(j) + "]"},
          "each tensor is rotated once: pass it as one operand, and slices of one tensor that do not overlap");
    }
  }
}

}  // namespace

void ValidateRopeCall(const RopeSpec& spec, const RopeFrequencies& frequencies, const RopeCall& call) {
  spec.Validate();
  // The messages are built only for a failing check (Require's lazy form): a
  // decode step makes about two calls a layer.
  Require(static_cast<std::int64_t>(frequencies.inv_freq.size()) == spec.Pairs(), "rope", "inv_freq.size()",
          frequencies.inv_freq.size(), [&] { return "must equal rotary_dim / 2 = " + std::to_string(spec.Pairs()); });
  for (std::size_t k = 0; k < frequencies.inv_freq.size(); ++k) {
    // A caller's table (frequencies=): a NaN or infinite one would rotate every position to NaN.
    Require(
        std::isfinite(frequencies.inv_freq[k]), "rope", [&] { return "inv_freq[" + std::to_string(k) + "]"; },
        frequencies.inv_freq[k], "must be finite");
  }
  Require(!call.operands.empty(), "rope", "operands", 0, "need at least one tensor to rotate");
  const auto& first = call.operands.front().in;
  for (std::size_t i = 0; i < call.operands.size(); ++i) {
    const RopeOperand& op = call.operands[i];
    // The common case without building messages; the checks below name the field.
    if (IsWellFormed(op.in) && IsWellFormed(op.out) && op.in.head_dim() == spec.head_dim &&
        op.in.batch() == first.batch() && op.in.seq() == first.seq() && op.out.shape == op.in.shape &&
        op.out.dtype == op.in.dtype && (op.out.data != op.in.data || op.out.strides == op.in.strides)) {
      continue;
    }
    const std::string name = "operands[" + std::to_string(i) + "]";
    ValidateView(op.in, "rope", (name + ".in").c_str());
    ValidateView(op.out, "rope", (name + ".out").c_str());
    Require(op.in.head_dim() == spec.head_dim, "rope", name + ".head_dim", op.in.head_dim(),
            "must equal the spec's head_dim = " + std::to_string(spec.head_dim));
    Require(op.in.batch() == first.batch(), "rope", name + ".batch", op.in.batch(),
            "must equal operands[0].batch = " + std::to_string(first.batch()));
    Require(op.in.seq() == first.seq(), "rope", name + ".seq", op.in.seq(),
            "must equal operands[0].seq = " + std::to_string(first.seq()));
    Require(op.out.shape == op.in.shape, "rope", name + ".out.shape", Verbatim{"differs"},
            "must equal the input shape");
    Require(op.out.dtype == op.in.dtype, "rope", name + ".out.dtype", DTypeName(op.out.dtype),
            "must equal the input dtype " + std::string(DTypeName(op.in.dtype)));
    Require(op.out.data != op.in.data || op.out.strides == op.in.strides, "rope", name + ".out.strides",
            Verbatim{"differ"}, "an in-place output must have the input's strides");
  }
  RequireNoAliasing(call);
  call.positions.Validate("rope", first.batch(), first.seq());
}

void ApplyRope(const RopeSpec& spec, const RopeCall& call) {
  const auto& first = call.operands.empty() ? ConstTensorView{} : call.operands.front().in;
  ApplyRope(spec, ComputeRopeFrequencies(spec, call.positions.Length(first.batch(), first.seq())), call);
}

}  // namespace posenc
