// The posenc command's subcommands; each lives in its own file and adds
// itself to the CLI11 app here.
#pragma once

#include <CLI/CLI.hpp>

namespace posenc::cli {

void AddRopeCommands(CLI::App& app);             // posenc rope freqs
void AddBenchCommands(CLI::App& app);            // posenc bench rope | attention
void AddBenchAttentionCommand(CLI::App& bench);  // posenc bench attention (under `bench`)
void AddBiasCommands(CLI::App& app);             // posenc bias alibi | t5
void AddSinusoidalCommands(CLI::App& app);       // posenc sinusoidal
void AddTableCommands(CLI::App& app);            // posenc table show
void AddAnalyzeCommands(CLI::App& app);          // posenc analyze dims | decay | heatmap | linear-map
void AddPplCommand(CLI::App& app);               // posenc ppl
void AddStudyCommand(CLI::App& app);             // posenc study
void AddGenerateCommand(CLI::App& app);          // posenc generate
void AddPasskeyCommand(CLI::App& app);           // posenc passkey
void AddGridCommands(CLI::App& app);             // posenc grid cell | status | merge
void AddBenchModelCommand(CLI::App& bench);      // posenc bench model (under `bench`)
void AddBenchTrainCommand(CLI::App& bench);      // posenc bench train (under `bench`)
void AddBenchLimitsCommand(CLI::App& bench);     // posenc bench limits (under `bench`)
void AddTrainCommand(CLI::App& app);             // posenc train
void AddEvalCommand(CLI::App& app);              // posenc eval
void AddZooCommand(CLI::App& app);               // posenc zoo
void AddTasksCommand(CLI::App& app);             // posenc tasks

}  // namespace posenc::cli
