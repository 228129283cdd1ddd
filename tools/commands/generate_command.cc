// posenc generate --prompt TEXT | --prompt-file F [--chat [--system TEXT]]
//                 [--max-tokens N] [--method M] [--model FILE] [--threads T] [--json]
//
// Greedy generation from a GGUF model (Llama family or Gemma 3) (include/posenc/generation.h):
// the prompt prefilled in one pass, then one token at a time through the
// key/value cache, printed as it comes; prefill and decode tokens/s at the
// end. The context-extension method is planned for the prompt plus
// --max-tokens, so a method runs as it would over the whole sequence.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <limits>
#include <optional>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "options/model_inputs.h"
#include "options/integer_options.h"
#include "posenc/chat_template.h"
#include "posenc/context_extension.h"
#include "posenc/error.h"
#include "posenc/generation.h"
#include "posenc/input_file.h"
#include "posenc/parallel.h"

namespace posenc::cli {
namespace {

constexpr const char* kOp = "generate";
constexpr std::uint64_t kMaxPromptBytes = std::uint64_t{64} << 20;

struct GenerateCommandOptions {
  std::string model{kDefaultModel.path};
  WeightOptions weights;
  std::string prompt;
  std::string prompt_file;
  bool chat = false;
  std::string system;
  std::int64_t max_tokens = 64;
  std::string method = "none";
  int threads = 0;
  bool json = false;
};

void Run(const GenerateCommandOptions& o) {
  if (o.threads > 0) SetNumThreads(o.threads);
  Require(o.prompt.empty() != o.prompt_file.empty(), kOp, "--prompt", Verbatim{o.prompt.empty() ? "none" : "both"},
          "give exactly one of --prompt and --prompt-file");
  Require(o.max_tokens >= 1, kOp, "--max-tokens", o.max_tokens, "must be >= 1");
  Require(o.chat || o.system.empty(), kOp, "--system", o.system, "needs --chat");
  const ContextExtension extension = ParseContextExtension(o.method);  // before the model loads
  const std::string user = o.prompt_file.empty() ? o.prompt
                                                 : ReadRegularFile(kOp, "--prompt-file", o.prompt_file, kMaxPromptBytes,
                                                                   "the prompt is read in memory");

  const LoadedModel loaded = LoadModel(o.model, o.weights);
  std::optional<ChatPrompt> chat;
  if (o.chat) chat = FormatChat(loaded.tokenizer, o.system, user);
  std::vector<std::int32_t> prompt;
  try {
    prompt = EncodePrompt(loaded.tokenizer, chat ? chat->text : user);
  } catch (const Error& e) {
    ThrowError(kOp, o.prompt_file.empty() ? "--prompt" : "--prompt-file",
               FormatValue(o.prompt_file.empty() ? std::string("...") : o.prompt_file),
               std::string("must be UTF-8 text (") + e.what() + ")");
  }
  Require(!prompt.empty(), kOp, "--prompt", Verbatim{"\"\""}, "must have at least one token");

  const DecoderHyperparams& hp = loaded.model.hparams();
  const auto prompt_tokens = static_cast<std::int64_t>(prompt.size());
  Require(o.max_tokens <= std::numeric_limits<std::int64_t>::max() - prompt_tokens, kOp, "--max-tokens", o.max_tokens,
          "the prompt's " + std::to_string(prompt_tokens) + " tokens + --max-tokens = " +
              std::to_string(static_cast<std::uint64_t>(prompt_tokens) + static_cast<std::uint64_t>(o.max_tokens)) +
              " must be <= 2^63 - 1 (the length the method is planned for)");
  const std::int64_t length = prompt_tokens + o.max_tokens;
  const ExtensionPlan plan = PlanModelExtension(extension, hp, length);
  GenerateOptions options{.max_tokens = o.max_tokens};
  if (loaded.tokenizer.eos_id()) options.stop_tokens.push_back(*loaded.tokenizer.eos_id());
  if (chat) options.stop_tokens.push_back(chat->end_of_turn);

  const GenerateResult r = Generate(loaded.model, prompt, plan.attention, options, [&](std::int32_t token) {
    const bool stop =
        std::find(options.stop_tokens.begin(), options.stop_tokens.end(), token) != options.stop_tokens.end();
    if (o.json || stop) return;  // the end-of-text token is not text
    const std::string piece = loaded.tokenizer.Decode(std::span(&token, 1));
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  });
  const std::string generated = loaded.tokenizer.Decode(r.tokens);
  const std::string method = FormatContextExtension(plan.resolved);
  if (o.json) {
    nlohmann::ordered_json out{{"text", generated},
                               {"tokens", r.tokens},
                               {"prompt_tokens", r.prompt_tokens},
                               {"generated_tokens", r.tokens.size()},
                               {"prefill_tokens_per_s", r.PrefillTokensPerSecond()},
                               {"decode_tokens_per_s", r.DecodeTokensPerSecond()},
                               {"prefill_seconds", r.prefill_seconds},
                               {"decode_seconds", r.decode_seconds},
                               {"method", method},
                               {"train_length", hp.context_length},
                               {"threads", NumThreads()},
                               {"model", o.model}};
    // Generated bytes need not be UTF-8 (a token can end inside a character): U+FFFD for those.
    std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return;
  }
  std::printf("\n");
  std::fprintf(stderr,
               "generate: %lld prompt tokens prefilled at %.1f tokens/s (%.2f s); %zu tokens generated, decode %.1f "
               "tokens/s; method %s, %d threads\n",
               static_cast<long long>(r.prompt_tokens), r.PrefillTokensPerSecond(), r.prefill_seconds, r.tokens.size(),
               r.DecodeTokensPerSecond(), method.c_str(), NumThreads());
}

}  // namespace

void AddGenerateCommand(CLI::App& app) {
  auto o = std::make_shared<GenerateCommandOptions>();
  CLI::App* cmd = app.add_subcommand("generate", "Greedy generation from a GGUF model through its key/value cache");
  AddModelOption(*cmd, o->model);
  AddWeightOptions(*cmd, o->weights);
  cmd->add_option("--prompt", o->prompt, "The prompt text");
  cmd->add_option("--prompt-file", o->prompt_file, "A UTF-8 file holding the prompt");
  cmd->add_flag(
      "--chat", o->chat,
      "Wrap the prompt as one user turn of the model's chat format: ChatML (SmolLM2-Instruct, Qwen) or Gemma's");
  cmd->add_option("--system", o->system, "With --chat: a system turn before it");
  cmd->add_option("--max-tokens", o->max_tokens, "Tokens to generate at most (stops at end of text)")
      ->capture_default_str();
  cmd->add_option("--method", o->method,
                  ExtensionMethodsSynopsis() + " (defaults from the training length and prompt + max tokens)")
      ->capture_default_str();
  cmd->add_option("--threads", o->threads, "Threads (default: all)")->check(IntegerAtLeast(0));
  cmd->add_flag("--json", o->json, "Print one JSON object at the end instead of streaming the text");
  cmd->callback([o] {
    o->model = ResolveInput(kOp, "--model", o->model, kDefaultModel);
    Run(*o);
  });
}

}  // namespace posenc::cli
