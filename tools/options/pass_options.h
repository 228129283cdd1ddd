// How a perplexity pass runs each window, for `ppl` and `study`: one
// forward pass, or token by token through the cache (--decode), and then
// which keys the cache keeps (--keys-as-written).
#pragma once

#include <CLI/CLI.hpp>

#include "posenc/perplexity.h"

namespace posenc::cli {

struct PassOptions {
  bool decode = false;
  bool keys_as_written = false;

  PerplexityPass pass() const { return decode ? PerplexityPass::kDecode : PerplexityPass::kPrefill; }
  CachedKeys cached_keys() const { return keys_as_written ? CachedKeys::kAsWritten : CachedKeys::kRelowered; }
  // As JSON and grids write them: "prefill" or "decode", "relowered" or "as-written".
  const char* pass_name() const { return decode ? "decode" : "prefill"; }
  const char* keys_name() const { return keys_as_written ? "as-written" : "relowered"; }
};

// --decode and --keys-as-written (which needs --decode).
void AddPassOptions(CLI::App& app, PassOptions& o);

}  // namespace posenc::cli
