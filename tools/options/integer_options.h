// CLI11 reads integer options with strtoll, which clamps a value past the
// int64 range to INT64_MAX without saying so (--query-offset
// 99999999999999999999 became 9223372036854775807 and then overflowed).
// RejectIntegersOutsideInt64 adds a check to every integer option of `app`
// and its subcommands, so such a value is a usage error naming the option.
//
// IntegerAtLeast(low) is the lower bound of an integer option with an
// integer message ("--threads: value -1 must be an integer >= 0"; CLI11's
// NonNegativeNumber said "not in range 0.000000 to 17976931...").
#pragma once

#include <cstdint>

#include <CLI/CLI.hpp>

namespace posenc::cli {

void RejectIntegersOutsideInt64(CLI::App& app);

CLI::Validator IntegerAtLeast(std::int64_t low);

}  // namespace posenc::cli
