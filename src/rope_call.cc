// Positions and the argument checks shared by both RoPE implementations.
#include <algorithm>
#include <string>

#include "posenc/error.h"
#include "posenc/rope.h"

namespace posenc {

RopePositions RopePositions::Offset(std::int64_t start) {
  RopePositions p;
  p.start_ = start;
  return p;
}

RopePositions RopePositions::Offsets(std::vector<std::int64_t> offsets) {
  RopePositions p;
  p.offsets_ = std::move(offsets);
  return p;
}

RopePositions RopePositions::Ids(std::vector<std::int64_t> ids) {
  RopePositions p;
  p.ids_ = std::move(ids);
  return p;
}

void RopePositions::Validate(std::int64_t batch, std::int64_t seq) const {
  if (!ids_.empty()) {
    Require(static_cast<std::int64_t>(ids_.size()) == batch * seq, "rope", "position_ids.size()",
            ids_.size(), "must equal batch * seq = " + std::to_string(batch * seq));
    for (std::size_t i = 0; i < ids_.size(); ++i) {
      Require(ids_[i] >= 0, "rope", "position_ids[" + std::to_string(i) + "]", ids_[i],
              "must not be negative");
    }
  } else if (!offsets_.empty()) {
    Require(static_cast<std::int64_t>(offsets_.size()) == batch, "rope", "offsets.size()",
            offsets_.size(), "must equal batch = " + std::to_string(batch) + " (one per sequence)");
    for (std::size_t b = 0; b < offsets_.size(); ++b) {
      Require(offsets_[b] >= 0, "rope", "offsets[" + std::to_string(b) + "]", offsets_[b],
              "must not be negative");
    }
  } else {
    Require(start_ >= 0, "rope", "offset", start_, "must not be negative");
  }
}

std::int64_t RopePositions::Length(std::int64_t batch, std::int64_t seq) const {
  if (batch == 0 || seq == 0) return 0;
  if (!ids_.empty()) return *std::max_element(ids_.begin(), ids_.end()) + 1;
  if (!offsets_.empty()) return *std::max_element(offsets_.begin(), offsets_.end()) + seq;
  return start_ + seq;
}

void ValidateRopeCall(const RopeSpec& spec, const RopeFrequencies& frequencies, const RopeCall& call) {
  spec.Validate();
  Require(static_cast<std::int64_t>(frequencies.inv_freq.size()) == spec.Pairs(), "rope",
          "inv_freq.size()", frequencies.inv_freq.size(),
          "must equal rotary_dim / 2 = " + std::to_string(spec.Pairs()));
  Require(!call.operands.empty(), "rope", "operands", 0, "need at least one tensor to rotate");
  const auto& first = call.operands.front().in;
  for (std::size_t i = 0; i < call.operands.size(); ++i) {
    const RopeOperand& op = call.operands[i];
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
    Require(op.out.data != op.in.data || op.out.strides == op.in.strides, "rope",
            name + ".out.strides", Verbatim{"differ"}, "an in-place output must have the input's strides");
  }
  call.positions.Validate(first.batch(), first.seq());
}

void ApplyRope(const RopeSpec& spec, const RopeCall& call) {
  const auto& first = call.operands.empty() ? ConstTensorView{} : call.operands.front().in;
  ApplyRope(spec, ComputeRopeFrequencies(spec, call.positions.Length(first.batch(), first.seq())),
            call);
}

}  // namespace posenc
