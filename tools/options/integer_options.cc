#include "options/integer_options.h"

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace posenc::cli {
namespace {

// Decimal integers must fit int64; anything else is left to CLI11's own
// conversion (which reports text that is not a number).
std::string CheckFitsInt64(const std::string& text) {
  const std::size_t digits_begin = (!text.empty() && (text[0] == '-' || text[0] == '+')) ? 1 : 0;
  if (digits_begin == text.size() || text.find_first_not_of("0123456789", digits_begin) != std::string::npos) {
    return {};
  }
  std::int64_t value = 0;
  const char* begin = text.data() + (text[0] == '+' ? 1 : 0);
  const auto result = std::from_chars(begin, text.data() + text.size(), value);
  if (result.ec == std::errc::result_out_of_range) {
    return "value " + text + " does not fit in a signed 64-bit integer [-2^63, 2^63 - 1]";
  }
  return {};
}

}  // namespace

CLI::Validator IntegerAtLeast(std::int64_t low) {
  return {[low](const std::string& text) -> std::string {
            // strtod reads every form CLI11 converts ("-1", "-1e0"); text
            // that is no number is left to CLI11's own message.
            char* end = nullptr;
            const double value = std::strtod(text.c_str(), &end);
            if (text.empty() || end != text.c_str() + text.size() || value >= static_cast<double>(low)) return {};
            return "value " + text + " must be an integer >= " + std::to_string(low);
          },
          ">= " + std::to_string(low), "at least " + std::to_string(low)};
}

void RejectIntegersOutsideInt64(CLI::App& app) {
  const CLI::Validator fits_int64(CheckFitsInt64, "", "int64");
  for (CLI::Option* option : app.get_options()) {
    const std::string type = option->get_type_name();
    if (type == "INT") option->check(fits_int64);
  }
  for (CLI::App* sub : app.get_subcommands({})) RejectIntegersOutsideInt64(*sub);
}

}  // namespace posenc::cli
