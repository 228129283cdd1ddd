// posenc train --pe SCHEME --tokens N --out CKPT.gguf [--train-len L] [--seed S]
//              [--text FILE] [--d-model D] [--layers N] [--heads H] [--ffn F]
//              [--batch B] [--lr X] [--min-lr X] [--warmup X] [--weight-decay X]
//              [--grad-clip X] [--shaw-clip K] [--t5-buckets N] [--t5-max-distance N]
//              [--rope-theta X] [--name NAME] [--threads T] [--json]
//
// Trains a tiny byte-level model with one position scheme at length L on
// the bytes of a text (include/posenc/tiny_lm_train.h) and saves it as a
// GGUF checkpoint (include/posenc/tiny_lm_checkpoint.h) that `posenc eval`
// reads. The checkpoint appears whole or not at all.
#include <cmath>
#include <cstdio>
#include <limits>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numbers>
#include <span>
#include <string>

#include "commands.h"
#include "options/reuse_freed_memory.h"
#include "options/tiny_lm_options.h"
#include "options/output_files.h"
#include "options/default_inputs.h"
#include "options/integer_options.h"
#include "posenc/error.h"
#include "posenc/input_file.h"
#include "posenc/output_file.h"
#include "posenc/parallel.h"
#include "posenc/tiny_lm_checkpoint.h"
#include "posenc/tiny_lm_eval.h"
#include "posenc/tiny_lm_train.h"
#include "options/train_progress.h"

