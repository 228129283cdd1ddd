// The rules of posenc tasks' values that its flags and a tasks grid's file
// share (one rule, one place), each throwing posenc::Error
// "[tasks] --flag = value: rule"; the grid kind is TasksGridKind
// (grid_kind.h).
#pragma once

#include <cstdint>
#include <vector>

#include "posenc/tiny_lm.h"
#include "posenc/tiny_lm_tasks.h"

namespace posenc::cli {

// The seed of the evaluation sequences: the same for every model (so that
// the schemes are compared on the same answers), apart from the training
// seeds' streams.
inline constexpr std::uint64_t kTaskEvalSeed = 0x6576616c75617465ULL;  // "evaluate"

// --lengths: ascending, each once, each in the task's range
// (CheckTinyLmTaskLength), and within the model's reach (CheckTinyLmReach).
void CheckTaskLengths(const TinyLmConfig& config, TinyLmTask task, const std::vector<std::int64_t>& lengths);
// --sequences in [1, 2^20].
void CheckTaskSequences(std::int64_t sequences);
// --depths: at least one, each in [0, 1].
void CheckTaskDepths(const std::vector<double>& depths);
// --previous-share in [0, 1).
void CheckPreviousShare(double share);

}  // namespace posenc::cli
