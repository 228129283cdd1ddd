// A learned absolute table (GPT-2's wpe): row t is added to the input at
// position t. Past its train_length rows an evaluation either stops with an
// error naming the position, or reads Su's hierarchical decomposition of
// the table (learned_table.h), which reaches train_length^2.
#include <algorithm>

#include "posenc/error.h"
#include "posenc/learned_table.h"
#include "train/scheme_trainer.h"
#include "train/tensor_init.h"
#include "train/tiny_lm_internal.h"

namespace posenc::tiny_lm {
namespace {

class LearnedTrainer final : public SchemeTrainer {
 public:
  using SchemeTrainer::SchemeTrainer;

  // "position_embd.weight" [PositionExtent, d] (train_length rows, or
  // position_range when randomized), Normal(0, 0.01) as GPT-2's wpe.
  std::vector<SchemeTensor> Tensors(std::int64_t layer) const override {
    if (layer != kModelWide) return {};
    return {{.name = "position_embd.weight",
             .shape = {config().PositionExtent(), config().d_model},
             .init = [](TinyLmTensor& t, std::uint64_t seed) { FillNormal(t, seed, 0.01); }}};
  }

  std::vector<double> InputPositions(const TinyLmParams& params, std::int64_t length) const override {
    const std::int64_t d = config().d_model, rows = config().PositionExtent();
    const std::vector<float>& table = params.scheme[0].values;
    std::vector<double> out(static_cast<std::size_t>(length * d));
    std::copy_n(table.begin(), std::min(length, rows) * d, out.begin());
    if (length > rows) {
      // Past the table (evaluation; CheckLength allowed it only under
      // kHierarchical): the library's decomposition, alpha = 0.4 (Su's).
      const LearnedTable learned(rows, d, table);
      const LearnedTableSpec spec{.out_of_range = OutOfRangePolicy::kHierarchical};
      for (std::int64_t p = rows; p < length; ++p) {
        const std::vector<double> row = learned.RowF64(spec, p);
        std::copy(row.begin(), row.end(), out.begin() + p * d);
      }
    }
    return out;
  }

  // length <= PositionExtent here (a training call): row p is position p.
  void InputPositionsBackward(const TinyLmParams& /*params*/, std::span<const double> dpositions, std::int64_t length,
                              TinyLmParams& grads) const override {
    std::vector<float>& table = grads.scheme[0].values;
    for (std::int64_t e = 0; e < length * config().d_model; ++e) table[e] += static_cast<float>(dpositions[e]);
  }

  std::optional<PositionEncoding> KernelEncoding(const TinyLmParams& /*params*/,
                                                 std::int64_t /*layer*/) const override {
    return NoPositionEncoding{};  // the positions are in the input, not in attention
  }

  void CheckLength(std::int64_t length, bool /*gradients*/) const override {
    const std::int64_t rows = config().PositionExtent();
    if (length <= rows) return;
    if (config().learned_past_table == LearnedPastTable::kError) {
      ThrowError(kOp, "position", std::to_string(rows),
                 "past the learned position table of " + std::to_string(rows) +
                     " rows (max(train_length, position_range)); evaluate at length <= " + std::to_string(rows) +
                     " or set learned_past_table = hierarchical (Su's decomposition)");
    }
    Require(length <= rows * rows, kOp, "length", length,
            "must be <= rows^2 = " + std::to_string(rows * rows) +
                ", the most the hierarchical decomposition of the learned table reaches");
  }
};

}  // namespace

std::unique_ptr<SchemeTrainer> MakeSchemeTrainer(const LearnedScheme& /*scheme*/, const TinyLmConfig& config) {
  return std::make_unique<LearnedTrainer>(config);
}

}  // namespace posenc::tiny_lm