namespace posenc::cli {
namespace {

constexpr const char* kOp = "train";
constexpr std::uint64_t kMaxCorpusBytes = std::uint64_t{4} << 30;

struct TrainCommandOptions {
  std::string scheme;
  std::string text{kDefaultTrainCorpus.path};
  std::string out;
  std::string name;
  TinyLmFlags flags;
  TinyLmConfig config;  // the flags' config of --pe
  TinyLmTrainOptions train;
  std::int64_t log_every = 0;
  int threads = 0;
  bool json = false;
};

void Run(TrainCommandOptions o) {
  ReuseFreedMemory();
  // Every check before the text is read and an hour of training starts.
  o.config = o.flags.Config(ParsePositionScheme(o.scheme, kOp, "--pe"));
  Require(o.config.train_length >= 2, kOp, "--train-len", o.config.train_length,
          "must be >= 2 (a sequence of one byte has nothing to attend to)");
  Require(o.train.tokens > 0, kOp, "--tokens", o.train.tokens, "must be > 0 (the training budget in bytes)");
  Require(o.log_every >= 0, kOp, "--log-every", o.log_every, "must be >= 0 (0: about 100 entries)");
  // About 100 entries needs the step count, which needs valid options:
  // validated with one entry first, then again with the log's real size.
  o.train.log_every = o.log_every > 0 ? o.log_every : std::numeric_limits<std::int64_t>::max();
  o.train.Validate(o.config);  // the memory estimate too: before the text is read or a buffer allocated
  if (o.log_every == 0) {
    o.train.log_every = std::max<std::int64_t>(1, o.train.Steps(o.config) / 100);
    o.train.Validate(o.config);
  }
  RequireWritableOutput(kOp, "--out", o.out);
  if (o.threads > 0) SetNumThreads(o.threads);
  o.text = ResolveInput(kOp, "--text", o.text, kDefaultTrainCorpus);
  const std::string text = ReadRegularFile(kOp, "--text", o.text, kMaxCorpusBytes, "the corpus is read into memory");
  const std::span<const std::uint8_t> corpus(reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
  Require(static_cast<std::int64_t>(corpus.size()) > o.config.train_length, kOp, "--text", o.text,
          "has " + std::to_string(corpus.size()) +
              " bytes, fewer than one window of --train-len + 1 = " + std::to_string(o.config.train_length + 1));

  const std::string label = std::string(kOp) + " " + o.scheme + " L" + std::to_string(o.config.train_length);
  TrainProgress bar(label);
  const TinyLmTrainResult r =
      TrainTinyLm(o.config, o.train, corpus, [&](const TinyLmTrainProgress& p) { bar.Update(p); });
  bar.Finish();

  TinyLmTrainingInfo info;
  info.name = o.name;
  info.seed = o.train.seed;
  info.tokens = r.tokens;
  info.steps = r.steps;
  info.batch = o.train.batch;
  info.lr = o.train.lr;
  info.final_loss = r.final_loss;
  info.corpus = o.text;
  info.corpus_byte_counts = CountBytes(corpus);
  SaveTinyLmCheckpoint(o.out, o.config, r.params, info);

  const std::int64_t params = TinyLmParameterCount(o.config);
  if (o.json) {
    nlohmann::ordered_json log = nlohmann::ordered_json::array();
    for (const TinyLmTrainLogEntry& e : r.log) {
      log.push_back({{"step", e.step},
                     {"tokens", e.tokens},
                     {"loss", e.loss},
                     {"mean_loss", e.mean_loss},
                     {"lr", e.lr},
                     {"grad_norm", e.grad_norm}});
    }
    nlohmann::ordered_json out{{"out", o.out},
                               {"scheme", o.scheme},
                               {"train_length", o.config.train_length},
                               {"d_model", o.config.d_model},
                               {"layers", o.config.layers},
                               {"heads", o.config.heads},
                               {"ffn_hidden", o.config.ffn_hidden},
                               {"params", params},
                               {"batch", o.train.batch},
                               {"steps", r.steps},
                               {"tokens", r.tokens},
                               {"seed", o.train.seed},
                               {"lr", o.train.lr},
                               {"final_loss", r.final_loss},
                               {"final_bits_per_byte", r.final_loss / std::numbers::ln2},
                               {"tokens_per_s", r.tokens_per_s},
                               {"seconds", r.seconds},
                               {"threads", NumThreads()},
                               {"text", o.text},
                               {"text_bytes", corpus.size()},
                               {"loss_log", log}};
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::printf("trained %s at L %lld (d %lld, %lld layers, %lld heads, ffn %lld: %lld parameters) on %s (%zu bytes)\n",
              o.scheme.c_str(), static_cast<long long>(o.config.train_length), static_cast<long long>(o.config.d_model),
              static_cast<long long>(o.config.layers), static_cast<long long>(o.config.heads),
              static_cast<long long>(o.config.ffn_hidden), static_cast<long long>(params), o.text.c_str(),
              corpus.size());
  std::printf("%lld steps of %lld x %lld bytes = %lld bytes, seed %lld\n", static_cast<long long>(r.steps),
              static_cast<long long>(o.train.batch), static_cast<long long>(o.config.train_length),
              static_cast<long long>(r.tokens), static_cast<long long>(o.train.seed));
  std::printf("final loss %.4f nats/byte (%.3f bits/byte; the mean batch loss of the last 10 steps)\n", r.final_loss,
              r.final_loss / std::numbers::ln2);
  std::printf("%.0f tokens/s, %.1f s (%d threads)\n", r.tokens_per_s, r.seconds, NumThreads());
  std::printf("checkpoint %s\n", o.out.c_str());
}

}  // namespace

void AddTrainCommand(CLI::App& app) {
  auto o = std::make_shared<TrainCommandOptions>();
  CLI::App* train = app.add_subcommand("train", "Train a tiny byte-level model with one position scheme");
  train->add_option("--pe", o->scheme, "Position scheme: " + PositionSchemeList())->required();
  train->add_option("--tokens", o->train.tokens, "Training budget in bytes (predictions)")->required();
  train->add_option("--out", o->out, "Checkpoint to write (GGUF)")->required();
  train->add_option("--seed", o->train.seed, "Seed of the init and of the batches")->capture_default_str();
  train->add_option("--text", o->text, "Training corpus (bytes)")->capture_default_str();
  o->flags.Add(*train);
  AddTinyLmTrainOptions(*train, o->train);
  train->add_option("--name", o->name, "general.name of the checkpoint (default: tiny-lm-SCHEME-LN)");
  train->add_option("--log-every", o->log_every, "Steps between --json loss-log entries (0: about 100 entries)");
  train->add_option("--threads", o->threads, "Threads (default: all)")->check(IntegerAtLeast(0));
  train->add_flag("--json", o->json, "Print one JSON object");
  train->callback([o] { Run(*o); });
}

}  // namespace posenc::cli
