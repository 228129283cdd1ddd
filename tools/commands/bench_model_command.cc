// posenc bench model [--model FILE.gguf] [--ctx N] [--reps R] [--decode-cache C]
//                    [--decode-tokens D] [--threads T] [--json]
//
// Prefill throughput of the default model (SmolLM2-135M) over one window of
// N tokens (2048 by default), the model FLOPs per token (linear layers,
// causal attention and logits: LlamaModel::ForwardFlops), and the ratio of
// the FLOP/s achieved to the FMA peak measured in the same run.
//
// Decode throughput: D tokens generated one at a time after C tokens in the
// key/value cache (8192 by default). A decode step reads every weight and
// the whole cache once, so it is bound by memory: its bytes per token
// (float32 weights + the cache's keys and values) times tokens/s is compared
// with the copy bandwidth measured in the same run.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <nlohmann/json.hpp>
#include <random>

#include "commands/bench_floors.h"
#include "commands.h"
#include "options/integer_options.h"
#include "machine_limits.h"
#include "posenc/generation.h"
#include "options/model_inputs.h"
#include "posenc/parallel.h"
#include "rope_workload.h"

namespace posenc::cli {
namespace {

struct BenchModelOptions {
  std::string model{kDefaultModel.path};
  std::int64_t ctx = 2048;
  int reps = 2;
  std::int64_t decode_cache = 8192;
  std::int64_t decode_tokens = 16;
  int threads = 0;
  bool json = false;
};

// One line on stderr per step, with the time since the start: the whole
// benchmark takes half a minute or more on the default model, and nothing
// else is printed until it ends.
class StepLog {
 public:
  void operator()(const std::string& step) const {
    std::fprintf(stderr, "bench model [%5.1f s]: %s\n",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(), step.c_str());
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

void Run(const BenchModelOptions& o) {
  if (o.threads > 0) SetNumThreads(o.threads);
  const StepLog log;
  log("loading " + o.model);
  const LoadedModel loaded = LoadModel(o.model);
  const LlamaModel& model = loaded.model;
  // Token ids do not change the work; a fixed random sequence keeps runs alike.
  std::mt19937 rng(1);
  std::vector<std::int32_t> tokens(o.ctx);
  for (auto& t : tokens) t = static_cast<std::int32_t>(rng() % model.hparams().vocab_size);
  const AttentionOptions attention = model.DefaultAttention();

  log("measuring the FMA peak");
  const bench::FmaPeak peak = bench::MeasureFmaPeak();
  double seconds = 1e300;
  for (int rep = 0; rep < o.reps; ++rep) {
    log("prefill of " + std::to_string(o.ctx) + " tokens, repetition " + std::to_string(rep + 1) + " of " +
        std::to_string(o.reps));
    seconds = std::min(seconds, bench::Seconds([&] { model.NextTokenNll(tokens, attention); }));
  }
  const double flops = model.ForwardFlops(o.ctx);
  const double tokens_per_s = static_cast<double>(o.ctx) / seconds;
  const double gflops = flops / seconds / 1e9;
  const double ratio = gflops / peak.gflops;

  // Decode: a prefilled cache, then single-token steps (what generation does).
  const LlamaHyperparams& hp = model.hparams();
  std::vector<std::int32_t> context(static_cast<std::size_t>(o.decode_cache));
  for (auto& t : context) t = static_cast<std::int32_t>(rng() % hp.vocab_size);
  log("decode: " + std::to_string(o.decode_tokens) + " steps after a cache of " + std::to_string(o.decode_cache) +
      " tokens");
  const GenerateResult decoded = Generate(model, context, attention, {.max_tokens = o.decode_tokens + 1});
  log("measuring the copy bandwidth");
  const bench::CopyBandwidth copy = bench::MeasureCopyBandwidth();
  log("done");
  const double decode_tokens_per_s = decoded.DecodeTokensPerSecond();
  const double weight_bytes = 4.0 * (model.ForwardFlops(1) - model.ForwardFlops(0)) / 2;  // one float per multiply-add
  const double cache_bytes = 4.0 * 2 * static_cast<double>(hp.block_count * hp.head_count_kv * hp.head_dim) *
                             static_cast<double>(o.decode_cache);
  const double decode_gbps = (weight_bytes + cache_bytes) * decode_tokens_per_s / 1e9;
  const double decode_ratio = decode_gbps / copy.gbps;
  if (o.json) {
    nlohmann::ordered_json out{{"tokens_per_s", tokens_per_s},
                               {"flops_per_token", flops / static_cast<double>(o.ctx)},
                               {"gflops", gflops},
                               {"peak_gflops", peak.gflops},
                               {"ratio", ratio},
                               {"seconds", seconds},
                               {"decode_tokens_per_s", decode_tokens_per_s},
                               {"decode_cache_tokens", o.decode_cache},
                               {"decode_bytes_per_token", weight_bytes + cache_bytes},
                               {"decode_gbps", decode_gbps},
                               {"copy_gbps", copy.gbps},
                               {"decode_ratio", decode_ratio},
                               {"ctx", o.ctx},
                               {"threads", NumThreads()},
                               {"target", peak.target},
                               {"model", o.model}};
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::printf("model %s: %lld layers, d %lld, %lld/%lld heads x %lld, ffn %lld, vocab %lld (loaded in %.1f s)\n",
              o.model.c_str(), static_cast<long long>(hp.block_count), static_cast<long long>(hp.embedding_length),
              static_cast<long long>(hp.head_count), static_cast<long long>(hp.head_count_kv),
              static_cast<long long>(hp.head_dim), static_cast<long long>(hp.feed_forward_length),
              static_cast<long long>(hp.vocab_size), loaded.load_seconds);
  std::printf("prefill of %lld tokens, f32, %d threads, best of %d: %.3f s\n", static_cast<long long>(o.ctx),
              NumThreads(), o.reps, seconds);
  std::printf(
      "%.1f tokens/s, %.1f MFLOP/token, %.1f GFLOP/s = %.1f%% of the FMA peak measured now (%.1f GFLOP/s, %s)\n",
      tokens_per_s, flops / static_cast<double>(o.ctx) / 1e6, gflops, 100 * ratio, peak.gflops, peak.target);
  std::printf(
      "decode after %lld cached tokens, %lld steps: %.1f tokens/s, %.0f MB read per token (weights + cache) = %.1f "
      "GB/s = %.1f%% of the copy bandwidth measured now (%.1f GB/s)\n",
      static_cast<long long>(o.decode_cache), static_cast<long long>(o.decode_tokens), decode_tokens_per_s,
      (weight_bytes + cache_bytes) / 1e6, decode_gbps, 100 * decode_ratio, copy.gbps);
  PrintFloorVerdict({{"prefill ratio to the FMA peak >= 0.35", ratio >= 0.35}});
}

}  // namespace

void AddBenchModelCommand(CLI::App& bench) {
  auto o = std::make_shared<BenchModelOptions>();
  CLI::App* model = bench.add_subcommand(
      "model", std::string("Prefill tokens/s of a GGUF model and its ratio to the FMA peak") + kFloorsHelp);
  model->add_option("--model", o->model, "GGUF model file (llama family)")->capture_default_str();
  model->add_option("--ctx", o->ctx, "Tokens in the prefill window")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  model->add_option("--reps", o->reps, "Timed repetitions (best counts)")->check(CLI::Range(1, 100));
  model->add_option("--decode-cache", o->decode_cache, "Tokens in the cache before the decode steps")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  model->add_option("--decode-tokens", o->decode_tokens, "Decode steps timed")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  model->add_option("--threads", o->threads, "Threads (default: all)")->check(IntegerAtLeast(0));
  model->add_flag("--json", o->json, "Print one JSON object");
  model->callback([o] {
    o->model = ResolveInput("bench model", "--model", o->model, kDefaultModel);
    Run(*o);
  });
}

}  // namespace posenc::cli
