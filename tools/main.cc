// posenc: positional encodings for transformers, from the command line.
//
// Exit status: 0 success; 2 bad input (a posenc::Error or a usage error,
// with a message naming the parameter, the value and the rule); 1 anything
// else (I/O failures, allocation failures).
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include "commands.h"
#include "options/integer_options.h"
#include "posenc/error.h"

namespace {

// CLI11 answers an unknown first word with "A subcommand is required";
// name the word and the commands instead.
bool IsUnknownCommand(const CLI::App& app, int argc, char** argv, std::string* known) {
  if (argc < 2 || argv[1][0] == '-') return false;
  bool found = false;
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (!known->empty()) *known += ", ";
    *known += sub->get_name();
    found = found || sub->check_name(argv[1]);
  }
  return !found;
}

// Output that could not be written (a full disk, /dev/full, a closed pipe)
// must not end in exit status 0 with an empty or cut file.
bool StandardOutputWritten() {
  std::cout.flush();
  return std::cout.good() && std::fflush(stdout) == 0 && !std::ferror(stdout);
}

// Parses the command line and runs its command; returns the exit status.
int Run(int argc, char** argv) {
  CLI::App app{"posenc: positional encodings for transformers — compute, apply, measure"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "posenc " POSENC_VERSION);
  posenc::cli::AddRopeCommands(app);
  posenc::cli::AddBenchCommands(app);
  posenc::cli::AddBiasCommands(app);
  posenc::cli::AddSinusoidalCommands(app);
  posenc::cli::AddTableCommands(app);
  posenc::cli::AddAnalyzeCommands(app);
  posenc::cli::AddPplCommand(app);
  posenc::cli::AddStudyCommand(app);
  posenc::cli::AddGenerateCommand(app);
  posenc::cli::AddPasskeyCommand(app);
  posenc::cli::AddGridCommands(app);
  posenc::cli::AddTrainCommand(app);
  posenc::cli::AddEvalCommand(app);
  posenc::cli::AddZooCommand(app);
  posenc::cli::AddTasksCommand(app);
  posenc::cli::RejectIntegersOutsideInt64(app);
  if (std::string known; IsUnknownCommand(app, argc, argv, &known)) {
    std::cerr << "posenc: error: unknown command " << posenc::QuoteForMessage(argv[1]) << "; commands: " << known
              << " (posenc --help)\n";
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int status = app.exit(e);  // prints help, or the usage error
    return status == 0 ? 0 : 2;
  } catch (const posenc::Error& e) {
    std::cerr << "posenc: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "posenc: error: " << e.what() << "\n";
    return 1;
  }
  if (!StandardOutputWritten()) {
    std::cerr << "posenc: error: standard output cannot be written: " << std::strerror(errno) << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

// Building the commands can throw too (std::bad_alloc): an error, never an
// uncaught exception.
int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "posenc: error: " << e.what() << "\n";
    return 1;
  }
}
