// posenc bench model [--model FILE.gguf] [--weights stored|f32] [--activations f32|int8] [--ctx N] [--reps R]
//                    [--decode-cache C1,C2,...] [--decode-tokens D] [--methods M1;M2;...]
//                    [--threads T] [--json]
//
// Prefill throughput of the default model (SmolLM2-135M) over one window of
// N tokens (2048 by default), the model FLOPs per token (linear layers,
// causal attention and logits: DecoderModel::ForwardFlops), and the ratio of
// the FLOP/s achieved to the FMA peak measured in the same run.
//
// Decode throughput: for each cache size C (0, 2048 and 8192 by default) the
// cache is filled once, then for each method (plain RoPE, ReRoPE and
// Self-Extend with windows of 512 by default) rewound to C tokens, one untimed step (it lowers
// the cached keys for the method), and D timed single-token steps, best of R
// such runs (as the prefill). A step reads every weight in its stored type
// and the whole cache once, so it is bound by memory: its bytes
// (DecoderModel::WeightBytes + the float32 keys and values of the cache) times
// tokens/s are compared with the copy bandwidth, the best of copies run
// between the decode repetitions (at least kCopyRuns of them). On a shared
// host the memory's speed moves from minute to minute (a virtual machine of
// this project's read 45-49 GB/s, then 67-76 GB/s ten minutes later): a
// copy timed only before or after the decode can catch another state than
// the decode did, so the two are sampled over the same minutes.
//
// Memory: the resident bytes the loaded model added to the process
// (/proc/self/statm), against the GGUF file's size.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <unistd.h>

#include "commands/bench_floors.h"
#include "commands.h"
#include "options/integer_options.h"
#include "machine_limits.h"
#include "posenc/context_extension.h"
#include "posenc/generation.h"
#include "options/model_inputs.h"
#include "posenc/parallel.h"
#include "rope_workload.h"

