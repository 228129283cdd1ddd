// Internal: what each positional encoding means to the attention kernel,
// kept with the encoding (one file per family in this directory):
//
//   ValidateEncoding(e, call)   its rules, as posenc::Error messages
//   AttentionFactor(e)          the factor that multiplies q and k (RoPE's
//                               YaRN/LongRoPE factor; 1 otherwise)
//   LowerEncoding(e, in, plan)  the kernel's inputs: rotated q/k copies,
//                               bias tables, Shaw's per-row terms
//
// Callers go through std::visit with a generic lambda (attention.cc,
// attention_validate.cc, attention_rules.h), which needs an overload for
// every alternative of PositionEncoding: a new encoding does not compile
// until it has all three. The float64 reference's ScoreOf/BiasOf visitors
// hold it to its definition the same way.
#pragma once

#include <cstdint>

#include "attention/attention_plan.h"
#include "posenc/attention.h"

namespace posenc::detail {

// What an encoding's checks need to know about the call.
struct EncodingCall {
  std::int64_t head_dim = 0, v_dim = 0, q_heads = 0;
  AttentionMask mask;
};

void ValidateEncoding(const NoPositionEncoding& e, const EncodingCall& call);
void ValidateEncoding(const RopeEncoding& e, const EncodingCall& call);
void ValidateEncoding(const ReRopeEncoding& e, const EncodingCall& call);
void ValidateEncoding(const SelfExtendEncoding& e, const EncodingCall& call);
void ValidateEncoding(const AlibiEncoding& e, const EncodingCall& call);
void ValidateEncoding(const T5BiasEncoding& e, const EncodingCall& call);
void ValidateEncoding(const ShawEncoding& e, const EncodingCall& call);
void ValidateEncoding(const UrpeEncoding& e, const EncodingCall& call);

inline double AttentionFactor(const NoPositionEncoding&) { return 1.0; }
inline double AttentionFactor(const RopeEncoding& e) { return e.frequencies.attention_factor; }
inline double AttentionFactor(const ReRopeEncoding& e) { return e.frequencies.attention_factor; }
inline double AttentionFactor(const SelfExtendEncoding& e) { return e.frequencies.attention_factor; }
inline double AttentionFactor(const AlibiEncoding&) { return 1.0; }
inline double AttentionFactor(const T5BiasEncoding&) { return 1.0; }
inline double AttentionFactor(const ShawEncoding&) { return 1.0; }
inline double AttentionFactor(const UrpeEncoding&) { return 1.0; }

// Called with in.q_positions resolved (QueryPositions), plan's dense
// q1/k1/v filled (unscaled, unrotated), positions and q_factor set; the scale is folded into q after lowering
// (rotations and per-token scales commute).
void LowerEncoding(const NoPositionEncoding& e, const AttentionInputs& in, AttentionPlan& plan);
void LowerEncoding(const RopeEncoding& e, const AttentionInputs& in, AttentionPlan& plan);
void LowerEncoding(const ReRopeEncoding& e, const AttentionInputs& in, AttentionPlan& plan);
void LowerEncoding(const SelfExtendEncoding& e, const AttentionInputs& in, AttentionPlan& plan);
void LowerEncoding(const AlibiEncoding& e, const AttentionInputs& in, AttentionPlan& plan);
void LowerEncoding(const T5BiasEncoding& e, const AttentionInputs& in, AttentionPlan& plan);
void LowerEncoding(const ShawEncoding& e, const AttentionInputs& in, AttentionPlan& plan);
void LowerEncoding(const UrpeEncoding& e, const AttentionInputs& in, AttentionPlan& plan);

}  // namespace posenc::detail
