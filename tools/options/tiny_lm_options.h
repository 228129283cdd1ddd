// Command-line options shared by the commands that train the tiny model
// (posenc train, posenc zoo): the scheme by name, the model's size and
// every scheme's hyperparameters (flags made from TinyLmConfig's one field
// list), and the optimizer's settings.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "posenc/tiny_lm.h"
#include "posenc/tiny_lm_train.h"

namespace posenc::cli {

// The schemes of a list option (--schemes rope,alibi or --schemes rope
// alibi: each argument split at ','), in the order given, with their
// default fields. Throws posenc::Error naming the flag and the text for an
// empty name (",rope"), a scheme listed twice, or an unknown name.
std::vector<PositionScheme> SchemeListOption(const char* op, const char* flag, const std::vector<std::string>& lists);
// The same, with "all" for every scheme and `default_list` ("rope,alibi")
// when the flag was not given (lists empty).
std::vector<PositionScheme> SchemesOption(const char* op, const char* flag, const std::vector<std::string>& lists,
                                          const char* default_list);

// --seeds: at least one, each >= 0; sorted, each once.
std::vector<std::int64_t> SeedsOption(const char* op, const std::vector<std::int64_t>& seeds);
// --lengths: 1, 2, 4, 8 and 16 x train_length when none are given; sorted,
// each once (each command checks them by its own rule).
std::vector<std::int64_t> TestLengthsOption(const std::vector<std::int64_t>& lengths, std::int64_t train_length);

// The model's flags: one per field of TinyLmConfig::VisitModelFields with
// a flag (--train-len --d-model --layers --heads --ffn) and one per field
// of every scheme (--shaw-clip --t5-buckets --t5-max-distance --rope-theta
// --fire-mlp-width --fire-c ...), each with its default shown.
class TinyLmFlags {
 public:
  TinyLmFlags() = default;
  // The flags' defaults are `defaults`' sizes (posenc tasks' smaller model).
  explicit TinyLmFlags(const TinyLmConfig& defaults) : model_(defaults) {}
  // Registers the flags on `command`; this object must outlive its parse.
  void Add(CLI::App& command);
  // The config of `scheme` (by its alternative) with the flags' values.
  TinyLmConfig Config(const PositionScheme& scheme) const;
  // The model's sizes as parsed (its scheme is the default's).
  const TinyLmConfig& model() const { return model_; }

 private:
  TinyLmConfig model_;
  std::vector<PositionScheme> schemes_{AllPositionSchemes().begin(), AllPositionSchemes().end()};
};

// --batch --lr --min-lr --warmup --weight-decay --grad-clip into `train`
// (the defaults shown are theirs).
void AddTinyLmTrainOptions(CLI::App& command, TinyLmTrainOptions& train);

}  // namespace posenc::cli
