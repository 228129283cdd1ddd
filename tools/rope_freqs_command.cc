#include "commands.h"
namespace posenc::cli { void AddRopeCommands(CLI::App&) {} }
