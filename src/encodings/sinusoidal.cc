// Sinusoidal encodings: spec checks, float64 tables, and the fast entry point
// (the per-target kernel is embedding_add-inl.h).
#include "posenc/sinusoidal.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "kernels/embedding_add_kernel.h"
#include "posenc/error.h"
#include "posenc/input_file.h"
#include "posenc/parallel.h"

namespace posenc {
namespace {
constexpr const char* kOp = "sinusoidal";
}  // namespace

std::string_view SinusoidalOrderName(SinusoidalOrder order) {
  return order == SinusoidalOrder::kInterleaved ? "interleaved" : "concat";
}

SinusoidalOrder ParseSinusoidalOrder(std::string_view name) {
  if (name == "interleaved") return SinusoidalOrder::kInterleaved;
  if (name == "concat") return SinusoidalOrder::kConcat;
  ThrowError(kOp, "order", FormatValue(name), "must be \"interleaved\" or \"concat\"");
}

std::string_view SinusoidalSpacingName(SinusoidalSpacing spacing) {
  return spacing == SinusoidalSpacing::kPaper ? "paper" : "endpoints";
}

SinusoidalSpacing ParseSinusoidalSpacing(std::string_view name) {
  if (name == "paper") return SinusoidalSpacing::kPaper;
  if (name == "endpoints") return SinusoidalSpacing::kEndpoints;
  ThrowError(kOp, "spacing", FormatValue(name), "must be \"paper\" or \"endpoints\"");
}

void SinusoidalSpec::Validate() const {
  Require(dim > 0, kOp, "dim", dim, "must be > 0");
  Require(dim <= kMaxSinusoidalDim, kOp, "dim", dim,
          "must be <= " + std::to_string(kMaxSinusoidalDim) + " (model widths are at most tens of thousands)");
  Require(std::isfinite(base) && base > 1.0, kOp, "base", base, "must be a finite number > 1");
  Require(order == SinusoidalOrder::kInterleaved || order == SinusoidalOrder::kConcat, kOp, "order",
          static_cast<int>(order), "must be kInterleaved or kConcat");
  if (spacing == SinusoidalSpacing::kEndpoints) {
    Require(Pairs() >= 2, kOp, "dim", dim,
            "must be >= 4 with spacing \"endpoints\" (w_k = base^(-k/(P-1)) needs P >= 2 pairs)");
  } else {
    Require(spacing == SinusoidalSpacing::kPaper, kOp, "spacing", static_cast<int>(spacing),
            "must be kPaper or kEndpoints");
  }
}

std::vector<double> SinusoidalInvFreq(const SinusoidalSpec& spec) {
  spec.Validate();
  const std::int64_t pairs = spec.Pairs();
  std::vector<double> inv_freq(static_cast<std::size_t>(pairs));
  // The paper's 1 / base^(2k/dim); the endpoints form as tensor2tensor and
  // fairseq write it, exp(-k * ln(base) / (P - 1)).
  const double log_increment = pairs > 1 ? std::log(spec.base) / static_cast<double>(pairs - 1) : 0.0;
  for (std::int64_t k = 0; k < pairs; ++k) {
    inv_freq[static_cast<std::size_t>(k)] =
        spec.spacing == SinusoidalSpacing::kPaper
            ? 1.0 / std::pow(spec.base, 2.0 * static_cast<double>(k) / static_cast<double>(spec.dim))
            : std::exp(static_cast<double>(k) * -log_increment);
  }
  return inv_freq;
}

std::vector<double> SinusoidalTable(const SinusoidalSpec& spec, std::span<const double> positions) {
  const std::vector<double> inv_freq = SinusoidalInvFreq(spec);
  for (std::size_t i = 0; i < positions.size(); ++i) {
    Require(std::isfinite(positions[i]), kOp, "positions[" + std::to_string(i) + "]", positions[i], "must be finite");
  }
  const auto dim = static_cast<std::size_t>(spec.dim);
  RequireFitsInMemory(kOp, "positions", static_cast<std::int64_t>(positions.size()), "the float64 table",
                      static_cast<double>(positions.size()) * static_cast<double>(dim), sizeof(double));
  std::vector<double> table(positions.size() * dim, 0.0);  // odd dim: the last stays 0
  for (std::size_t i = 0; i < positions.size(); ++i) {
    double* row = table.data() + i * dim;
    for (std::int64_t k = 0; k < spec.Pairs(); ++k) {
      const double angle = positions[i] * inv_freq[static_cast<std::size_t>(k)];
      row[spec.SinIndex(k)] = std::sin(angle);
      row[spec.CosIndex(k)] = std::cos(angle);
    }
  }
  return table;
}

std::vector<double> SinusoidalTable(const SinusoidalSpec& spec, std::int64_t start, std::int64_t count) {
  spec.Validate();
  Require(count >= 0, kOp, "count", count, "must not be negative");
  Require(start < 0 || count <= std::numeric_limits<std::int64_t>::max() - start, kOp, "start", start,
          "start + count (count = " + std::to_string(count) + ") must fit in a signed 64-bit integer");
  RequireFitsInMemory(kOp, "count", count, "the float64 table",
                      static_cast<double>(count) * static_cast<double>(spec.dim), sizeof(double));
  std::vector<double> positions(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) positions[static_cast<std::size_t>(i)] = static_cast<double>(start + i);
  return SinusoidalTable(spec, positions);
}

void AddSinusoidal(const SinusoidalSpec& spec, const EmbeddingAddCall& call) {
  spec.Validate();
  ValidateEmbeddingAddCall(kOp, call, spec.dim);
  const std::int64_t batch = call.in.batch(), seq = call.in.seq();
  if (batch * seq * call.in.heads() == 0) return;

  // Widest vector anywhere is 64 doubles (SVE 4096-bit); pad to that.
  constexpr std::size_t kPad = 64;
  const std::vector<double> inv_freq = SinusoidalInvFreq(spec);
  detail::EmbeddingAddPlan plan;
  plan.call = &call;
  plan.dim = spec.dim;
  plan.input_scale = static_cast<float>(call.input_scale);
  plan.order = spec.order;
  plan.pairs = spec.Pairs();
  plan.inv_freq_padded.assign(std::max<std::size_t>(1, (inv_freq.size() + kPad - 1) / kPad) * kPad, 0.0);
  std::copy(inv_freq.begin(), inv_freq.end(), plan.inv_freq_padded.begin());
  plan.step_cos_padded.assign(plan.inv_freq_padded.size(), 1.0);
  plan.step_sin_padded.assign(plan.inv_freq_padded.size(), 0.0);
  for (std::size_t k = 0; k < inv_freq.size(); ++k) {
    plan.step_cos_padded[k] = std::cos(inv_freq[k]);
    plan.step_sin_padded[k] = std::sin(inv_freq[k]);
  }
  plan.shared_positions = call.positions.SharedAcrossBatch();
  const std::int64_t items = plan.shared_positions ? seq : batch * seq;
  ParallelFor(items, 4, [&](std::int64_t begin, std::int64_t end) { detail::EmbeddingAddRange(plan, begin, end); });
}

}  // namespace posenc