namespace posenc::cli {
namespace {

struct BenchModelOptions {
  std::string model{kDefaultModel.path};
  WeightOptions weights;
  std::int64_t ctx = 2048;
  int reps = 2;
  std::vector<std::int64_t> decode_caches{0, 2048, 8192};
  std::int64_t decode_tokens = 32;
  // Windows of 512 tokens, so that most cached keys take the far path (the
  // model's own defaults leave every key below 8,192 near).
  std::vector<ContextExtension> methods =
      ParseContextExtensionList("none;rerope:window=512;self-extend:group=8,window=512");
  int threads = 0;
  bool json = false;
};

// The process's resident bytes (Linux /proc/self/statm; 0 where absent).
double ResidentBytes() {
  std::ifstream statm("/proc/self/statm");
  double pages = 0, resident = 0;
  if (!(statm >> pages >> resident)) return 0;
  return resident * static_cast<double>(sysconf(_SC_PAGESIZE));
}

// The copy bandwidth's timed runs, at the least (each copies both ways).
constexpr int kCopyRuns = 7;

struct DecodeRun {
  std::string method;
  std::int64_t cache_tokens = 0;
  double tokens_per_s = 0;
  double bytes_per_token = 0;
  double gbps = 0;
  double ratio = 0;
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

// Decode speed for each cache size and method (see the top of the file).
// A copy runs after each timed repetition (`copy`).
std::vector<DecodeRun> MeasureDecode(const BenchModelOptions& o, const DecoderModel& model, std::mt19937& rng,
                                     bench::CopyProbe& copy, const StepLog& log) {
  const DecoderHyperparams& hp = model.hparams();
  std::vector<DecodeRun> runs;
  for (const std::int64_t cached : o.decode_caches) {
    const std::int64_t filled = std::max<std::int64_t>(1, cached);  // a step needs a token before it
    std::vector<std::int32_t> context(static_cast<std::size_t>(filled));
    for (auto& t : context) t = static_cast<std::int32_t>(rng() % hp.vocab_size);
    log("decode: a cache of " + std::to_string(filled) + " tokens");
    DecoderCache cache = model.NewCache();
    std::int32_t next = 0;
    const auto take_argmax = [&](std::span<const std::int64_t>, std::span<const float> logits) {
      next = Argmax(logits);
    };
    const std::int64_t last = filled - 1;
    model.Extend(cache, context, model.DefaultAttention(), std::span(&last, 1), take_argmax);
    for (const ContextExtension& method : o.methods) {
      const ExtensionPlan plan = PlanModelExtension(method, hp, filled + o.decode_tokens + 1);
      const std::string name = FormatContextExtension(plan.resolved);  // every parameter
      const AttentionOptions& attention = plan.attention;
      log("decode: " + name + ", " + std::to_string(o.decode_tokens) + " steps after " + std::to_string(filled) +
          " cached tokens");
      const std::int64_t row = 0;
      const auto step = [&] { model.Extend(cache, std::span(&next, 1), attention, std::span(&row, 1), take_argmax); };
      // Best of the repetitions, as the prefill and the copy bandwidth it is
      // compared with: each one from the same cache.
      double seconds = std::numeric_limits<double>::infinity();
      for (int rep = 0; rep < o.reps; ++rep) {
        cache.Truncate(filled);
        step();  // untimed: lowers the cached keys for this method
        seconds = std::min(seconds, bench::Seconds([&] {
                             for (std::int64_t i = 0; i < o.decode_tokens; ++i) step();
                           }));
        copy.Run();
      }
      DecodeRun run{name, cached, static_cast<double>(o.decode_tokens) / seconds};
      // The cache read by the average step: keys and values of every layer.
      run.bytes_per_token = model.WeightBytes() + model.KeyValueBytes(filled + 1 + o.decode_tokens / 2);
      runs.push_back(run);
    }
  }
  return runs;
}

void Run(const BenchModelOptions& o) {
  if (o.threads > 0) SetNumThreads(o.threads);
  const StepLog log;
  log("loading " + o.model);
  const double resident_before = ResidentBytes();
  const LoadedModel loaded = LoadModel(o.model, o.weights);
  const double resident_bytes = ResidentBytes() - resident_before;
  const auto file_bytes = static_cast<double>(std::filesystem::file_size(o.model));
  const DecoderModel& model = loaded.model;
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

  log("the copy bandwidth: its buffers and a warm-up copy");
  bench::CopyProbe probe;
  std::vector<DecodeRun> runs = MeasureDecode(o, model, rng, probe, log);
  log("the copy bandwidth: copies up to " + std::to_string(kCopyRuns) + " timed runs");
  probe.RunUntil(kCopyRuns);
  const bench::CopyBandwidth copy = probe.Best();
  log("done");
  for (DecodeRun& run : runs) {
    run.gbps = run.bytes_per_token * run.tokens_per_s / 1e9;
    run.ratio = run.gbps / copy.gbps;
  }
  const bool stored = o.weights.storage == WeightStorage::kAsStored;
  const char* weights = stored ? "stored" : "f32";
  const char* activations = o.weights.activations == DotActivations::kInt8 ? "int8" : "f32";

  std::vector<BenchFloor> floors{{"prefill ratio to the FMA peak >= 0.7", ratio >= 0.7}};
  const std::int64_t largest = *std::max_element(o.decode_caches.begin(), o.decode_caches.end());
  const DecodeRun* plain = nullptr;
  for (const DecodeRun& run : runs) {
    if (run.method == FormatContextExtension(ContextExtension{})) {
      floors.push_back(
          {"decode (none) after " + std::to_string(run.cache_tokens) + " tokens >= 0.5 of the copy bandwidth",
           run.ratio >= 0.5});
      if (run.cache_tokens == largest) plain = &run;
    }
  }
  for (const DecodeRun& run : runs) {
    if (plain != nullptr && run.cache_tokens == largest && &run != plain && run.method != plain->method) {
      floors.push_back({run.method + " step after " + std::to_string(largest) + " tokens <= 1.5x none's",
                        run.tokens_per_s * 1.5 >= plain->tokens_per_s});
    }
  }
  if (stored) floors.push_back({"resident model <= 1.5x the GGUF file", resident_bytes <= 1.5 * file_bytes});

  if (o.json) {
    nlohmann::ordered_json decode = nlohmann::ordered_json::array();
    for (const DecodeRun& run : runs) {
      decode.push_back({{"method", run.method},
                        {"cache_tokens", run.cache_tokens},
                        {"tokens_per_s", run.tokens_per_s},
                        {"bytes_per_token", run.bytes_per_token},
                        {"gbps", run.gbps},
                        {"ratio", run.ratio}});
    }
    nlohmann::ordered_json out{{"tokens_per_s", tokens_per_s},
                               {"flops_per_token", flops / static_cast<double>(o.ctx)},
                               {"gflops", gflops},
                               {"peak_gflops", peak.gflops},
                               {"ratio", ratio},
                               {"seconds", seconds},
                               {"weights", weights},
                               {"activations", activations},
                               {"weight_bytes", model.WeightBytes()},
                               {"resident_bytes", resident_bytes},
                               {"file_bytes", file_bytes},
                               {"decode", decode},
                               {"copy_gbps", copy.gbps},
                               {"copy_runs", copy.runs},
                               {"ctx", o.ctx},
                               {"threads", NumThreads()},
                               {"target", peak.target},
                               {"model", o.model}};
    std::cout << out.dump(2) << "\n";
    return;
  }
  const DecoderHyperparams& hp = model.hparams();
  std::printf("model %s: %lld layers, d %lld, %lld/%lld heads x %lld, ffn %lld, vocab %lld (loaded in %.1f s)\n",
              o.model.c_str(), static_cast<long long>(hp.block_count), static_cast<long long>(hp.embedding_length),
              static_cast<long long>(hp.head_count), static_cast<long long>(hp.head_count_kv),
              static_cast<long long>(hp.head_dim), static_cast<long long>(hp.feed_forward_length),
              static_cast<long long>(hp.vocab_size), loaded.load_seconds);
  std::printf("weights %s, decode activations %s: %.1f MB held, %.1f MB resident for a %.1f MB file (%.2fx)\n", weights,
              activations, model.WeightBytes() / 1e6, resident_bytes / 1e6, file_bytes / 1e6,
              resident_bytes / file_bytes);
  std::printf("prefill of %lld tokens, %d threads, best of %d: %.3f s\n", static_cast<long long>(o.ctx), NumThreads(),
              o.reps, seconds);
  std::printf(
      "%.1f tokens/s, %.1f MFLOP/token, %.1f GFLOP/s = %.1f%% of the FMA peak measured now (%.1f GFLOP/s, %s)\n",
      tokens_per_s, flops / static_cast<double>(o.ctx) / 1e6, gflops, 100 * ratio, peak.gflops, peak.target);
  std::printf(
      "decode, %lld steps each, best of %d, against the copy bandwidth measured between them (%.1f GB/s, best of "
      "%d):\n",
      static_cast<long long>(o.decode_tokens), o.reps, copy.gbps, copy.runs);
  for (const DecodeRun& run : runs) {
    std::printf("  %-34s after %6lld cached tokens: %7.1f tokens/s, %6.1f MB a step = %5.1f GB/s = %5.1f%%\n",
                run.method.c_str(), static_cast<long long>(run.cache_tokens), run.tokens_per_s,
                run.bytes_per_token / 1e6, run.gbps, 100 * run.ratio);
  }
  PrintFloorVerdict(floors);
}

}  // namespace

void AddBenchModelCommand(CLI::App& bench) {
  auto o = std::make_shared<BenchModelOptions>();
  CLI::App* model = bench.add_subcommand(
      "model", std::string("Prefill tokens/s of a GGUF model and its ratio to the FMA peak") + kFloorsHelp);
  AddModelOption(*model, o->model);
  AddWeightOptions(*model, o->weights);
  model->add_option("--ctx", o->ctx, "Tokens in the prefill window")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  model->add_option("--reps", o->reps, "Timed repetitions of the prefill and of each decode run (best counts)")
      ->check(CLI::Range(1, 100));
  model->add_option("--decode-cache", o->decode_caches, "Tokens in the cache before the decode steps (a list)")
      ->delimiter(',')
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  model->add_option("--decode-tokens", o->decode_tokens, "Decode steps timed per cache size and method")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  auto methods = std::make_shared<std::vector<ContextExtension>>(o->methods);
  AddMethodsOption(*model, methods, "\"none;rerope:window=512;self-extend:group=8,window=512\" (decode)");
  model->add_option("--threads", o->threads, "Threads (default: all)")->check(IntegerAtLeast(0));
  model->add_flag("--json", o->json, "Print one JSON object");
  model->callback([o, methods] {
    o->methods = *methods;
    o->model = ResolveInput("bench model", "--model", o->model, kDefaultModel);
    Run(*o);
  });
}

}  // namespace posenc::cli
