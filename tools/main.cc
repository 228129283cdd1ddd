// posenc: positional encodings for transformers, from the command line.
#include <iostream>

#include "commands.h"
#include "posenc/error.h"

int main(int argc, char** argv) {
  CLI::App app{"posenc: positional encodings for transformers — compute, apply, measure"};
  app.require_subcommand(1);
  posenc::cli::AddRopeCommands(app);
  posenc::cli::AddBenchCommands(app);
  posenc::cli::AddBiasCommands(app);
  posenc::cli::AddSinusoidalCommands(app);
  posenc::cli::AddTableCommands(app);
  posenc::cli::AddAnalyzeCommands(app);
  posenc::cli::AddPplCommand(app);
  posenc::cli::AddStudyCommand(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const posenc::Error& e) {
    std::cerr << "posenc: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "posenc: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
