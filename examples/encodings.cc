// Encodings added to embeddings: sinusoidal, and a learned table (OPT-style row offset), in place.
//   encodings [TABLE.safetensors|.npy|.gguf TENSOR]   (default: a random 2,050 x 512 table built here)
#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "posenc/error.h"  // posenc::Error
#include "posenc/learned_table.h"
#include "posenc/sinusoidal.h"

int main(int argc, char** argv) try {
  const std::int64_t batch = 2, seq = 8, past = 100;
  std::vector<float> data(batch * seq * 512, 0.0f);  // bf16/f16 work too (std::uint16_t storage, DType::kBF16)
  auto x = posenc::TensorView::Contiguous(data.data(), posenc::DType::kF32, {batch, seq, 1, 512});
  posenc::AddSinusoidal({.dim = 512, .order = posenc::SinusoidalOrder::kInterleaved},  // or kConcat (fairseq)
                        posenc::EmbeddingAddCall::InPlace(x, posenc::TokenPositions::Offset(past)));

  // A trained table from a file, e.g. Load("opt_positions.safetensors", "decoder.embed_positions.weight").
  std::mt19937 rng(0);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> rows(2050 * 512);
  for (float& value : rows) value = normal(rng);
  const posenc::LearnedTable wpe =
      argc == 3 ? posenc::LearnedTable::Load(argv[1], argv[2]) : posenc::LearnedTable(2050, 512, rows);
  std::vector<std::int64_t> ids(batch * seq);  // per-token position ids: row 1 left-padded by 3
  for (std::int64_t s = 0; s < seq; ++s) ids[s] = s, ids[seq + s] = std::max<std::int64_t>(0, s - 3);
  posenc::AddLearnedTable(wpe, {.row_offset = 2 /* OPT */, .out_of_range = posenc::OutOfRangePolicy::kError},
                          posenc::EmbeddingAddCall::InPlace(x, posenc::TokenPositions::Ids(ids)));
  std::printf("x[0][0][0..1] = %.6f %.6f\n", data[0], data[1]);
  return 0;
} catch (const posenc::Error& e) {
  std::fprintf(stderr, "%s\n", e.what());
  return 2;
}
