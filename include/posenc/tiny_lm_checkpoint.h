// Checkpoints of the tiny byte-level model (tiny_lm.h) as GGUF files: the
// config as metadata, every tensor as float32, and how it was trained.
//
//   general.architecture               "posenc-tiny-lm"
//   general.name                       info.name, or "tiny-lm-<scheme>-L<train_length>"
//   posenc-tiny-lm.scheme              PositionSchemeName: "rope", "alibi", ...
//   posenc-tiny-lm.<key>               every field of TinyLmConfig::VisitFields
//                                      (int64 or float64): .train_length
//                                      .d_model .layers .heads .ffn_hidden
//                                      .norm_eps, then the scheme's own
//                                      (.rope_theta, .shaw_clip, .t5_buckets,
//                                      .t5_max_distance, .fire_mlp_width,
//                                      .fire_c); keys of other schemes are
//                                      ignored when read
//   posenc-tiny-lm.training.seed       int64, and .tokens .steps .batch
//   posenc-tiny-lm.training.lr         float64 (the peak), and .final_loss
//   posenc-tiny-lm.training.corpus     string: what it was trained on
//   posenc-tiny-lm.training.corpus_byte_counts   int64[256]: the corpus's
//                                      byte frequencies (the unigram baseline)
//   posenc-tiny-lm.training.posenc_version       the posenc that wrote it
//
// Tensors in TinyLmTensorList order with their TinyLm names; GGUF's ne is
// the shape reversed (token_embd.weight [256, d] is ne {d, 256}), as
// llama.cpp stores PyTorch's tensors. The file is written atomically
// (GgufWriter::Write): a failed or interrupted save leaves the old file.
// learned_past_table is not stored: it is a choice of the evaluation.
#pragma once

#include <cstdint>
#include <string>

#include "posenc/tiny_lm.h"
#include "posenc/tiny_lm_eval.h"

namespace posenc {

inline constexpr const char* kTinyLmArchitecture = "posenc-tiny-lm";

struct TinyLmTrainingInfo {
  std::string name;  // general.name; empty: "tiny-lm-<scheme>-L<train_length>"
  std::int64_t seed = 0;
  std::int64_t tokens = 0;  // predicted bytes trained on
  std::int64_t steps = 0;
  std::int64_t batch = 0;
  double lr = 0.0;  // the peak learning rate
  double final_loss = 0.0;
  std::string corpus;               // a file name, or any label
  ByteCounts corpus_byte_counts{};  // all zero: unknown
  std::string posenc_version;       // Save writes its own version (this field is ignored); Load reads the file's
};

struct TinyLmCheckpoint {
  TinyLmConfig config;  // learned_past_table = kError: set it for an evaluation past the table
  TinyLmParams params;
  TinyLmTrainingInfo info;
};

// The version of posenc that this library is ("0.1.0").
const char* PosencVersion();

// Validates config and params (ValidateTinyLmParams) and writes the file.
// Throws posenc::Error naming the path when it cannot be written.
void SaveTinyLmCheckpoint(const std::string& path, const TinyLmConfig& config, const TinyLmParams& params,
                          const TinyLmTrainingInfo& info);

// Reads a checkpoint. Throws posenc::Error "PATH: [checkpoint] ..." naming
// the file and what is wrong: a truncated or corrupt file (the GGUF
// reader's message), another architecture, an unknown scheme, a missing or
// mistyped key, a config that breaks its rules, a missing tensor, one with
// the wrong shape or type, one the config's model does not have, or a NaN or
// infinite weight ("blk.0.ffn_up.weight[17] = nan: must be finite").
TinyLmCheckpoint LoadTinyLmCheckpoint(const std::string& path);

}  // namespace posenc
