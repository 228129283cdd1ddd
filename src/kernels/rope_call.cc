// Positions and the argument checks shared by both RoPE implementations.
#include <cstddef>
#include <string>
#include <utility>

#include "posenc/error.h"
#include "posenc/rope.h"

namespace posenc {
namespace {

// [first byte, last byte + 1) a view touches (strides are non-negative).
std::pair<const std::byte*, const std::byte*> ByteRange(const ConstTensorView& view) {
  const auto* begin = static_cast<const std::byte*>(view.data);
  std::int64_t last = 0;
  for (std::size_t d = 0; d < 4; ++d) {
    if (view.shape[d] == 0) return {begin, begin};
    last += (view.shape[d] - 1) * view.strides[d];
  }
  return {begin, begin + (last + 1) * static_cast<std::int64_t>(DTypeSize(view.dtype))};
}

// Each element is rotated once: an out-of-place output may not overlap its
// input, and no operand may write where another reads or writes. Slices of
// one fused qkv tensor interleave in memory without sharing elements, so
// across operands the rule is on start addresses (the same tensor passed
// twice), not on byte ranges.
void RequireNoAliasing(const RopeCall& call) {
  for (std::size_t i = 0; i < call.operands.size(); ++i) {
    const RopeOperand& op = call.operands[i];
    const std::string name = "operands[" + std::to_string(i) + "]";
    if (op.out.data != op.in.data) {
      const auto [in_begin, in_end] = ByteRange(op.in);
      const auto [out_begin, out_end] = ByteRange(static_cast<ConstTensorView>(op.out));
      Require(out_end <= in_begin || in_end <= out_begin, "rope", name + ".out", Verbatim{"overlaps its input"},
              "an output is either the input itself (in place) or separate memory");
    }
    for (std::size_t j = 0; j < i; ++j) {
      const RopeOperand& other = call.operands[j];
      const bool shared = op.out.data == other.out.data || op.out.data == other.in.data || op.in.data == other.out.data;
      Require(!shared || op.in.shape[0] * op.in.shape[1] * op.in.shape[2] * op.in.shape[3] == 0, "rope", name,
              Verbatim{"the same memory as operands[" + std::to_string(j) + "]"},
              "each tensor is rotated once: pass it as one operand");
    }
  }
}

}  // namespace

void ValidateRopeCall(const RopeSpec& spec, const RopeFrequencies& frequencies, const RopeCall& call) {
  spec.Validate();
  Require(static_cast<std::int64_t>(frequencies.inv_freq.size()) == spec.Pairs(), "rope", "inv_freq.size()",
          frequencies.inv_freq.size(), "must equal rotary_dim / 2 = " + std::to_string(spec.Pairs()));
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
