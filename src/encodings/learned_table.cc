// Learned position tables: lookups under the out-of-range policies and the
// fast add (the kernel is embedding_add-inl.h, shared with the sinusoid).
#include "posenc/learned_table.h"

#include <cmath>
#include <limits>
#include <string>

#include "kernels/embedding_add_kernel.h"
#include "posenc/error.h"
#include "posenc/input_file.h"
#include "posenc/parallel.h"

namespace posenc {
namespace {
constexpr const char* kOp = "learned_table";
}  // namespace

std::string_view OutOfRangePolicyName(OutOfRangePolicy policy) {
  switch (policy) {
    case OutOfRangePolicy::kError: return "error";
    case OutOfRangePolicy::kClamp: return "clamp";
    case OutOfRangePolicy::kHierarchical: return "hierarchical";
  }
  return "?";
}

OutOfRangePolicy ParseOutOfRangePolicy(std::string_view name) {
  if (name == "error") return OutOfRangePolicy::kError;
  if (name == "clamp") return OutOfRangePolicy::kClamp;
  if (name == "hierarchical") return OutOfRangePolicy::kHierarchical;
  ThrowError(kOp, "out_of_range", FormatValue(name), "must be \"error\", \"clamp\" or \"hierarchical\"");
}

void LearnedTableSpec::Validate() const {
  Require(row_offset >= 0, kOp, "row_offset", row_offset, "must not be negative");
  Require(out_of_range == OutOfRangePolicy::kError || out_of_range == OutOfRangePolicy::kClamp ||
              out_of_range == OutOfRangePolicy::kHierarchical,
          kOp, "out_of_range", static_cast<int>(out_of_range), "must be kError, kClamp or kHierarchical");
  if (out_of_range == OutOfRangePolicy::kHierarchical) {
    Require(std::isfinite(alpha) && alpha >= 0.0 && alpha < 1.0, kOp, "alpha", alpha,
            "must be in [0, 1) (u_i divides by 1 - alpha)");
  }
}

LearnedTable::LearnedTable(std::int64_t rows, std::int64_t dim, std::vector<float> values, std::string source_dtype)
    : rows_(rows), dim_(dim), values_(std::move(values)), source_dtype_(std::move(source_dtype)) {
  Require(rows > 0, kOp, "rows", rows, "must be > 0");
  Require(dim > 0, kOp, "dim", dim, "must be > 0");
  Require(
      static_cast<std::int64_t>(values_.size()) / rows == dim && static_cast<std::int64_t>(values_.size()) % rows == 0,
      kOp, "values.size()", values_.size(),
      "must equal rows * dim = " + std::to_string(rows) + " * " + std::to_string(dim));
  for (std::size_t i = 0; i < values_.size(); ++i) {
    Require(std::isfinite(values_[i]), kOp, "values[" + std::to_string(i) + "]", values_[i],
            "must be finite (a NaN or Inf row would poison every token at that position)");
  }
}

std::int64_t LearnedTable::Capacity(const LearnedTableSpec& spec) const {
  const std::int64_t usable = rows_ - spec.row_offset;
  if (usable <= 0) return 0;
  switch (spec.out_of_range) {
    case OutOfRangePolicy::kClamp: return std::numeric_limits<std::int64_t>::max();
    case OutOfRangePolicy::kHierarchical:
      return usable > std::numeric_limits<std::int64_t>::max() / usable ? std::numeric_limits<std::int64_t>::max()
                                                                        : usable * usable;
    case OutOfRangePolicy::kError: break;
  }
  return usable;
}

namespace {

void RequirePosition(const LearnedTable& table, const LearnedTableSpec& spec, std::int64_t position,
                     std::string_view name) {
  Require(position >= 0, kOp, name, position, "must not be negative");
  const std::int64_t usable = table.rows() - spec.row_offset;
  const std::int64_t capacity = table.Capacity(spec);
  if (position < capacity) return;
  std::string rule = "must be < " + std::to_string(capacity);
  if (spec.out_of_range == OutOfRangePolicy::kHierarchical) {
    rule += " = (rows " + std::to_string(table.rows()) + " - row_offset " + std::to_string(spec.row_offset) +
            ")^2, the most the hierarchical decomposition reaches";
  } else {
    rule += " (rows " + std::to_string(table.rows()) + " - row_offset " + std::to_string(spec.row_offset) +
            ") under out_of_range = error; clamp or hierarchical extend the table";
  }
  (void)usable;
  ThrowError(kOp, name, FormatValue(position), rule);
}

}  // namespace

std::vector<double> LearnedTable::RowF64(const LearnedTableSpec& spec, std::int64_t position) const {
  spec.Validate();
  Require(spec.row_offset < rows_, kOp, "row_offset", spec.row_offset,
          "must be < rows = " + std::to_string(rows_) + " (no usable row left)");
  RequirePosition(*this, spec, position, "position");
  const std::int64_t usable = rows_ - spec.row_offset;
  std::vector<double> row(static_cast<std::size_t>(dim_));
  const auto usable_row = [&](std::int64_t r) { return RowData(spec.row_offset + r); };
  if (position < usable || spec.out_of_range == OutOfRangePolicy::kClamp) {
    const float* p = usable_row(std::min(position, usable - 1));
    for (std::int64_t d = 0; d < dim_; ++d) row[d] = p[d];
    return row;
  }
  // Hierarchical: m = i n + j, q_m = alpha u_i + (1 - alpha) u_j with
  // u_x = (p_x - alpha p_0) / (1 - alpha).
  const double alpha = spec.alpha;
  const float* p0 = usable_row(0);
  const float* pi = usable_row(position / usable);
  const float* pj = usable_row(position % usable);
  for (std::int64_t d = 0; d < dim_; ++d) {
    const double ui = (pi[d] - alpha * p0[d]) / (1.0 - alpha);
    const double uj = (pj[d] - alpha * p0[d]) / (1.0 - alpha);
    row[d] = alpha * ui + (1.0 - alpha) * uj;
  }
  return row;
}

std::vector<float> LearnedTable::Lookup(const LearnedTableSpec& spec, std::int64_t position) const {
  const std::vector<double> row = RowF64(spec, position);
  return std::vector<float>(row.begin(), row.end());
}

std::vector<float> LearnedTable::Gather(const LearnedTableSpec& spec, std::span<const std::int64_t> positions) const {
  std::vector<float> out;
  out.reserve(BufferElements(kOp, "positions.size()", static_cast<std::int64_t>(positions.size()),
                             "the gathered [positions, dim] rows", {static_cast<std::int64_t>(positions.size()), dim_},
                             sizeof(float)));
  for (const std::int64_t p : positions) {
    const std::vector<float> row = Lookup(spec, p);
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

void ValidateLearnedTableCall(const LearnedTable& table, const LearnedTableSpec& spec, const EmbeddingAddCall& call) {
  spec.Validate();
  Require(table.rows() > 0, kOp, "table.rows", table.rows(), "must be > 0 (an empty table)");
  Require(spec.row_offset < table.rows(), kOp, "row_offset", spec.row_offset,
          "must be < rows = " + std::to_string(table.rows()) + " (no usable row left)");
  ValidateEmbeddingAddCall(kOp, call, table.dim());
  const std::int64_t batch = call.in.shape[0], seq = call.in.shape[1], rows = call.in.shape[2], dim = call.in.shape[3];
  (void)rows;
  (void)dim;
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t s = 0; s < seq; ++s) {
      RequirePosition(table, spec, call.positions.At(b, s, seq),
                      "position[" + std::to_string(b) + ", " + std::to_string(s) + "]");
    }
  }
}

void AddLearnedTable(const LearnedTable& table, const LearnedTableSpec& spec, const EmbeddingAddCall& call) {
  ValidateLearnedTableCall(table, spec, call);
  const std::int64_t batch = call.in.batch(), seq = call.in.seq();
  if (batch * seq * call.in.heads() == 0) return;
  const std::int64_t usable = table.rows() - spec.row_offset;
  detail::EmbeddingAddPlan plan;
  plan.call = &call;
  plan.dim = table.dim();
  plan.input_scale = static_cast<float>(call.input_scale);
  plan.table_row = [&](std::int64_t position, float* scratch) -> const float* {
    if (position < usable) return table.RowData(spec.row_offset + position);
    if (spec.out_of_range == OutOfRangePolicy::kClamp) return table.RowData(table.rows() - 1);
    const std::vector<double> row = table.RowF64(spec, position);
    for (std::size_t d = 0; d < row.size(); ++d) scratch[d] = static_cast<float>(row[d]);
    return scratch;
  };
  plan.shared_positions = call.positions.SharedAcrossBatch();
  const std::int64_t items = plan.shared_positions ? seq : batch * seq;
  ParallelFor(items, 4, [&](std::int64_t begin, std::int64_t end) { detail::EmbeddingAddRange(plan, begin, end); });
}

}  // namespace posenc
