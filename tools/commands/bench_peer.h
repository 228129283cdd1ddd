// llama.cpp beside posenc in `posenc bench model --peer DIR` (issue 52):
// llama.cpp's own benchmark programs, built from a pinned source by
// scripts/bench-peer, run on the same GGUF with the same thread count, one
// measurement at a time between posenc's, so that both sample the same
// minutes of a shared machine.
//
//   prompt prefill: llama-bench pp<n> (its batch asks for the last row's
//     logits only, as generation does);
//   perplexity pass: llama-perplexity over windows of n tokens (it computes
//     the logits of each window's scored second half only), its own "prompt
//     eval" tokens/s over the windows;
//   decode: llama-bench tg<steps> after d cached tokens (-d d).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace posenc::cli {

struct PeerOptions {
  std::string dir;    // holds llama-bench and llama-perplexity
  std::string model;  // the GGUF posenc runs
  std::string text;   // llama-perplexity's text (posenc's pass: the same work on random tokens)
  int threads = 2;
  int reps = 2;  // llama-bench repetitions (the best counts, as posenc's)
};

class LlamaCppPeer {
 public:
  // Throws posenc::Error naming --peer when DIR lacks either program.
  explicit LlamaCppPeer(PeerOptions options);

  // Tokens/s, the best of the repetitions.
  double PromptPrefill(std::int64_t tokens) const;
  double Decode(std::int64_t cached, std::int64_t steps) const;
  // Tokens/s over `windows` windows of `tokens` (llama.cpp reports their mean).
  double PerplexityPass(std::int64_t tokens, std::int64_t windows) const;
  // "llama.cpp COMMIT" as llama-bench reports it, after a run.
  const std::string& Build() const { return build_; }

 private:
  // llama-bench's JSON for one test: the best of its samples' tokens/s.
  double BenchBest(const std::vector<std::string>& args) const;
  PeerOptions o_;
  mutable std::string build_;
};

// The machine a comparison ran on: the CPU's model name and the SIMD flags
// that matter here (/proc/cpuinfo), and the load averages (/proc/loadavg).
std::string CpuDescription();
std::string LoadAverages();

}  // namespace posenc::cli
