// Dynamic dispatch of the embedding-add kernel (embedding_add-inl.h) and the
// argument checks shared by the sinusoidal and learned-table entry points.
#include <algorithm>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/embedding_add.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/embedding_add-inl.h"

#if HWY_ONCE
#include <cmath>
#include <string>

#include "posenc/error.h"
#include "util/tensor_overlap.h"

namespace posenc {
namespace detail {

HWY_EXPORT(EmbeddingAddRangeImpl);

void EmbeddingAddRange(const EmbeddingAddPlan& plan, std::int64_t begin, std::int64_t end) {
  HWY_DYNAMIC_DISPATCH(EmbeddingAddRangeImpl)(plan, begin, end);
}

}  // namespace detail

void ValidateEmbeddingAddCall(std::string_view op, const EmbeddingAddCall& call, std::int64_t dim) {
  const std::string op_name(op);
  ValidateView(call.in, op_name.c_str(), "in");
  ValidateView(call.out, op_name.c_str(), "out");
  Require(call.in.shape[3] == dim, op, "in.shape[3]", call.in.shape[3],
          "must equal the encoding's dim = " + std::to_string(dim));
  Require(call.out.shape == call.in.shape, op, "out.shape", Verbatim{"differs"}, "must equal the input shape");
  Require(call.out.dtype == call.in.dtype, op, "out.dtype", DTypeName(call.out.dtype),
          "must equal the input dtype " + std::string(DTypeName(call.in.dtype)));
  Require(call.out.data != call.in.data || call.out.strides == call.in.strides, op, "out.strides", Verbatim{"differ"},
          "an in-place output must have the input's strides");
  RequireSeparateOutput(op, "out", call.in, call.out);  // each row gets its encoding once
  Require(std::isfinite(call.input_scale), op, "input_scale", call.input_scale, "must be finite");
  call.positions.Validate(op, call.in.batch(), call.in.seq());
}

}  // namespace posenc
#endif  // HWY_ONCE
