#include "commands.h"
namespace posenc::cli { void AddBenchCommands(CLI::App&) {} }
