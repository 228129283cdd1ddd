// NoPE: nothing to check, nothing to lower.
#include "attention/lowering/encoding_lowering.h"

namespace posenc::detail {

void ValidateEncoding(const NoPositionEncoding&, const EncodingCall&) {}
void LowerEncoding(const NoPositionEncoding&, const AttentionInputs&, AttentionPlan&) {}

}  // namespace posenc::detail
