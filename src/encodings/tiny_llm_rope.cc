// The Tiny-LLM course's RoPE over ApplyRope: each offset form is one of the
// kernel's position forms (None: Offset(0), a slice: Offset(start), a slice
// per row: Offsets(starts)), checked first as the course's asserts check it.
// python/posenc/tiny_llm.py makes the same checks with the same messages.
#include "posenc/tiny_llm_rope.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "posenc/error.h"
#include "posenc/rope.h"

namespace posenc {
namespace {

constexpr const char* kOp = "rope";

std::string SliceText(const PositionSlice& slice) {
  return "slice(" + std::to_string(slice.start) + ", " + std::to_string(slice.stop) + ")";
}

RopeSpec SpecOf(std::int64_t dims, std::int64_t seq_len, double base, bool traditional) {
  Require(dims > 0 && dims % 2 == 0, kOp, "dims", dims, "must be even and > 0 (dimensions rotate in pairs)");
  Require(seq_len >= 1, kOp, "seq_len", seq_len, "must be >= 1");
  Require(std::isfinite(base) && base > 1, kOp, "base", base, "must be a finite number > 1");
  RopeSpec spec;
  spec.theta = base;
  spec.head_dim = dims;
  spec.layout = traditional ? RopeLayout::kInterleaved : RopeLayout::kHalfSplit;
  spec.Validate();
  return spec;
}

}  // namespace

RoPE::RoPE(std::int64_t dims, std::int64_t seq_len, double base, bool traditional)
    : spec_(SpecOf(dims, seq_len, base, traditional)), frequencies_(ComputeRopeFrequencies(spec_)), seq_len_(seq_len) {}

std::int64_t RoPE::StartOf(const PositionSlice& slice, const char* name, std::int64_t seq) const {
  const std::string text = SliceText(slice);
  // The length in unsigned arithmetic: stop - start may not fit an int64.
  const bool length_ok =
      slice.stop >= slice.start && static_cast<std::uint64_t>(slice.stop) - static_cast<std::uint64_t>(slice.start) ==
                                       static_cast<std::uint64_t>(seq);
  Require(length_ok, kOp, name, Verbatim{text}, "must have length S = " + std::to_string(seq));
  Require(slice.start >= 0, kOp, name, Verbatim{text}, "must start at position 0 or later");
  Require(slice.stop <= seq_len_, kOp, name, Verbatim{text},
          "must end at or before seq_len = " + std::to_string(seq_len_) + " (the positions this RoPE was built for)");
  return slice.start;
}

void RoPE::operator()(const ConstTensorView& x, const TensorView& out) const {
  RequireDims(x);
  Require(x.seq() <= seq_len_, kOp, "x.shape[1]", x.seq(),
          "must be at most seq_len = " + std::to_string(seq_len_) + " (offset None: positions 0 to S - 1)");
  Apply(x, out, TokenPositions::Offset(0));
}

void RoPE::operator()(const ConstTensorView& x, const TensorView& out, PositionSlice offset) const {
  RequireDims(x);
  Apply(x, out, TokenPositions::Offset(StartOf(offset, "offset", x.seq())));
}

void RoPE::operator()(const ConstTensorView& x, const TensorView& out, std::span<const PositionSlice> offset) const {
  RequireDims(x);
  Require(static_cast<std::int64_t>(offset.size()) == x.batch(), kOp, "offset",
          Verbatim{"a list of " + std::to_string(offset.size()) + " slices"},
          "must have one slice per batch row, N = " + std::to_string(x.batch()));
  std::vector<std::int64_t> starts;
  starts.reserve(offset.size());
  for (std::size_t b = 0; b < offset.size(); ++b) {
    starts.push_back(StartOf(offset[b], ("offset[" + std::to_string(b) + "]").c_str(), x.seq()));
  }
  Apply(x, out, TokenPositions::Offsets(std::move(starts)));
}

void RoPE::RequireDims(const ConstTensorView& x) const {
  Require(x.head_dim() == dims(), kOp, "x.shape[3]", x.head_dim(), "must equal dims = " + std::to_string(dims()));
}

void RoPE::Apply(const ConstTensorView& x, const TensorView& out, TokenPositions positions) const {
  ApplyRope(spec_, frequencies_, RopeCall{{RopeOperand{x, out}}, std::move(positions)});
}

}  // namespace posenc
