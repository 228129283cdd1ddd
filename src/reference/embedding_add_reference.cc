// The plain absolute encodings added to embeddings: one element at a time in
// double precision, rounded once to the output dtype. The fast kernel in
// embedding_add-inl.h is tested against these.
#include <cmath>

#include "posenc/learned_table.h"
#include "posenc/sinusoidal.h"
#include "reference/element_io.h"

namespace posenc::reference {
namespace {

// Adds encoding(position) (double, dim values) to every row of every token.
template <class Encoding>
void AddEncoding(const EmbeddingAddCall& call, Encoding&& encoding) {
  const std::int64_t batch = call.in.shape[0], seq = call.in.shape[1], rows = call.in.shape[2], dim = call.in.shape[3];
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t s = 0; s < seq; ++s) {
      const std::vector<double> pe = encoding(call.positions.At(b, s, seq));
      for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t in = call.in.Offset(b, s, r), out = call.out.Offset(b, s, r);
        for (std::int64_t d = 0; d < dim; ++d) {
          WriteElement(call.out, out + d, call.input_scale * ReadElement(call.in, in + d) + pe[d]);
        }
      }
    }
  }
}

}  // namespace

void AddSinusoidal(const SinusoidalSpec& spec, const EmbeddingAddCall& call) {
  spec.Validate();
  ValidateEmbeddingAddCall("sinusoidal", call, spec.dim);
  const std::vector<double> inv_freq = SinusoidalInvFreq(spec);
  AddEncoding(call, [&](std::int64_t position) {
    std::vector<double> pe(static_cast<std::size_t>(spec.dim), 0.0);
    for (std::int64_t k = 0; k < spec.Pairs(); ++k) {
      const double angle = static_cast<double>(position) * inv_freq[k];
      pe[spec.SinIndex(k)] = std::sin(angle);
      pe[spec.CosIndex(k)] = std::cos(angle);
    }
    return pe;
  });
}

void AddLearnedTable(const LearnedTable& table, const LearnedTableSpec& spec, const EmbeddingAddCall& call) {
  ValidateLearnedTableCall(table, spec, call);
  AddEncoding(call, [&](std::int64_t position) { return table.RowF64(spec, position); });
}

}  // namespace posenc::reference
