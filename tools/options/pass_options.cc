#include "options/pass_options.h"

namespace posenc::cli {

void AddPassOptions(CLI::App& app, PassOptions& o) {
  app.add_flag("--decode", o.decode,
               "Run each window token by token through the cache (as generation does: the decode kernels and "
               "--activations int8 are what is scored) instead of one forward pass");
  app.add_flag("--keys-as-written", o.keys_as_written,
               "With --decode: plan the method again every step for the tokens so far, the cache keeping each key "
               "as its step rotated it (Hugging Face's generation under a dynamic method: dynamic NTK's stale keys)")
      ->needs("--decode");
}

}  // namespace posenc::cli
