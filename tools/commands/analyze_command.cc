// posenc analyze dims | decay | heatmap | linear-map
//
// The numbers behind the usual pictures of positional encodings, as text,
// JSON (--json) or a PNG drawn with gnuplot (--out FILE.png):
//   dims        per RoPE pair: inv_freq, wavelength, rotations within the
//               original length, for the spec and for plain/linear/NTK/YaRN/
//               Llama-3 (and LongRoPE, given its factors) scaling with --factor
//   decay       RoFormer's upper bound on |<R_m q, R_n k>| against distance,
//               with the measured mean for all-ones and random q, k;
//               --compare adds other bases and scaling methods
//   heatmap     <p_m, p_n> of sinusoidal encodings or <R_m q, R_n k> of RoPE;
//               ALiBi's bias per head; T5's bucket of every (query, key); the
//               binary counter beside the sinusoidal table
//   linear-map  max error of p_{k+D} = T(D) p_k (sinusoidal; T also solved
//               back from the encodings) and of RoPE's relative invariance
//               in float64 and float32 (ApplyRope)
#include "commands/analyze_common.h"
#include "commands.h"

namespace posenc::cli {

void AddAnalyzeCommands(CLI::App& app) {
  CLI::App* analyze =
      app.add_subcommand("analyze", "the numbers behind the pictures: dims, decay, heatmap, linear-map");
  analyze->require_subcommand(1);
  analyze::AddDims(*analyze);
  analyze::AddDecay(*analyze);
  analyze::AddHeatmap(*analyze);
  analyze::AddLinearMap(*analyze);
}

}  // namespace posenc::cli
