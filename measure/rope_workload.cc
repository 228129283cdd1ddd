#include "rope_workload.h"

#include <cmath>
#include <cstring>

#include "posenc/error.h"
#include "posenc/input_file.h"

namespace posenc::bench {
namespace {

double ElementAt(const std::uint8_t* data, DType dtype, std::size_t i) {
  switch (dtype) {
    case DType::kF32: return reinterpret_cast<const float*>(data)[i];
    case DType::kF16: return F16ToF32(reinterpret_cast<const std::uint16_t*>(data)[i]);
    case DType::kBF16: return BF16ToF32(reinterpret_cast<const std::uint16_t*>(data)[i]);
  }
  return 0;
}

double MaxAbsDifference(const std::uint8_t* a, const std::uint8_t* b, DType dtype, std::size_t bytes) {
  double worst = 0;
  const std::size_t count = bytes / DTypeSize(dtype);
  for (std::size_t i = 0; i < count; ++i) {
    const double d = std::abs(ElementAt(a, dtype, i) - ElementAt(b, dtype, i));
    worst = std::isnan(d) ? INFINITY : std::max(worst, d);
  }
  return worst;
}

}  // namespace

RopeSpec Llama31RopeSpec(std::int64_t head_dim, RopeLayout layout) {
  return {.theta = 500000.0,
          .head_dim = head_dim,
          .layout = layout,
          .scaling = Llama3Scaling{
              .factor = 8.0, .low_freq_factor = 1.0, .high_freq_factor = 4.0, .original_max_position = 8192}};
}

double RopeTolerance(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 1e-5;
    case DType::kF16: return 2e-3;     // 2 ulp at |y| < 2 is 2^-9
    case DType::kBF16: return 1.6e-2;  // 2 ulp at |y| < 2 is 2^-6
  }
  return 0;
}

RopeWorkload::RopeWorkload(const RopeSpec& spec, const RopeShape& shape, DType dtype)
    : spec_(spec), shape_(shape), dtype_(dtype) {
  Require(shape.tokens > 0, "bench rope", "tokens", shape.tokens, "must be > 0");
  Require(shape.q_heads > 0 && shape.kv_heads > 0, "bench rope", "heads", shape.kv_heads, "must be > 0");
  frequencies_ = ComputeRopeFrequencies(spec_, shape.tokens);
  const std::array<std::int64_t, 4> q_shape{1, shape.tokens, shape.q_heads, spec.head_dim};
  const std::array<std::int64_t, 4> k_shape{1, shape.tokens, shape.kv_heads, spec.head_dim};
  q_bytes_ = static_cast<std::size_t>(shape.tokens * shape.q_heads * spec.head_dim) * DTypeSize(dtype);
  k_bytes_ = static_cast<std::size_t>(shape.tokens * shape.kv_heads * spec.head_dim) * DTypeSize(dtype);
  // q, k, and the naive peer's copy of both.
  RequireFitsInMemory("bench rope", "tokens", shape.tokens, "q and k (and the peer's copy)",
                      2.0 * static_cast<double>(q_bytes_ + k_bytes_), 1);
  q_ = hwy::AllocateAligned<std::uint8_t>(q_bytes_);
  k_ = hwy::AllocateAligned<std::uint8_t>(k_bytes_);
  Require(q_ != nullptr && k_ != nullptr, "bench rope", "tokens", shape.tokens,
          "q and k (" + std::to_string(q_bytes_ + k_bytes_) + " bytes) cannot be allocated");
  views_ = {TensorView::Contiguous(q_.get(), dtype, q_shape), TensorView::Contiguous(k_.get(), dtype, k_shape)};
  call_.operands = {RopeOperand::InPlace(views_[0]), RopeOperand::InPlace(views_[1])};
  call_.positions = RopePositions::Offset(0);
  Fill();
}

void RopeWorkload::Fill(std::uint32_t seed) {
  std::uint32_t state = seed * 2654435761u + 12345u;
  for (const TensorView& view : views_) {
    const std::size_t count = static_cast<std::size_t>(view.batch() * view.seq() * view.heads() * view.head_dim());
    for (std::size_t i = 0; i < count; ++i) {
      state = state * 1664525u + 1013904223u;  // LCG: values need only look random
      const float value = static_cast<float>(state >> 8) * (2.0f / 16777216.0f) - 1.0f;
      switch (dtype_) {
        case DType::kF32: static_cast<float*>(view.data)[i] = value; break;
        case DType::kF16: static_cast<std::uint16_t*>(view.data)[i] = F32ToF16(value); break;
        case DType::kBF16: static_cast<std::uint16_t*>(view.data)[i] = F32ToBF16(value); break;
      }
    }
  }
}

void RopeWorkload::RunFast() { ApplyRope(spec_, frequencies_, call_); }

void RopeWorkload::RunNaive() { naive_(spec_, frequencies_, 0, views_); }

void RopeWorkload::PrepareNaiveTables() { naive_.BuildTables(spec_, frequencies_, 0, shape_.tokens); }

void RopeWorkload::RunNaiveApplyOnly() { naive_.Apply(spec_, views_); }

template <class Run>
RopeCheck RopeWorkload::Check(Run&& run, double tolerance) {
  Fill();
  // The reference reads the original values and writes separate outputs.
  std::vector<std::uint8_t> q_ref(q_.get(), q_.get() + q_bytes_);
  std::vector<std::uint8_t> k_ref(k_.get(), k_.get() + k_bytes_);
  RopeCall ref_call = call_;
  ref_call.operands = {RopeOperand::InPlace(TensorView{q_ref.data(), dtype_, views_[0].shape, views_[0].strides}),
                       RopeOperand::InPlace(TensorView{k_ref.data(), dtype_, views_[1].shape, views_[1].strides})};
  reference::ApplyRope(spec_, frequencies_, ref_call);
  run();
  RopeCheck check{.tolerance = tolerance};
  check.max_error = std::max(MaxAbsDifference(q_.get(), q_ref.data(), dtype_, q_bytes_),
                             MaxAbsDifference(k_.get(), k_ref.data(), dtype_, k_bytes_));
  Fill();
  return check;
}

RopeCheck RopeWorkload::CheckFast() {
  return Check([this] { RunFast(); }, RopeTolerance(dtype_));
}

RopeCheck RopeWorkload::CheckNaive() {
  const double angle_error = 1e-6 * static_cast<double>(shape_.tokens);
  return Check([this] { RunNaive(); }, RopeTolerance(dtype_) + angle_error);
}

}  // namespace posenc::bench
