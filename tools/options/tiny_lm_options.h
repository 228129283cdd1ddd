// Command-line options shared by the commands that train the tiny model
// (posenc train, posenc zoo): the scheme by name, the model's size and the
// optimizer's settings.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "posenc/tiny_lm.h"
#include "posenc/tiny_lm_train.h"

namespace posenc::cli {

// The scheme called `name`; throws posenc::Error "[op] flag = "name": must
// be one of nope, ..., kerple" otherwise.
PositionScheme SchemeOption(const char* op, const char* flag, const std::string& name);
// The schemes of a list option (--schemes rope,alibi or --schemes rope
// alibi: each argument split at ','), in the order given. Throws
// posenc::Error naming the flag and the text for an empty name (",rope"),
// a scheme listed twice, or an unknown name (SchemeOption).
std::vector<PositionScheme> SchemeListOption(const char* op, const char* flag, const std::vector<std::string>& lists);
// "nope, sinusoidal, ..., kerple".
std::string SchemeList();

// --d-model --layers --heads --ffn --shaw-clip --t5-buckets --t5-max-distance
// --rope-theta into `config`; --batch --lr --min-lr --warmup --weight-decay
// --grad-clip into `train` (the defaults shown are theirs).
void AddTinyLmOptions(CLI::App& command, TinyLmConfig& config, TinyLmTrainOptions& train);

}  // namespace posenc::cli
